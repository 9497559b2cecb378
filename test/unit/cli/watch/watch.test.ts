// Specifies `sluice watch` against a fake admin API on a temp Unix socket (fake-event-server.ts): the
// filters it sends, one line per event (human and --json), resuming with Last-Event-ID after a cut with
// nothing lost or doubled, the bounded reconnect, refusals and usage errors, the --ask flow with a scripted
// terminal, and the real CLI (node bin/sluice.js, built dist/) as a child process.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { MAX_RECONNECT_FAILURES, runWatchCommand, type WatchArgs } from '../../../../src/cli/watch/watch.js';
import { waitForExit } from '../../../support/child-process.js';
import { waitUntil, withTimeout } from '../../../support/wait.js';
import { FakeEventServer } from './fake-event-server.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..');
const NOW = Date.parse('2026-12-05T10:00:00.000Z');
const TS = '2026-12-05T09:59:58.000Z';

beforeAll(() => {
  process.env['TZ'] = 'UTC';
});

let server: FakeEventServer;
beforeEach(async () => {
  server = await FakeEventServer.start();
});
afterEach(async () => {
  await server.close();
});

interface Running {
  readonly done: Promise<number>;
  readonly out: () => string;
  readonly err: () => string;
  readonly prompt: () => string;
  readonly stdin: PassThrough;
  /** Interrupts (SIGINT) and resolves with the exit code. */
  stop(): Promise<number>;
}

/** Starts runWatchCommand in-process with a fast backoff, a fixed clock and captured output. */
function watch(args: Partial<WatchArgs> = {}, terminal: { isStdinTty?: boolean } = {}): Running {
  let out = '';
  let err = '';
  let prompt = '';
  let interrupt: (() => void) | null = null;
  const stdin = new PassThrough();
  const promptOutput = new PassThrough();
  promptOutput.setEncoding('utf8');
  promptOutput.on('data', (s: string) => (prompt += s));
  const done = runWatchCommand(
    { admin: server.admin, backoff: { initialMs: 2, maxMs: 8 }, ...args },
    {
      stdout: (s) => (out += s),
      stderr: (s) => (err += s),
      isColor: false,
      stdin,
      isStdinTty: terminal.isStdinTty ?? false,
      promptOutput,
      isPromptTty: false,
      onInterrupt: (handler) => (interrupt = handler),
      now: () => NOW,
    },
  );
  return {
    done,
    out: () => out,
    err: () => err,
    prompt: () => prompt,
    stdin,
    stop: () => {
      interrupt?.();
      return withTimeout(done, 5000, 'watch ended after the interrupt');
    },
  };
}

const lines = (text: string): string[] => text.split('\n').filter((l) => l !== '');
const untilLines = (w: Running, n: number): Promise<void> => waitUntil(() => lines(w.out()).length >= n, { timeoutMs: 5000, label: `${n} line(s) printed` });
const decision = (n: number): Record<string, unknown> => ({
  ts: TS,
  decision: n % 2 === 0 ? 'deny' : 'allow',
  reason: n % 2 === 0 ? 'destination_not_granted' : 'granted',
  grant: 'g-1',
  generation: 'run-7',
  destination: `https://host${n}.test:443`,
  request: null,
  listener: 'shared',
  connection: `c${n}`,
  hop: 1,
  status: n % 2 === 0 ? 403 : 200,
});

