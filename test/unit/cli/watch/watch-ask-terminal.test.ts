// Drives `sluice watch --ask` (node bin/sluice.js, built dist/) in a real terminal: a tmux pane on a
// private tmux server, keys sent with send-keys, the screen read with capture-pane. Checks the prompt, the
// answers posted, an event printed above an open prompt without breaking it, colour on a TTY, and Ctrl-C
// ending the watch with exit 0. Skipped only when tmux is missing, and never under CI=true.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findExecutable } from '../../../support/child-process.js';
import { waitUntil } from '../../../support/wait.js';
import { FakeEventServer } from './fake-event-server.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..');
const tmux = findExecutable('tmux');
const isCi = process.env['CI'] === 'true';
const SESSION = 'watch';
const TS = new Date().toISOString();

describe.skipIf(tmux === undefined && !isCi)('sluice watch --ask in a real terminal (tmux)', () => {
  let server: FakeEventServer;
  let tmuxSocket = '';

  function tmuxRun(...args: string[]): string {
    expect(tmux, 'tmux is required to drive a real terminal (CI=true never skips this test)').toBeDefined();
    const result = spawnSync(tmux ?? 'tmux', ['-S', tmuxSocket, ...args], { encoding: 'utf8', timeout: 10_000 });
    expect(result.status, `tmux ${args.join(' ')}: ${result.stderr}`).toBe(0);
    return result.stdout;
  }

  /** The pane's text (wrapped lines joined); with colour escapes when `withEscapes`. */
  const screen = (withEscapes = false): string => tmuxRun('capture-pane', '-p', '-J', ...(withEscapes ? ['-e'] : []), '-t', SESSION);
  const untilScreen = (text: string, label = text): Promise<void> => waitUntil(() => screen().includes(text), { timeoutMs: 10_000, label: `the pane shows ${label}` });
  const promptFor = (host: string): string => `allow https://${host}:443 for grant g-1? [o]nce / [g]rant / [d]eny once / [D]eny for grant / [s]kip:`;
  const ask = (id: string, host: string): Record<string, unknown> => ({
    ts: TS,
    ask: id,
    grant: 'g-1',
    generation: null,
    destination: `https://${host}:443`,
    expiresAt: new Date(Date.now() + 60_000).toISOString(),
    waiting: 1,
  });

  beforeAll(async () => {
    server = await FakeEventServer.start();
    tmuxSocket = path.join(server.dir, 'tmux.sock');
    const bin = path.join(ROOT, 'bin/sluice.js');
    // The exit status stays on screen, and `exec cat` keeps the pane open until the server is killed.
    const command = `cd '${ROOT}' && env -u SLUICE_ADMIN_TOKEN -u NO_COLOR '${process.execPath}' '${bin}' watch --ask --admin '${server.admin}'; echo "watch exited $?"; exec cat`;
    tmuxRun('-f', '/dev/null', 'new-session', '-d', '-s', SESSION, '-x', '200', '-y', '40', command);
  });

  afterAll(async () => {
    if (tmux !== undefined) spawnSync(tmux, ['-S', tmuxSocket, 'kill-server'], { timeout: 10_000 });
    await server.close();
  });

  it('prompts, posts each answer, keeps the prompt whole under new events, and ends with exit 0 on Ctrl-C', async () => {
    await server.waitForStream(1, 15_000);
    server.publish('ask', ask('a-1', 'pypi.org'));
    await untilScreen(promptFor('pypi.org'));
    // Colour on a terminal: the ASK label is yellow.
    expect(screen(true)).toMatch(/\x1b\[33mASK\x1b\[(0|39)m/);
    tmuxRun('send-keys', '-t', SESSION, 'g', 'Enter');
    expect(JSON.parse((await server.waitForAnswer(1, 10_000)).body)).toEqual({ decision: 'allow', scope: 'grant' });
    await untilScreen('ask a-1: answered, allow for the grant');

    server.askReplies.set('a-2', { status: 409, body: { error: 'ask_answered' } });
    server.publish('ask', ask('a-2', 'files.pythonhosted.org'));
    await untilScreen(promptFor('files.pythonhosted.org'));
    // A decision while the prompt is open is printed above it, and the prompt is drawn again below.
    server.publish('decision', { ts: TS, decision: 'deny', reason: 'destination_not_granted', grant: 'g-2', generation: null, destination: 'https://evil.test:443' });
    await untilScreen('DENY      destination_not_granted  g-2  https://evil.test:443');
    await waitUntil(() => (screen().trimEnd().split('\n').at(-1) ?? '') === promptFor('files.pythonhosted.org'), {
      timeoutMs: 10_000,
      label: 'the prompt redrawn as the last line',
    });
    tmuxRun('send-keys', '-t', SESSION, 'o', 'Enter');
    expect(JSON.parse((await server.waitForAnswer(2, 10_000)).body)).toEqual({ decision: 'allow', scope: 'once' });
    await untilScreen('ask a-2: already answered');

    tmuxRun('send-keys', '-t', SESSION, 'C-c');
    await untilScreen('watch exited 0');
  });
});