describe('sluice watch: the stream', () => {
  it('sends the filters in the query string and prints each event as one --json line', async () => {
    // `gap` passes every filter: accepted in --kind, never sent.
    const w = watch({ json: true, grant: 'g 1', generation: 'run/7', kind: 'decision, ask,gap,ask' });
    await server.waitForStream(1);
    const request = server.streamRequests[0];
    expect(request?.url).toBe('/v1/events?grant=g%201&generation=run%2F7&kind=decision,ask');
    expect(request?.headers['accept']).toBe('text/event-stream');
    expect(request?.headers['last-event-id']).toBeUndefined();
    expect(request?.headers['authorization']).toBeUndefined();
    const ask = { ts: TS, ask: 'a-1', grant: 'g 1', generation: 'run/7', destination: 'https://pypi.org:443', expiresAt: '2026-12-05T10:00:30Z', waiting: 1 };
    server.publish('decision', decision(1));
    server.publish('ask', ask);
    await untilLines(w, 2);
    expect(lines(w.out()).map((l) => JSON.parse(l) as unknown)).toEqual([
      { id: 1, event: 'decision', data: decision(1) },
      { id: 2, event: 'ask', data: ask },
    ]);
    expect(await w.stop()).toBe(0);
    expect(w.err()).toBe('');
  });

  it('prints one human line per event, a gap included', async () => {
    const w = watch();
    await server.waitForStream(1);
    server.publish('decision', decision(1));
    server.publish('decision', decision(2));
    server.publish('gap', { from: 3, to: 4, reason: 'ring' }, true);
    server.publish('grant', { ts: TS, action: 'revoke', grant: 'g-1', generation: 'run-7' });
    await untilLines(w, 4);
    expect(lines(w.out())).toEqual([
      '09:59:58  ALLOW     granted  g-1  https://host1.test:443',
      '09:59:58  DENY      destination_not_granted  g-1  https://host2.test:443',
      '10:00:00  GAP       lost events 3..4 (ring)',
      '09:59:58  GRANT     revoke  g-1  generation run-7',
    ]);
    expect(await w.stop()).toBe(0);
  });

  it('skips an event whose data is not a JSON object, saying so, and goes on', async () => {
    const w = watch({ json: true });
    await server.waitForStream(1);
    server.writeRaw('event: decision\ndata: not json\n\nid: 70\nevent: grant\ndata: [1]\n\n');
    // The fake's own ids start at 1, below the skipped event's 70: published from 71 on.
    for (let n = 1; n <= 71; n++) server.publish('decision', decision(n));
    await untilLines(w, 1);
    expect(await w.stop()).toBe(0);
    expect(lines(w.out()).map((l) => (JSON.parse(l) as { id: number }).id)).toEqual([71]);
    expect(w.err()).toBe('sluice watch: decision event: data is not a JSON object; skipped\nsluice watch: grant event 70: data is not a JSON object; skipped\n');
  });

  it('cuts a stream whose event outgrows the bound, and reconnects', async () => {
    const w = watch({ json: true });
    await server.waitForStream(1);
    server.publish('decision', decision(1));
    await untilLines(w, 1);
    server.writeRaw(`id: 2\nevent: decision\ndata: ${'x'.repeat(1024 * 1024 + 1)}`);
    await server.waitForStream(2);
    expect(server.streamRequests[1]?.headers['last-event-id']).toBe('1');
    server.publish('decision', decision(3));
    await untilLines(w, 2);
    expect(await w.stop()).toBe(0);
    expect(w.err()).toContain('sluice watch: the stream was cut (an event of the stream is larger than 1048576 characters); reconnecting in 2 ms\n');
  });

  it('resumes after a cut with Last-Event-ID: every event once, none doubled', async () => {
    const w = watch({ json: true });
    await server.waitForStream(1);
    for (let n = 1; n <= 3; n++) server.publish('decision', decision(n));
    await untilLines(w, 3);
    server.dropStreams();
    // Published while nobody is connected: the resumed stream must bring them.
    server.publish('decision', decision(4));
    server.publish('decision', decision(5));
    await server.waitForStream(2);
    expect(server.streamRequests[1]?.headers['last-event-id']).toBe('3');
    await untilLines(w, 5);
    // A repeat on the same connection (a server that sends an id twice) is not printed twice.
    server.writeRaw(`id: 5\nevent: decision\ndata: ${JSON.stringify(decision(5))}\n\n`);
    server.publish('decision', decision(6));
    await untilLines(w, 6);
    expect(await w.stop()).toBe(0);
    expect(lines(w.out()).map((l) => (JSON.parse(l) as { id: number }).id)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(w.err()).toMatch(/^sluice watch: the stream (ended|was cut)[^\n]*; reconnecting in 2 ms\nsluice watch: reconnected\n$/);
  });

  it("prints a restarted Sluice's restart gap and its events, whose ids begin again", async () => {
    const w = watch({ json: true });
    await server.waitForStream(1);
    for (let n = 1; n <= 3; n++) server.publish('decision', decision(n));
    await untilLines(w, 3);
    server.restart();
    await server.waitForStream(2);
    expect(server.streamRequests[1]?.headers['last-event-id']).toBe('3');
    server.publish('decision', decision(10));
    await untilLines(w, 5);
    expect(await w.stop()).toBe(0);
    const printed = lines(w.out()).map((l) => JSON.parse(l) as { id: number; event: string });
    expect(printed.map((e) => `${e.id} ${e.event}`)).toEqual(['1 decision', '2 decision', '3 decision', '0 gap', '1 decision']);
    expect(w.err()).not.toContain('restarted');
  });

  it('prints the events of a server whose ids begin again without a gap, with a notice', async () => {
    server.sendsRestartGap = false;
    const w = watch({ json: true });
    await server.waitForStream(1);
    for (let n = 1; n <= 3; n++) server.publish('decision', decision(n));
    await untilLines(w, 3);
    server.restart();
    await server.waitForStream(2);
    server.publish('decision', decision(10));
    server.publish('decision', decision(11));
    await untilLines(w, 5);
    expect(await w.stop()).toBe(0);
    expect(lines(w.out()).map((l) => (JSON.parse(l) as { id: number }).id)).toEqual([1, 2, 3, 1, 2]);
    expect(w.err()).toContain('event ids restarted at 1 (was 3): Sluice restarted; events in between may be lost');
  });

  it(`gives up after ${MAX_RECONNECT_FAILURES} failed reconnects in a row, naming the admin address, with a growing backoff`, async () => {
    const w = watch({ backoff: { initialMs: 10, maxMs: 40 } });
    await server.waitForStream(1);
    server.eventsReply = { status: 503, body: { error: 'not_ready' } };
    server.dropStreams();
    expect(await withTimeout(w.done, 10_000, 'watch gave up')).toBe(1);
    expect(server.streamRequests).toHaveLength(1 + MAX_RECONNECT_FAILURES);
    expect(w.err()).toContain(`sluice watch: gave up after ${MAX_RECONNECT_FAILURES} failed reconnects to ${server.admin}: the admin socket at ${server.socketPath} answered 503 not_ready\n`);
    expect(w.err()).toContain(`(${MAX_RECONNECT_FAILURES - 1}/${MAX_RECONNECT_FAILURES})`);
    // The wait before each retry doubles from 10 ms (after the cut) to at most 40 ms: 20, 40, 40, …
    // (lower bounds only: a loaded machine is late, and a timer is never early by more than 1 ms).
    const at = server.streamRequests.map((r) => r.at);
    for (let k = 1; k < MAX_RECONNECT_FAILURES; k++) expect((at[k + 1] ?? 0) - (at[k] ?? 0), `wait before retry ${k + 1}`).toBeGreaterThanOrEqual(Math.min(10 * 2 ** k, 40) - 1);
    expect(w.err()).toContain('reconnecting in 20 ms (1/10)');
    expect(w.err()).toContain('reconnecting in 40 ms (2/10)');
  });

  it('counts only failures in a row: a stream that opens again resets the count', async () => {
    const w = watch({ json: true });
    await server.waitForStream(1);
    server.eventsReply = { status: 503, body: { error: 'not_ready' } };
    server.dropStreams();
    await server.waitForStream(MAX_RECONNECT_FAILURES);
    server.eventsReply = null;
    await server.waitForStream(MAX_RECONNECT_FAILURES + 1);
    server.eventsReply = { status: 503, body: { error: 'not_ready' } };
    server.dropStreams();
    await server.waitForStream(2 * MAX_RECONNECT_FAILURES);
    server.eventsReply = null;
    await server.waitForStream(2 * MAX_RECONNECT_FAILURES + 1);
    server.publish('decision', decision(1));
    await untilLines(w, 1);
    expect(await w.stop()).toBe(0);
  });

  it('keeps reconnecting while the socket is gone, then gives up with exit 1', async () => {
    const w = watch();
    await server.waitForStream(1);
    await server.stopListening();
    expect(await withTimeout(w.done, 10_000, 'watch gave up')).toBe(1);
    expect(w.err()).toContain(`gave up after ${MAX_RECONNECT_FAILURES} failed reconnects to ${server.admin}: cannot reach the admin socket at ${server.socketPath}: is sluice running? (ENOENT)`);
  });
});

describe('sluice watch: refusals and usage', () => {
  it('exits 1 at once when Sluice cannot be reached at the start', async () => {
    const w = watch({ admin: `unix:${path.join(server.dir, 'absent.sock')}` });
    expect(await withTimeout(w.done, 5000, 'watch ended')).toBe(1);
    expect(w.err()).toBe(`sluice watch: cannot reach the admin socket at ${path.join(server.dir, 'absent.sock')}: is sluice running? (ENOENT)\n`);
  });

  it('sends the admin token as a bearer token, and exits 1 on 401 without ever printing it', async () => {
    server.token = 'watch-admin-token-5';
    const refused = watch();
    expect(await withTimeout(refused.done, 5000, 'watch ended')).toBe(1);
    expect(refused.err()).toBe(`sluice watch: the admin socket at ${server.socketPath} answered 401 admin_token_invalid\n`);
    const accepted = watch({ adminToken: 'watch-admin-token-5', json: true });
    await server.waitForStream(2);
    server.publish('decision', decision(1));
    await untilLines(accepted, 1);
    expect(await accepted.stop()).toBe(0);
    expect(accepted.out() + accepted.err() + refused.err()).not.toContain('watch-admin-token-5');
  });

  it('exits 1 when the admin API refuses the stream (a Sluice without /v1/events)', async () => {
    server.eventsReply = { status: 404, body: { error: 'not_found' } };
    const w = watch();
    expect(await withTimeout(w.done, 5000, 'watch ended')).toBe(1);
    expect(w.err()).toContain('answered 404 not_found');
  });

  it('exits 2 when the admin API refuses a filter (400: bad input, never 1)', async () => {
    server.eventsReply = { status: 400, body: { error: 'grant_id_invalid' } };
    const w = watch({ grant: 'no spaces allowed' });
    expect(await withTimeout(w.done, 5000, 'watch ended')).toBe(2);
    expect(w.err()).toBe(`sluice watch: the admin socket at ${server.socketPath} answered 400 grant_id_invalid\n`);
  });

  it.each<[string, Partial<WatchArgs>, boolean, RegExp]>([
    ['an unknown kind', { kind: 'decision,bogus' }, false, /--kind decision,bogus: expected a comma-separated list of decision, ask, ask_answered, grant, gap/],
    ['an empty kind list', { kind: ',' }, false, /--kind ,: expected/],
    ['a kind list of gap alone', { kind: 'gap' }, false, /--kind gap: a gap always shows; name at least one other kind/],
    ['an admin address that is neither unix: nor http:', { admin: 'ftp://x' }, false, /--admin ftp:\/\/x: expected unix:\/path or http:\/\/host:port/],
    ['--ask without a terminal', { ask: true }, false, /--ask needs a terminal/],
  ])('exits 2 on %s, before connecting', async (_name, args, isStdinTty, message) => {
    const w = watch(args, { isStdinTty });
    expect(await w.done).toBe(2);
    expect(w.err()).toMatch(message);
    expect(server.requests).toHaveLength(0);
  });
});

describe('sluice watch --ask (a scripted terminal)', () => {
  const ask = (id: string, host: string): Record<string, unknown> => ({
    ts: TS,
    ask: id,
    grant: 'g-1',
    generation: 'run-7',
    destination: `https://${host}:443`,
    expiresAt: '2026-12-05T10:00:30Z',
    waiting: 1,
  });
  const promptFor = (host: string): string => `allow https://${host}:443 for grant g-1? [o]nce / [g]rant / [d]eny once / [D]eny for grant / [s]kip: `;
  const count = (text: string, part: string): number => text.split(part).length - 1;
  const untilPrompt = (w: Running, text: string, n = 1): Promise<void> =>
    waitUntil(() => count(w.prompt(), text) >= n, { timeoutMs: 5000, label: `"${text}" shown ${n} time(s)` });

  it('prompts one ask at a time, posts the answer, and reports answered, already answered and gone', async () => {
    server.pendingAsks = [ask('a-0', 'old.test')];
    server.askReplies.set('a-1', { status: 409, body: { error: 'ask_answered' } });
    server.askReplies.set('a-3', { status: 404, body: { error: 'ask_not_found' } });
    const w = watch({ ask: true, kind: 'decision' }, { isStdinTty: true });
    await server.waitForStream(1);
    // --ask needs the ask kinds whatever --kind says.
    expect(server.streamRequests[0]?.url).toBe('/v1/events?kind=decision,ask,ask_answered');
    // An ask raised before the watch started comes from GET /v1/asks.
    await untilPrompt(w, promptFor('old.test'));
    server.publish('ask', ask('a-1', 'one.test'));
    server.publish('ask', ask('a-2', 'two.test'));
    await untilLines(w, 2);
    w.stdin.write('x\n');
    await untilPrompt(w, 'answer o, g, d, D or s');
    w.stdin.write('g\n');
    expect(JSON.parse((await server.waitForAnswer(1)).body)).toEqual({ decision: 'allow', scope: 'grant' });
    expect(server.askAnswers[0]?.url).toBe('/v1/asks/a-0');
    await untilPrompt(w, 'ask a-0: answered, allow for the grant');

    await untilPrompt(w, promptFor('one.test'));
    // Answered elsewhere while it waits in the queue: it leaves the queue, and is never prompted.
    server.publish('ask_answered', { ts: TS, ask: 'a-2', grant: 'g-1', destination: 'https://two.test:443', decision: 'deny', scope: 'once', answeredBy: 'admin' });
    await untilLines(w, 3);
    w.stdin.write('o\n');
    expect(JSON.parse((await server.waitForAnswer(2)).body)).toEqual({ decision: 'allow', scope: 'once' });
    await untilPrompt(w, 'ask a-1: already answered');

    server.publish('ask', ask('a-3', 'three.test'));
    await untilPrompt(w, promptFor('three.test'));
    w.stdin.write('D\n');
    expect(JSON.parse((await server.waitForAnswer(3)).body)).toEqual({ decision: 'deny', scope: 'grant' });
    await untilPrompt(w, 'ask a-3: gone');

    server.publish('ask', ask('a-4', 'four.test'));
    await untilPrompt(w, promptFor('four.test'));
    w.stdin.write('s\n');
    await untilPrompt(w, 'ask a-4: skipped (still pending)');

    // Its own prompt closes when someone else answers first.
    server.publish('ask', ask('a-5', 'five.test'));
    await untilPrompt(w, promptFor('five.test'));
    server.publish('ask_answered', { ts: TS, ask: 'a-5', grant: 'g-1', destination: 'https://five.test:443', decision: 'timeout', scope: null, answeredBy: 'timeout' });
    await untilPrompt(w, 'ask a-5: timed out');
    server.publish('ask', ask('a-7', 'seven.test'));
    await untilPrompt(w, promptFor('seven.test'));
    server.publish('ask_answered', { ts: TS, ask: 'a-7', grant: 'g-1', destination: 'https://seven.test:443', decision: 'allow', scope: 'once', answeredBy: 'admin' });
    await untilPrompt(w, 'ask a-7: answered elsewhere');

    // A replayed ask is not asked again; the next new one is.
    server.publish('ask', ask('a-1', 'one.test'));
    server.publish('ask', ask('a-6', 'six.test'));
    await untilPrompt(w, promptFor('six.test'));
    w.stdin.write('d\n');
    expect(JSON.parse((await server.waitForAnswer(4)).body)).toEqual({ decision: 'deny', scope: 'once' });
    await untilPrompt(w, 'ask a-6: answered, deny once');

    expect(await w.stop()).toBe(0);
    expect(server.askAnswers.map((r) => r.url)).toEqual(['/v1/asks/a-0', '/v1/asks/a-1', '/v1/asks/a-3', '/v1/asks/a-6']);
    expect(count(w.prompt(), promptFor('two.test'))).toBe(0);
    expect(count(w.prompt(), promptFor('one.test'))).toBe(1);
    // stdout holds the event lines only; prompts and outcomes are on the prompt's stream.
    expect(lines(w.out()).every((l) => /^\d\d:\d\d:\d\d {2}(ASK|ANSWERED) /.test(l))).toBe(true);
    expect(lines(w.out())).toHaveLength(11);
  });

  it('never sends the terminal a control character from the stream or the admin API, in a prompt or an outcome', async () => {
    server.askReplies.set('a\u001b[2J', { status: 500, body: { error: 'oops\u0007\u001b]0;title\u0007' } });
    const w = watch({ ask: true }, { isStdinTty: true });
    await server.waitForStream(1);
    server.publish('ask', { ...ask('a\u001b[2J', 'x.test'), grant: 'g-1\u009b31m' });
    await untilPrompt(w, 'allow https://x.test:443 for grant g-1\\x9b31m? [o]nce');
    w.stdin.write('o\n');
    await server.waitForAnswer(1);
    await untilPrompt(w, 'ask a\\x1b[2J: not answered: 500 oops\\x07\\x1b]0;title\\x07');
    expect(await w.stop()).toBe(0);
    expect(w.prompt() + w.out() + w.err()).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
  });

  it('asks again after a gap for what the lost events may have held (GET /v1/asks)', async () => {
    const w = watch({ ask: true }, { isStdinTty: true });
    await server.waitForStream(1);
    await waitUntil(() => server.requests.filter((r) => r.url === '/v1/asks').length === 1, { timeoutMs: 5000, label: 'first GET /v1/asks' });
    server.pendingAsks = [ask('a-9', 'lost.test')];
    server.publish('gap', { from: 1, to: 40, reason: 'slow_reader' }, true);
    await untilPrompt(w, promptFor('lost.test'));
    expect(await w.stop()).toBe(0);
  });

  it('ends with exit 0 when the terminal input ends', async () => {
    const w = watch({ ask: true }, { isStdinTty: true });
    await server.waitForStream(1);
    w.stdin.end();
    expect(await withTimeout(w.done, 5000, 'watch ended at the end of input')).toBe(0);
  });
});

describe('sluice watch: the real CLI (node bin/sluice.js, built dist/)', () => {
  const children: ChildProcess[] = [];
  afterEach(() => {
    for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });

  function sluiceWatch(args: readonly string[]): { child: ChildProcess; out: () => string; err: () => string } {
    const env: NodeJS.ProcessEnv = { ...process.env, TZ: 'UTC' };
    delete env['SLUICE_ADMIN_TOKEN'];
    delete env['NO_COLOR'];
    const child = spawn(process.execPath, [path.join(ROOT, 'bin/sluice.js'), 'watch', '--admin', server.admin, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    let out = '';
    let err = '';
    child.stdout?.setEncoding('utf8').on('data', (s: string) => (out += s));
    child.stderr?.setEncoding('utf8').on('data', (s: string) => (err += s));
    return { child, out: () => out, err: () => err };
  }

  it('follows the stream with --json and the filters, and ends with exit 0 on SIGINT', async () => {
    const run = sluiceWatch(['--json', '--grant', 'g-1', '--kind', 'decision']);
    await server.waitForStream(1, 15_000);
    expect(server.streamRequests[0]?.url).toBe('/v1/events?grant=g-1&kind=decision');
    server.publish('decision', decision(1));
    server.publish('decision', decision(2));
    await waitUntil(() => lines(run.out()).length >= 2, { timeoutMs: 5000, label: 'two JSON lines from the child' });
    expect(lines(run.out()).map((l) => JSON.parse(l) as unknown)).toEqual([
      { id: 1, event: 'decision', data: decision(1) },
      { id: 2, event: 'decision', data: decision(2) },
    ]);
    run.child.kill('SIGINT');
    expect(await waitForExit(run.child, 5000)).toBe(true);
    expect({ code: run.child.exitCode, stderr: run.err() }).toEqual({ code: 0, stderr: '' });
  });

  it('prints human lines without colour when stdout is not a terminal', async () => {
    const run = sluiceWatch([]);
    await server.waitForStream(1, 15_000);
    server.publish('decision', decision(2));
    await waitUntil(() => lines(run.out()).length >= 1, { timeoutMs: 5000, label: 'a line from the child' });
    expect(run.out()).toBe('09:59:58  DENY      destination_not_granted  g-1  https://host2.test:443\n');
    run.child.kill('SIGINT');
    expect(await waitForExit(run.child, 5000)).toBe(true);
    expect(run.child.exitCode).toBe(0);
  });

  it('exits 2 on a usage error (--kind), and 1 when Sluice is not there', async () => {
    const usage = sluiceWatch(['--kind', 'nope']);
    expect(await waitForExit(usage.child, 15_000)).toBe(true);
    expect({ code: usage.child.exitCode, stderr: usage.err() }).toEqual({ code: 2, stderr: expect.stringContaining('--kind nope: expected') as unknown });
    await server.stopListening();
    const absent = sluiceWatch([]);
    expect(await waitForExit(absent.child, 15_000)).toBe(true);
    expect({ code: absent.child.exitCode, stderr: absent.err() }).toEqual({ code: 1, stderr: expect.stringContaining('is sluice running? (ENOENT)') as unknown });
  });
});

describe('sluice watch loads no proxy', () => {
  it('src/cli/index.ts (what main.ts imports for watch) reaches no file of proxy/, app.ts or config/', () => {
    const seen = new Set<string>();
    const visit = (file: string): void => {
      if (seen.has(file)) return;
      seen.add(file);
      const text = readFileSync(file, 'utf8');
      for (const m of text.matchAll(/^\s*(?:import|export)\s[^;'"]*?\sfrom\s*['"](\.[^'"]+)['"]/gm)) {
        if (/^\s*(?:import|export)\s+type\s/.test(m[0])) continue;
        visit(path.resolve(path.dirname(file), (m[1] ?? '').replace(/\.js$/, '.ts')));
      }
    };
    visit(path.join(ROOT, 'src/cli/index.ts'));
    expect(seen.has(path.join(ROOT, 'src/cli/watch/watch.ts'))).toBe(true);
    const loaded = [...seen].map((f) => path.relative(path.join(ROOT, 'src'), f));
    expect(loaded.filter((f) => /^(proxy\/|app\.ts|config\/)/.test(f))).toEqual([]);
  });
});
