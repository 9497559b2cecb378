#!/usr/bin/env node
// What an ask costs (issue 27, "Done means"; UX review 2026-12-04 finding 2): how long a held hop takes
// to go on once the supervisor answers allow, and that a grant's `ask` field costs nothing on a hop its
// rules name. Sluice runs as users run it: a real `node bin/sluice.js start` child with a token listener,
// audit on to a file and the admin API on a Unix socket, one grant with `ask: {timeoutMs: 10000}` and one
// without, both naming `tcp://origin.test:<echo>`; a second echo port that no rule names is the asked
// destination. The Sluice fixture is the tests' own (test/support/sluice-process.ts), loaded through
// Vite's module runner (a devDependency already), as bench/proxy-auth.mjs does.
// Then (unless --no-readers) whether a reader of GET /v1/events slows tunnel setup (issue 27, "a reader
// that stops reading does not change tunnel setup latency"): no reader, one that reads every decision,
// and one that stopped reading, interleaved round by round; each reader is a child of its own.
//
//   npm run bench:ask [-- --rounds 3 --n 500 --warmup 50 --asks 200 --fan 50 --fan-rounds 20
//                         --reader-rounds 6 --reader-n 1000 --stall-fill 2000 --no-readers --no-build --no-save]
//
// Everything stays on 127.0.0.1. Every child runs in its own process group and is killed on exit,
// failure, SIGINT and SIGTERM. Every socket operation has a timeout, every batch a count, every poll a
// bound, and the whole run a deadline.
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { exitHarness, privateBuild, sh, shOr, startOriginsChild } from './lib/harness.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '..');

// ---------------------------------------------------------------------------------------------------
// Origin mode: two echo origins (the granted one and the asked one) in a child of their own, so the
// client's event loop measures only the client side.
if (process.argv[2] === '--serve-origins') {
  const echo = () =>
    net.createServer((s) => {
      s.on('error', () => s.destroy());
      s.pipe(s);
    });
  const granted = echo();
  const asked = echo();
  await new Promise((r) => granted.listen(0, '127.0.0.1', 511, r));
  await new Promise((r) => asked.listen(0, '127.0.0.1', 511, r));
  process.stdout.write(`${JSON.stringify({ granted: granted.address().port, asked: asked.address().port })}\n`);
  // Dies with the parent: stdin closes when the bench exits, however it exits.
  process.stdin.on('close', () => process.exit(0)).resume();
  await new Promise(() => undefined);
}

// ---------------------------------------------------------------------------------------------------
// Reader mode: one supervisor on GET /v1/events?kind=decision, in a child of its own so its reading
// costs the timing client nothing. `read` takes every byte as it comes; `stall` reads the response head,
// then pause()s: Node reads on only until the socket's readable buffer (16 KiB on Node 20) is full, then
// stops reading, so the kernel queue fills and Sluice's writes start to fail. Commands arrive as JSON
// lines on stdin: `{"op":"expect","events":N}` answers once N decisions arrived (bounded); `{"op":
// "resume"}` reads again and answers once a `gap` with reason `slow_reader` arrived (bounded). Answers
// are JSON lines on stdout. Exits when stdin closes.
/** A reader child's answer (events delivered, the gap after a resume): far beyond what either takes. */
const READER_BOUND_MS = 10_000;
if (process.argv[2] === '--serve-reader') {
  const [socketPath, mode] = process.argv.slice(3);
  const out = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);
  const state = { events: 0, bytes: 0, gaps: [] };
  let text = '';
  let isHeadRead = false;
  let waiter;
  const answer = () => {
    if (waiter === undefined || !waiter.isDone()) return;
    clearTimeout(waiter.timer);
    waiter = undefined;
    out(state);
  };
  const socket = net.connect({ path: socketPath });
  socket.on('error', (e) => {
    out({ error: `event stream: ${e.code ?? e.message}` });
    process.exit(1);
  });
  socket.once('connect', () => socket.write('GET /v1/events?kind=decision HTTP/1.1\r\nHost: sluice\r\nAccept: text/event-stream\r\n\r\n'));
  socket.on('data', (chunk) => {
    state.bytes += chunk.length;
    text += chunk.toString('latin1');
    if (!isHeadRead) {
      const end = text.indexOf('\r\n\r\n');
      if (end < 0) return;
      if (text.slice(9, 12) !== '200') {
        out({ error: `GET /v1/events answered ${text.split('\r\n')[0]}` });
        process.exit(1);
      }
      isHeadRead = true;
      text = text.slice(end + 4);
      let inode = null;
      try {
        inode = Number(/^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/self/fd/${socket._handle.fd}`))?.[1] ?? NaN) || null;
      } catch {
        // no /proc: the bench reports the kernel queues as unknown
      }
      out({ ready: true, inode });
      if (mode === 'stall') socket.pause();
    }
    // Each event is one write on Sluice's side, so one chunk of the chunked body: whole between the
    // chunk-size lines; a read may still end inside one, which stays in `text` for the next read.
    const re = /event: (\w+)\ndata: ([^\n]*)\n\n/g;
    let last = 0;
    for (let m = re.exec(text); m !== null; m = re.exec(text)) {
      last = re.lastIndex;
      if (m[1] === 'gap') state.gaps.push(JSON.parse(m[2]));
      else state.events += 1;
    }
    text = text.slice(last);
    answer();
  });
  socket.on('close', () => {
    out({ error: 'event stream closed by Sluice' });
    process.exit(1);
  });
  let input = '';
  process.stdin.on('data', (c) => {
    input += c;
    for (let nl = input.indexOf('\n'); nl >= 0; nl = input.indexOf('\n')) {
      const cmd = JSON.parse(input.slice(0, nl));
      input = input.slice(nl + 1);
      const timer = setTimeout(() => {
        waiter = undefined;
        out({ ...state, timedOut: true });
      }, READER_BOUND_MS);
      if (cmd.op === 'expect') waiter = { timer, isDone: () => state.events >= cmd.events };
      else waiter = { timer, isDone: () => state.gaps.some((g) => g.reason === 'slow_reader') };
      if (cmd.op === 'resume') socket.resume();
      answer();
    }
  });
  process.stdin.on('close', () => process.exit(0));
  await new Promise(() => undefined);
}

// ---------------------------------------------------------------------------------------------------
// Options
const argv = process.argv.slice(2);
const flag = (name) => argv.includes(name);
const NUMERIC = { '--rounds': 3, '--n': 500, '--warmup': 50, '--asks': 200, '--fan': 50, '--fan-rounds': 20, '--reader-rounds': 6, '--reader-n': 1000, '--stall-fill': 2000 };
const USAGE = `options: --rounds N (default 3) --n N (tunnels per grant per round, 500) --warmup N (50) --asks N (held hops per round, 200) --fan N (hops held on one ask, 50) --fan-rounds N (per round, 20) --reader-rounds N (rounds of no reader / reading / stalled, 6) --reader-n N (tunnels per condition per round, 1000) --stall-fill N (untimed tunnels that fill a stalled reader's queues first, 2000) --no-readers --no-build --no-save`;
const num = (name) => {
  const i = argv.indexOf(name);
  if (i < 0) return NUMERIC[name];
  const v = Number(argv[i + 1]);
  if (!Number.isInteger(v) || v < 1) {
    console.error(`${name} needs a positive integer, got ${JSON.stringify(argv[i + 1])}`);
    process.exit(2);
  }
  return v;
};
const known = new Set([...Object.keys(NUMERIC), '--no-readers', '--no-build', '--no-save', '--help']);
for (let i = 0; i < argv.length; i += 1) {
  if (!known.has(argv[i])) {
    console.error(`unknown option ${argv[i]}; ${USAGE}`);
    process.exit(2);
  }
  if (argv[i] in NUMERIC) i += 1;
}
if (flag('--help')) {
  console.log(`npm run bench:ask [-- …]  (see bench/README.md#ask-release-latency)\n${USAGE}`);
  process.exit(0);
}
const ROUNDS = num('--rounds');
const N = num('--n');
const WARMUP = num('--warmup');
const ASKS = num('--asks');
const FAN = num('--fan');
const FAN_ROUNDS = num('--fan-rounds');
const READER_ROUNDS = num('--reader-rounds');
const READER_N = num('--reader-n');
const STALL_FILL = num('--stall-fill');
/** Untimed fill tunnels in flight at once: fills a stalled reader fast without queueing at the listener. */
const FILL_CONCURRENCY = 8;
/** Sluice drops a reader's stream once its socket closes: seen in `ss` within this bound. */
const STREAM_GONE_BOUND_MS = 2_000;
/** The issue's target for a held hop's release after the answer. */
const TARGET_P99_MS = 20;
/** The grant's ask timeout: far beyond any measured release, so no sample is a timeout in disguise. */
const ASK_TIMEOUT_MS = 10_000;
const OP_TIMEOUT_MS = 5_000;
/** A held CONNECT is answered within the ask timeout (by us, or by approval_timeout): a little beyond it. */
const HELD_TIMEOUT_MS = ASK_TIMEOUT_MS + 2_000;
const ASK_SEEN_BOUND_MS = 2_000;
/** FAN hops must all be connected and held before the answer: longer than one takes, well within the ask timeout. */
const FAN_SEEN_BOUND_MS = 5_000;
const MAX_ERRORS_PER_BATCH = 10;
const RUN_DEADLINE_MS = 10 * 60_000;

// ---------------------------------------------------------------------------------------------------
// Every child we start is stopped on every way out; a private copy of Sluice (bench/lib/harness.mjs).
const { cleanups, cleanup } = exitHarness(RUN_DEADLINE_MS);
const BUILD = path.join(HERE, '.build', 'sluice-ask');
const build = () => privateBuild(ROOT, BUILD, flag('--no-build'));

// ---------------------------------------------------------------------------------------------------
// Measurements
const CLK_TCK = Number(shOr('getconf', ['CLK_TCK'], '100')) || 100;
/** utime + stime of one process, in µs; 0 once it is gone. */
function cpuUs(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / CLK_TCK;
  } catch {
    return 0;
  }
}
const now = () => process.hrtime.bigint();
const usSince = (t0, t1 = now()) => Number(t1 - t0) / 1000;
const percentile = (sorted, p) => (sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]);
const median = (v) => percentile([...v].sort((a, b) => a - b), 50);
const ECHO = Buffer.alloc(32, 0x61);

/**
 * One tunnel's setup: connect, CONNECT (or, `direct`, nothing), read the head, send 32 B, resolve at the
 * first echoed byte. `auth` null: straight to the origin, the no-proxy baseline.
 */
function tunnelOnce(port, target, auth) {
  return new Promise((resolve) => {
    const t0 = now();
    const socket = net.connect({ host: '127.0.0.1', port, noDelay: true });
    let head = '';
    let open = auth === null;
    const done = (err, us) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(err === undefined ? { us } : { error: err });
    };
    const timer = setTimeout(() => done(`timeout after ${OP_TIMEOUT_MS} ms`), OP_TIMEOUT_MS);
    socket.once('error', (e) => done(e.code ?? e.message));
    socket.once('close', () => done('closed before the echo'));
    socket.once('connect', () => socket.write(auth === null ? ECHO : `CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n${auth}\r\n`));
    socket.on('data', (chunk) => {
      if (open) {
        done(undefined, usSince(t0));
        return;
      }
      head += chunk.toString('latin1');
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      const status = head.slice(9, 12);
      if (status !== '200') {
        done(`status ${status}: ${/proxy-status: [^\r]*/i.exec(head)?.[0] ?? head.split('\r\n')[0]}`);
        return;
      }
      open = true;
      if (head.length > end + 4) done('bytes before the echo');
      else socket.write(ECHO);
    });
  });
}

/**
 * A CONNECT that will be held on an ask. `sent` settles when the CONNECT is written; `answered` when the
 * response head is complete, with the moment its first byte arrived (the status line: `HTTP/1.1 200`).
 */
function heldConnect(port, target, auth) {
  const socket = net.connect({ host: '127.0.0.1', port, noDelay: true });
  let head = '';
  let firstAt;
  let settle;
  const answered = new Promise((r) => (settle = r));
  const finish = (outcome) => {
    if (settle === undefined) return;
    const s = settle;
    settle = undefined;
    clearTimeout(timer);
    socket.removeListener('data', onData);
    s(outcome);
  };
  const timer = setTimeout(() => finish({ error: `no answer within ${HELD_TIMEOUT_MS} ms` }), HELD_TIMEOUT_MS);
  const onData = (chunk) => {
    firstAt ??= now();
    head += chunk.toString('latin1');
    const end = head.indexOf('\r\n\r\n');
    if (end < 0) return;
    const status = head.slice(9, 12);
    if (status !== '200') finish({ error: `status ${status}: ${/proxy-status: [^\r]*/i.exec(head)?.[0] ?? head.split('\r\n')[0]}` });
    else if (head.length > end + 4) finish({ error: 'bytes after the 200 before any were sent' });
    else finish({ at: firstAt });
  };
  socket.on('data', onData);
  socket.on('error', (e) => finish({ error: e.code ?? e.message }));
  socket.on('close', () => finish({ error: 'closed before the response head' }));
  const sent = new Promise((resolve) => {
    socket.once('connect', () => {
      socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n${auth}\r\n`);
      resolve(now());
    });
    socket.once('error', () => resolve(undefined));
  });
  return { socket, sent, answered };
}

/** Proves an opened tunnel reaches the origin: 32 B out, the same 32 B back, bounded. Not timed. */
function echoes(socket) {
  return new Promise((resolve) => {
    let got = 0;
    const done = (err) => {
      clearTimeout(timer);
      socket.removeListener('data', onData);
      resolve(err);
    };
    const timer = setTimeout(() => done(`no echo within ${OP_TIMEOUT_MS} ms`), OP_TIMEOUT_MS);
    const onData = (chunk) => {
      got += chunk.length;
      if (got >= ECHO.length) done(got === ECHO.length ? undefined : 'more bytes than were sent');
    };
    socket.on('data', onData);
    socket.write(ECHO);
  });
}

/**
 * The supervisor's side: one keep-alive HTTP/1.1 connection to the admin Unix socket, one request at a
 * time, written by hand so the moment before the write is the moment measured.
 */
function adminClient(socketPath) {
  const socket = net.connect({ path: socketPath });
  let buf = Buffer.alloc(0);
  let pending;
  let broken;
  const fail = (why) => {
    broken ??= why;
    pending?.({ error: broken });
  };
  socket.on('error', (e) => fail(e.code ?? e.message));
  socket.on('close', () => fail('admin connection closed'));
  socket.on('data', (chunk) => {
    buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
    const end = buf.indexOf('\r\n\r\n');
    if (end < 0 || pending === undefined) return;
    const head = buf.subarray(0, end).toString('latin1');
    const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? NaN);
    if (!Number.isInteger(length)) {
      fail(`admin answer without content-length: ${head.split('\r\n')[0]}`);
      return;
    }
    if (buf.length < end + 4 + length) return;
    const at = now();
    const text = buf.subarray(end + 4, end + 4 + length).toString('utf8');
    buf = buf.subarray(end + 4 + length);
    let body;
    try {
      body = JSON.parse(text);
    } catch {
      fail(`admin answer not JSON: ${text.slice(0, 120)}`);
      return;
    }
    const p = pending;
    pending = undefined;
    p({ status: Number(head.slice(9, 12)), body, at });
  });
  const ready = new Promise((resolve) => {
    socket.once('connect', () => resolve(undefined));
    socket.once('error', (e) => resolve(e.code ?? e.message));
  });
  return {
    /** Resolves `{status, body, sentAt, at}` or `{error}`; never rejects. */
    async request(method, route, json) {
      const notReady = await ready;
      if (notReady !== undefined) return { error: `admin connect: ${notReady}` };
      if (broken !== undefined) return { error: broken };
      if (pending !== undefined) return { error: 'admin client busy' };
      const payload = json === undefined ? '' : JSON.stringify(json);
      const bytes = `${method} ${route} HTTP/1.1\r\nHost: sluice\r\n${payload === '' ? '' : `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(payload)}\r\n`}\r\n${payload}`;
      let sentAt;
      const answer = await new Promise((resolve) => {
        const timer = setTimeout(() => {
          broken ??= `admin ${method} ${route}: no answer within ${OP_TIMEOUT_MS} ms`;
          pending = undefined;
          resolve({ error: broken });
        }, OP_TIMEOUT_MS);
        pending = (a) => {
          clearTimeout(timer);
          resolve(a);
        };
        sentAt = now();
        socket.write(bytes);
      });
      return answer.error === undefined ? { ...answer, sentAt } : answer;
    },
    close: () => socket.destroy(),
  };
}

/**
 * Polls GET /v1/asks every 1 ms until an ask of `grant` for `port` has `waiting` hops held on it, bounded.
 * A supervisor without the event stream does just this; the poll period bounds how stale `seenUs` is.
 */
async function waitForAsk(admin, grant, port, waiting, boundMs) {
  const t0 = now();
  for (let polls = 1; ; polls += 1) {
    const r = await admin.request('GET', '/v1/asks');
    if (r.error !== undefined) return { error: r.error };
    if (r.status !== 200 || !Array.isArray(r.body.asks)) return { error: `GET /v1/asks answered ${r.status}` };
    const ask = r.body.asks.find((a) => a.grant === grant && String(a.destination).endsWith(`:${port}`));
    if (ask !== undefined && ask.waiting >= waiting) return { ask, polls };
    if (usSince(t0) > boundMs * 1000) return { error: `no ask with ${waiting} waiting within ${boundMs} ms (${ask === undefined ? 'none pending' : `${ask.waiting} waiting`})` };
    await new Promise((r) => setTimeout(r, 1));
  }
}

/**
 * A reader child (reader mode above) on the admin socket. `ready` is `{ready, inode}` once Sluice answered
 * its GET /v1/events with 200 (the stream subscribes before it writes the head, so it is subscribed
 * before the first timed hop), or `{error}`.
 */
async function startReader(adminSocket, mode) {
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), '--serve-reader', adminSocket, mode], { stdio: ['pipe', 'pipe', 'inherit'], detached: true });
  const kill = () => {
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      // gone
    }
  };
  cleanups.push(kill);
  const lines = [];
  let buf = '';
  let wake;
  let hasExited = false;
  child.stdout.on('data', (c) => {
    buf += c;
    for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
      lines.push(JSON.parse(buf.slice(0, nl)));
      buf = buf.slice(nl + 1);
    }
    wake?.();
  });
  const exited = new Promise((resolve) =>
    child.once('exit', () => {
      hasExited = true;
      wake?.();
      resolve(undefined);
    }),
  );
  // The child bounds each of its answers; this bound only catches a child that hangs.
  const next = async (boundMs = READER_BOUND_MS + 2_000) => {
    const t0 = Date.now();
    while (lines.length === 0) {
      const left = boundMs - (Date.now() - t0);
      if (hasExited) return { error: `reader (${mode}) exited` };
      if (left <= 0) return { error: `reader (${mode}): no answer within ${boundMs} ms` };
      await new Promise((resolve) => {
        const t = setTimeout(resolve, left);
        wake = () => {
          clearTimeout(t);
          resolve(undefined);
        };
      });
      wake = undefined;
    }
    return lines.shift();
  };
  const ready = await next();
  return {
    ready,
    ask(cmd) {
      child.stdin.write(`${JSON.stringify(cmd)}\n`);
      return next();
    },
    async close() {
      child.stdin.end();
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5_000).unref())]);
      if (!hasExited) kill();
      await exited;
      // Gone: its group id may be reused, so it is no longer ours to kill.
      cleanups.splice(cleanups.indexOf(kill), 1);
    },
  };
}

/**
 * The kernel's queues of the reader's Unix socket and of Sluice's end of it, from `ss -xn`: bytes waiting
 * to be read by the reader, and the memory Sluice's end has sent and the reader not yet taken (sk_wmem,
 * what the kernel bounds by SO_SNDBUF). null without ss or /proc.
 */
function unixQueues(inode) {
  if (inode === null) return null;
  const rows = shOr('ss', ['-xn'])
    .split('\n')
    .slice(1)
    .map((l) => l.trim().split(/\s+/));
  // Netid State Recv-Q Send-Q Local-Address Port Peer-Address Port
  const reader = rows.find((r) => r[5] === String(inode));
  if (reader === undefined) return null;
  const sluiceEnd = rows.find((r) => r[5] === reader[7]);
  return { readerRecvQ: Number(reader[2]), sluiceInode: reader[7], sluiceSendQ: sluiceEnd === undefined ? null : Number(sluiceEnd[3]) };
}

/** Polls `ss -xn` until Sluice's end of a closed stream is gone (bounded): no subscriber left behind. */
async function waitSocketGone(inode, boundMs) {
  const t0 = Date.now();
  while (Date.now() - t0 < boundMs) {
    if (!shOr('ss', ['-xn']).split('\n').some((l) => l.trim().split(/\s+/)[5] === inode)) return true;
    await new Promise((r) => setTimeout(r, 5));
  }
  return false;
}

/** `n` untimed tunnels, FILL_CONCURRENCY at a time; the errors (at most MAX_ERRORS_PER_BATCH). */
async function fillTunnels(port, target, auth, n) {
  let started = 0;
  const errs = [];
  const worker = async () => {
    while (started < n && errs.length < MAX_ERRORS_PER_BATCH) {
      started += 1;
      const r = await tunnelOnce(port, target, auth);
      if (r.error !== undefined) errs.push(r.error);
    }
  };
  await Promise.all(Array.from({ length: FILL_CONCURRENCY }, worker));
  return errs;
}

// ---------------------------------------------------------------------------------------------------
async function main() {
  const started = Date.now();
  const loadBefore = os.loadavg();
  const how = build();
  const { runnerImport } = await import('vite');
  const { startSluiceProcess } = (await runnerImport(path.join(ROOT, 'test', 'support', 'sluice-process.ts'), { configFile: false, logLevel: 'error' })).module;

  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-bench-ask-'));
  cleanups.push(() => fs.rmSync(work, { recursive: true, force: true }));

  // Origins in a child process of their own.
  const origins = await startOriginsChild(fileURLToPath(import.meta.url), cleanups);

  // One Sluice as users run it: two grants that name the same granted origin, one of them asking.
  const tokens = { asking: crypto.randomBytes(18).toString('base64url'), plain: crypto.randomBytes(18).toString('base64url') };
  // Basic as most clients send it: the grant id as the user, the token as the password.
  const authOf = (grant) => `Proxy-Authorization: Basic ${Buffer.from(`${grant}:${tokens[grant]}`).toString('base64')}\r\n`;
  const sha = (t) => crypto.createHash('sha256').update(t).digest('hex');
  const adminSocket = path.join(work, 'admin.sock');
  const auditFile = path.join(work, 'audit.jsonl');
  const grantedRule = `tcp://origin.test:${origins.granted}`;
  const sluice = await startSluiceProcess({
    name: 'sluice (ask bench)',
    cwd: work,
    // The private copy, not the checkout's bin/: `sluice start --config FILE` as users run it.
    wrap: (a) => [a[0], [path.join(BUILD, 'bin', 'sluice.js'), ...a.slice(2)]],
    config: {
      listeners: [{ name: 'bench', listen: '127.0.0.1:0', identify: 'token' }],
      state: path.join(work, 'state'),
      dns: { servers: 'system', hosts: { 'origin.test': ['127.0.0.1'] } },
      admin: { listen: `unix:${adminSocket}` },
      audit: { file: auditFile },
      grants: [
        { id: 'asking', tokenSha256: sha(tokens.asking), destinations: [grantedRule], allowAddressClasses: ['loopback'], ask: { timeoutMs: ASK_TIMEOUT_MS } },
        { id: 'plain', tokenSha256: sha(tokens.plain), destinations: [grantedRule], allowAddressClasses: ['loopback'] },
      ],
    },
  });
  cleanups.push(() => sluice.kill9());

  const grantedTarget = `origin.test:${origins.granted}`;
  const askedTarget = `origin.test:${origins.asked}`;
  const TUNNEL_CASES = [
    { name: 'direct', label: 'no proxy (echo origin directly)', port: origins.granted, auth: null },
    { name: 'plain', label: 'Sluice, granted hop, grant without `ask`', port: sluice.port, auth: authOf('plain') },
    { name: 'asking', label: 'Sluice, granted hop, grant with `ask`', port: sluice.port, auth: authOf('asking') },
  ];
  const results = { tunnel: Object.fromEntries(TUNNEL_CASES.map((c) => [c.name, []])), release: [], fan: [] };
  const errors = [];
  const destinations = new Set();
  let released = 0;

  const tunnelBatch = async (c, n, record) => {
    const samples = [];
    let errs = 0;
    const cpu0 = c.auth === null ? 0 : cpuUs(sluice.pid);
    for (let i = 0; i < n && errs < MAX_ERRORS_PER_BATCH; i += 1) {
      const r = await tunnelOnce(c.port, grantedTarget, c.auth);
      if (r.error === undefined) samples.push(r.us);
      else {
        errs += 1;
        errors.push(`tunnel ${c.name}${record ? '' : ' (warm-up)'}: ${r.error}`);
      }
    }
    const cpu = c.auth === null ? undefined : cpuUs(sluice.pid) - cpu0;
    if (record) results.tunnel[c.name].push({ samples, ops: samples.length, errors: errs, cpuUs: cpu });
  };

  // Held hops one at a time: CONNECT, learn the ask, answer allow once, time the release.
  const releaseBatch = async (n, record) => {
    const batch = { releaseUs: [], postUs: [], seenUs: [], polls: [], errors: 0 };
    const admin = adminClient(adminSocket);
    const fail = (why) => {
      batch.errors += 1;
      errors.push(`release${record ? '' : ' (warm-up)'}: ${why}`);
    };
    try {
      for (let i = 0; i < n && batch.errors < MAX_ERRORS_PER_BATCH; i += 1) {
        const hop = heldConnect(sluice.port, askedTarget, authOf('asking'));
        try {
          const sentAt = await hop.sent;
          if (sentAt === undefined) {
            fail(`connect: ${(await hop.answered).error}`);
            continue;
          }
          const seen = await waitForAsk(admin, 'asking', origins.asked, 1, ASK_SEEN_BOUND_MS);
          if (seen.error !== undefined) {
            fail(seen.error);
            continue;
          }
          const seenUs = usSince(sentAt);
          destinations.add(seen.ask.destination);
          const post = await admin.request('POST', `/v1/asks/${seen.ask.ask}`, { decision: 'allow', scope: 'once' });
          const got = await hop.answered;
          if (post.error !== undefined || post.status !== 200) {
            fail(`POST /v1/asks: ${post.error ?? `${post.status} ${JSON.stringify(post.body)}`}`);
            continue;
          }
          if (got.error !== undefined) {
            fail(`held hop: ${got.error}`);
            continue;
          }
          const echoErr = await echoes(hop.socket);
          if (echoErr !== undefined) {
            fail(`released tunnel: ${echoErr}`);
            continue;
          }
          released += 1;
          batch.releaseUs.push(usSince(post.sentAt, got.at));
          batch.postUs.push(usSince(post.sentAt, post.at));
          batch.seenUs.push(seenUs);
          batch.polls.push(seen.polls);
        } finally {
          hop.socket.destroy();
        }
      }
    } finally {
      admin.close();
    }
    if (record) results.release.push(batch);
  };

  // FAN concurrent hops held on one ask: time from the POST to the last client's 200.
  const fanBatch = async (rounds, record) => {
    const batch = { lastUs: [], firstUs: [], postUs: [], errors: 0 };
    const admin = adminClient(adminSocket);
    const fail = (why) => {
      batch.errors += 1;
      errors.push(`fan${record ? '' : ' (warm-up)'}: ${why}`);
    };
    try {
      for (let r = 0; r < rounds && batch.errors < MAX_ERRORS_PER_BATCH; r += 1) {
        const hops = Array.from({ length: FAN }, () => heldConnect(sluice.port, askedTarget, authOf('asking')));
        try {
          const sent = await Promise.all(hops.map((h) => h.sent));
          if (sent.some((s) => s === undefined)) {
            fail(`${sent.filter((s) => s === undefined).length} of ${FAN} did not connect`);
            continue;
          }
          const seen = await waitForAsk(admin, 'asking', origins.asked, FAN, FAN_SEEN_BOUND_MS);
          if (seen.error !== undefined) {
            fail(seen.error);
            continue;
          }
          if (seen.ask.waiting !== FAN) {
            fail(`${seen.ask.waiting} hops on the ask, not ${FAN}`);
            continue;
          }
          const post = await admin.request('POST', `/v1/asks/${seen.ask.ask}`, { decision: 'allow', scope: 'once' });
          const got = await Promise.all(hops.map((h) => h.answered));
          if (post.error !== undefined || post.status !== 200) {
            fail(`POST /v1/asks: ${post.error ?? `${post.status} ${JSON.stringify(post.body)}`}`);
            continue;
          }
          const bad = got.filter((g) => g.error !== undefined);
          if (bad.length > 0) {
            fail(`${bad.length} of ${FAN} held hops: ${bad[0].error}`);
            continue;
          }
          const echoErrs = (await Promise.all(hops.map((h) => echoes(h.socket)))).filter((e) => e !== undefined);
          if (echoErrs.length > 0) {
            fail(`${echoErrs.length} of ${FAN} released tunnels: ${echoErrs[0]}`);
            continue;
          }
          released += FAN;
          const times = got.map((g) => usSince(post.sentAt, g.at));
          batch.lastUs.push(Math.max(...times));
          batch.firstUs.push(Math.min(...times));
          batch.postUs.push(usSince(post.sentAt, post.at));
        } finally {
          for (const h of hops) h.socket.destroy();
        }
      }
    } finally {
      admin.close();
    }
    if (record) results.fan.push(batch);
  };

  // Readers of GET /v1/events and tunnel setup (issue 27: "a reader that stops reading does not change
  // tunnel setup latency"), on `plain` and the granted origin, token on every CONNECT. Run after the ask
  // rounds: once a reader has subscribed, Sluice builds a decision event on every hop for the rest of its
  // life, so the tunnel cases above stay as they were, and A0 below is the last hops nobody ever watched.
  const timedTunnels = async (label, n) => {
    const batch = { samples: [], ops: 0, errors: 0, cpuUs: 0, wallUs: 0 };
    const cpu0 = cpuUs(sluice.pid);
    const t0 = now();
    for (let i = 0; i < n && batch.errors < MAX_ERRORS_PER_BATCH; i += 1) {
      const r = await tunnelOnce(sluice.port, grantedTarget, authOf('plain'));
      if (r.error === undefined) batch.samples.push(r.us);
      else {
        batch.errors += 1;
        errors.push(`readers ${label}: ${r.error}`);
      }
    }
    batch.wallUs = usSince(t0);
    batch.cpuUs = cpuUs(sluice.pid) - cpu0;
    batch.ops = batch.samples.length;
    return batch;
  };
  const openReader = async (mode, label) => {
    const reader = await startReader(adminSocket, mode);
    if (reader.ready.error !== undefined) {
      errors.push(`readers ${label}: ${reader.ready.error}`);
      await reader.close();
      return null;
    }
    reader.queues = unixQueues(reader.ready.inode);
    return reader;
  };
  const closeReader = async (reader, label) => {
    await reader.close();
    // The next batch may be A: Sluice must have dropped the stream (and its subscription) first.
    if (reader.queues !== null && !(await waitSocketGone(reader.queues.sluiceInode, STREAM_GONE_BOUND_MS))) {
      errors.push(`readers ${label}: Sluice still holds the stream ${STREAM_GONE_BOUND_MS} ms after its reader closed`);
    }
  };
  // B: a reader that takes every decision as it comes; each timed hop's event must reach it.
  const readingBatch = async (label, n) => {
    const reader = await openReader('read', label);
    if (reader === null) return null;
    try {
      const batch = await timedTunnels(label, n);
      const got = await reader.ask({ op: 'expect', events: batch.ops });
      batch.delivered = got.events ?? 0;
      batch.gaps = got.gaps?.length ?? 0;
      if (got.error !== undefined) errors.push(`readers ${label}: ${got.error}`);
      else if (got.events < batch.ops && batch.gaps === 0) errors.push(`readers ${label}: ${got.events} decision events reached the reader for ${batch.ops} hops, and no gap`);
      return batch;
    } finally {
      await closeReader(reader, label);
    }
  };
  // C: a reader that stopped reading after the response head. STALL_FILL untimed tunnels first fill the
  // kernel queue, Node's write buffer and the stream's own queue, so every timed hop meets a full one.
  // Proof, per batch: the kernel queues just before the resume, then, once it reads again, the `gap`
  // (reason slow_reader) naming the ids it lost. The timed hops are the last before the resume and a
  // stream drops from its first drop until it drains, so a gap of at least `ops` ids covers every one.
  const stalledBatch = async (label, n) => {
    const reader = await openReader('stall', label);
    if (reader === null) return null;
    try {
      for (const e of await fillTunnels(sluice.port, grantedTarget, authOf('plain'), STALL_FILL)) errors.push(`readers ${label} (fill): ${e}`);
      const batch = await timedTunnels(label, n);
      batch.queues = unixQueues(reader.ready.inode);
      const got = await reader.ask({ op: 'resume' });
      const gap = got.gaps?.find((g) => g.reason === 'slow_reader');
      batch.delivered = got.events ?? 0;
      batch.dropped = gap === undefined ? 0 : gap.to - gap.from + 1;
      if (got.error !== undefined || gap === undefined) errors.push(`readers ${label}: no slow_reader gap after the resume${got.error === undefined ? '' : `: ${got.error}`}`);
      else if (batch.dropped < batch.ops) errors.push(`readers ${label}: the stalled reader's queue was full for only the last ${batch.dropped} of ${batch.ops} timed hops (raise --stall-fill)`);
      return batch;
    } finally {
      await closeReader(reader, label);
    }
  };
  const measureReaders = async () => {
    const r = { a0: [], a: [], b: [], c: [] };
    const t0 = Date.now();
    for (let i = 0; i < READER_ROUNDS; i += 1) r.a0.push(await timedTunnels('A0', READER_N));
    console.error(`readers: A0 (no reader yet) done; warm-up, then ${READER_ROUNDS} rounds of A B C (${READER_N} tunnels each, C after ${STALL_FILL} fill tunnels)`);
    await readingBatch('B (warm-up)', WARMUP);
    await stalledBatch('C (warm-up)', WARMUP);
    await timedTunnels('A (warm-up)', WARMUP);
    for (let i = 0; i < READER_ROUNDS; i += 1) {
      r.a.push(await timedTunnels('A', READER_N));
      r.b.push(await readingBatch('B', READER_N));
      r.c.push(await stalledBatch('C', READER_N));
      console.error(`readers: round ${i + 1}/${READER_ROUNDS} done (${((Date.now() - t0) / 1000).toFixed(0)} s)`);
    }
    results.readers = r;
    return summarizeReaders(r);
  };

  const warmAsks = Math.min(ASKS, Math.max(5, Math.ceil(WARMUP / 5)));
  console.error(`warm-up: ${WARMUP} tunnels per tunnel case, ${warmAsks} held hops, 1 fan of ${FAN}`);
  for (const c of TUNNEL_CASES) await tunnelBatch(c, WARMUP, false);
  await releaseBatch(warmAsks, false);
  await fanBatch(1, false);
  for (let r = 0; r < ROUNDS; r += 1) {
    // Interleaved: each round visits every tunnel case, in an order rotated round by round, then the asks.
    const order = TUNNEL_CASES.map((_, i) => TUNNEL_CASES[(i + r) % TUNNEL_CASES.length]);
    for (const c of order) await tunnelBatch(c, N, true);
    await releaseBatch(ASKS, true);
    await fanBatch(FAN_ROUNDS, true);
    console.error(`round ${r + 1}/${ROUNDS} done (${((Date.now() - started) / 1000).toFixed(0)} s)`);
  }

  const readers = flag('--no-readers') ? null : await measureReaders();

  // Nothing may be left pending: every ask the bench raised was answered.
  const left = adminClient(adminSocket);
  const leftover = await left.request('GET', '/v1/asks');
  left.close();
  if (leftover.error !== undefined || leftover.body.asks.length !== 0) errors.push(`asks still pending at the end: ${leftover.error ?? JSON.stringify(leftover.body.asks)}`);

  // Stopped (SIGTERM) before the audit is read: Sluice writes it asynchronously and flushes on shutdown.
  const code = await sluice.stop('SIGTERM', 10_000);
  if (code !== 0) errors.push(`sluice exited with ${String(code)} on SIGTERM`);
  const audit = {};
  let askAllows = 0;
  for (const line of fs.readFileSync(auditFile, 'utf8').split('\n')) {
    if (!line.startsWith('{')) continue;
    const rec = JSON.parse(line);
    if (rec.kind === 'decision') {
      const key = `${rec.principal ?? '?'} ${rec.decision} ${rec.reason}${typeof rec.rule === 'string' && rec.rule.startsWith('ask:') ? ' (rule ask:…)' : ''}`;
      audit[key] = (audit[key] ?? 0) + 1;
      if (rec.decision === 'allow' && typeof rec.rule === 'string' && rec.rule.startsWith('ask:')) askAllows += 1;
    }
  }
  // Every released hop is one audited allow under its ask (warm-up included); none is missing or extra.
  if (askAllows !== released) errors.push(`audit: ${askAllows} allows under an ask, ${released} hops released`);
  const written = fs.readFileSync(auditFile, 'utf8') + sluice.stderr();
  if (written.includes(tokens.asking) || written.includes(tokens.plain)) errors.push('a client token is in the audit file or the log');
  const warnLines = sluice.stderr().split('\n').filter((l) => /"level":(40|50|60|"warn"|"error"|"fatal")/.test(l)).length;

  // Summaries
  const tunnel = {};
  for (const c of TUNNEL_CASES) {
    const batches = results.tunnel[c.name];
    const all = batches.flatMap((b) => b.samples).sort((a, b) => a - b);
    const cpuPerOp = c.auth === null ? [] : batches.map((b) => b.cpuUs / Math.max(1, b.ops));
    tunnel[c.name] = {
      ops: all.length,
      errors: batches.reduce((s, b) => s + b.errors, 0),
      p50: percentile(all, 50),
      p99: percentile(all, 99),
      roundP50: batches.map((b) => median(b.samples)),
      cpuUsPerOp: c.auth === null ? undefined : median(cpuPerOp),
    };
  }
  // The ask field's cost on a granted hop: each round's p50 divided by the same round's, so a busy
  // moment slows both sides of the ratio.
  const roundRatios = tunnel.asking.roundP50.map((v, i) => v / tunnel.plain.roundP50[i]);
  const dist = (values) => {
    const s = [...values].sort((a, b) => a - b);
    return { n: s.length, p50: percentile(s, 50), p90: percentile(s, 90), p99: percentile(s, 99), max: s.at(-1) ?? NaN };
  };
  const flat = (key, from) => from.flatMap((b) => b[key]);
  const summary = {
    tunnel,
    askRatio: { p50: tunnel.asking.p50 / tunnel.plain.p50, p99: tunnel.asking.p99 / tunnel.plain.p99, roundP50: { median: median(roundRatios), min: Math.min(...roundRatios), max: Math.max(...roundRatios) } },
    release: { ...dist(flat('releaseUs', results.release)), errors: results.release.reduce((s, b) => s + b.errors, 0) },
    post: dist(flat('postUs', results.release)),
    seen: dist(flat('seenUs', results.release)),
    polls: dist(flat('polls', results.release)),
    fanLast: { ...dist(flat('lastUs', results.fan)), errors: results.fan.reduce((s, b) => s + b.errors, 0) },
    fanFirst: dist(flat('firstUs', results.fan)),
    fanPost: dist(flat('postUs', results.fan)),
  };
  summary.verdict = Number.isFinite(summary.release.p99) && summary.release.p99 <= TARGET_P99_MS * 1000 ? 'PASS' : 'FAIL';
  summary.readers = readers;

  const commit = shOr('git', ['-C', ROOT, 'rev-parse', '--short=10', 'HEAD'], 'unknown');
  const dirty = shOr('git', ['-C', ROOT, 'status', '--porcelain', '--', 'src', 'bin'], '').length > 0;
  const meta = {
    date: new Date().toISOString(),
    commit,
    dirty,
    build: how,
    node: process.version,
    cpu: `${os.cpus()[0]?.model ?? '?'} × ${os.cpus().length}`,
    kernel: `${os.type()} ${os.release()}`,
    loadBefore: loadBefore.map((v) => v.toFixed(2)).join(' '),
    loadAfter: os.loadavg().map((v) => v.toFixed(2)).join(' '),
    seconds: Math.round((Date.now() - started) / 1000),
    rounds: ROUNDS,
    n: N,
    warmup: WARMUP,
    asks: ASKS,
    fan: FAN,
    fanRounds: FAN_ROUNDS,
    readerRounds: readers === null ? 0 : READER_ROUNDS,
    readerN: READER_N,
    stallFill: STALL_FILL,
    askTimeoutMs: ASK_TIMEOUT_MS,
    targetP99Ms: TARGET_P99_MS,
    askedDestinations: [...destinations],
  };
  const md = report(meta, TUNNEL_CASES, summary, audit, warnLines, errors);
  console.log(md);
  if (!flag('--no-save')) {
    const dir = path.join(HERE, 'results');
    fs.mkdirSync(dir, { recursive: true });
    const file = path.join(dir, `${meta.date.slice(0, 10)}-ask.md`);
    // Runs of one day go in one file, newest last: machines are noisy, so keep every run side by side.
    if (fs.existsSync(file)) fs.appendFileSync(file, `\n---\n\n${md}`);
    else fs.writeFileSync(file, `# Held-hop release latency of asks (issue 27)\n\nWritten by \`npm run bench:ask\` (bench/ask-release.mjs); see bench/README.md#ask-release-latency for what the numbers mean.\n\n${md}`);
    fs.writeFileSync(file.replace(/\.md$/, `-${meta.date.slice(11, 19).replace(/:/g, '')}.json`), JSON.stringify({ meta, summary, audit, warnLines, errors, raw: results }, (_, v) => (typeof v === 'number' && !Number.isInteger(v) ? Math.round(v * 10) / 10 : v), 1));
    console.error(`written: ${path.relative(ROOT, file)} (+ .json with every sample)`);
  }
  return errors.length === 0 && summary.verdict === 'PASS' ? 0 : 1;
}

/** Per condition: latency percentiles, hops/s over the batches' wall time, Sluice CPU per hop; and B/A, C/A. */
function summarizeReaders(r) {
  const sum = (batches, key) => batches.reduce((t, b) => t + b[key], 0);
  const condition = (batches) => {
    const ok = batches.filter((b) => b !== null);
    const all = ok.flatMap((b) => b.samples).sort((a, b) => a - b);
    return {
      batches: ok.length,
      ops: all.length,
      errors: sum(ok, 'errors'),
      p50: percentile(all, 50),
      p90: percentile(all, 90),
      p99: percentile(all, 99),
      roundP50: ok.map((b) => median(b.samples)),
      hopsPerS: sum(ok, 'ops') / (sum(ok, 'wallUs') / 1e6),
      cpuUsPerHop: median(ok.map((b) => b.cpuUs / Math.max(1, b.ops))),
    };
  };
  const s = { a0: condition(r.a0), a: condition(r.a), b: condition(r.b), c: condition(r.c) };
  // Round i's X against round i's A, so a busy moment weighs on both sides of a ratio.
  const ratio = (key) => {
    const x = s[key];
    const perRound = r.a.flatMap((a, i) => (r[key][i] === null ? [] : [median(r[key][i].samples) / median(a.samples)]));
    return {
      p50: x.p50 / s.a.p50,
      p90: x.p90 / s.a.p90,
      p99: x.p99 / s.a.p99,
      hopsPerS: x.hopsPerS / s.a.hopsPerS,
      cpu: x.cpuUsPerHop / s.a.cpuUsPerHop,
      roundP50: { median: median(perRound), min: Math.min(...perRound), max: Math.max(...perRound) },
    };
  };
  s.ratioB = ratio('b');
  s.ratioC = ratio('c');
  const b = r.b.filter((x) => x !== null);
  const c = r.c.filter((x) => x !== null);
  const range = (values) => (values.length === 0 ? [NaN, NaN] : [Math.min(...values), Math.max(...values)]);
  s.reading = { delivered: sum(b, 'delivered'), ops: sum(b, 'ops'), gaps: sum(b, 'gaps') };
  s.stalled = {
    batches: c.length,
    dropped: range(c.map((x) => x.dropped)),
    ops: range(c.map((x) => x.ops)),
    delivered: range(c.map((x) => x.delivered)),
    covered: c.filter((x) => x.dropped >= x.ops && x.ops > 0).length,
    readerRecvQ: range(c.flatMap((x) => (x.queues === null ? [] : [x.queues.readerRecvQ]))),
    sluiceSendQ: range(c.flatMap((x) => (x.queues?.sluiceSendQ == null ? [] : [x.queues.sluiceSendQ]))),
    hasQueues: c.some((x) => x.queues !== null),
  };
  return s;
}

const us = (v) => (Number.isFinite(v) ? (v >= 10_000 ? `${(v / 1000).toFixed(1)} ms` : `${Math.round(v)} µs`) : '–');
const x = (v) => (Number.isFinite(v) ? `${v.toFixed(2)}×` : '–');

function report(meta, cases, s, audit, warnLines, errors) {
  const lines = [];
  lines.push(`## Run ${meta.date} (commit ${meta.commit}${meta.dirty ? ', src/ or bin/ modified' : ''})`);
  lines.push('');
  lines.push(
    `${meta.rounds} interleaved rounds, each: ${meta.n} sequential tunnels per tunnel case (order rotated), ${meta.asks} sequential held hops, ${meta.fanRounds} fans of ${meta.fan} hops on one ask; after a warm-up. ${meta.seconds} s in all. Not pinned: client, origins and Sluice share the machine.`,
  );
  lines.push(`Node ${meta.node}; ${meta.cpu}; ${meta.kernel}; load average before ${meta.loadBefore}, after ${meta.loadAfter}; Sluice built by ${meta.build}; ask timeoutMs ${meta.askTimeoutMs}; asked destination ${meta.askedDestinations.join(', ') || '–'}.`);
  lines.push('', '### Tunnel setup on a granted hop: connect → `CONNECT origin.test:<echo>` → 200 → 32 B sent → first echoed byte', '');
  lines.push('| case | ops | errors | p50 | p99 | round p50 min–max | Sluice CPU µs/op |');
  lines.push('|---|---:|---:|---:|---:|---:|---:|');
  for (const c of cases) {
    const t = s.tunnel[c.name];
    lines.push(`| ${c.label} | ${t.ops} | ${t.errors} | ${us(t.p50)} | ${us(t.p99)} | ${us(Math.min(...t.roundP50))}–${us(Math.max(...t.roundP50))} | ${t.cpuUsPerOp === undefined ? '–' : t.cpuUsPerOp.toFixed(0)} |`);
  }
  lines.push('');
  lines.push(
    `With \`ask\` / without: p50 ${x(s.askRatio.p50)}, p99 ${x(s.askRatio.p99)}; per-round p50 ratio median ${x(s.askRatio.roundP50.median)} (min ${x(s.askRatio.roundP50.min)}, max ${x(s.askRatio.roundP50.max)}).`,
  );
  lines.push('', '### Held hops: release after the answer', '');
  lines.push('| measure | n | p50 | p90 | p99 | max |');
  lines.push('|---|---:|---:|---:|---:|---:|');
  const row = (label, d, fmt = us) => lines.push(`| ${label} | ${d.n} | ${fmt(d.p50)} | ${fmt(d.p90)} | ${fmt(d.p99)} | ${fmt(d.max)} |`);
  row('release: `POST /v1/asks/{ask}` allow once written → client reads `HTTP/1.1 200`', s.release);
  row('the POST round trip (written → its 200 read)', s.post);
  row('ask visible: CONNECT written → `GET /v1/asks` lists it (1 ms polls)', s.seen);
  row('GET /v1/asks polls until listed', s.polls, (v) => (Number.isFinite(v) ? String(v) : '–'));
  row(`fan of ${meta.fan}: POST written → the LAST client reads its 200`, s.fanLast);
  row(`fan of ${meta.fan}: POST written → the first client reads its 200`, s.fanFirst);
  row(`fan of ${meta.fan}: the POST round trip`, s.fanPost);
  lines.push('');
  lines.push(`Release p99 ${us(s.release.p99)} against the target of ${meta.targetP99Ms} ms: **${s.verdict}** (${s.release.errors} errors in held hops, ${s.fanLast.errors} in fans).`);
  if (s.readers === null) lines.push('', '### Event stream readers and tunnel setup: skipped (--no-readers)');
  else reportReaders(lines, meta, s.readers);
  lines.push('', '### Sluice audit (whole run, warm-up included) and warn+ log lines', '');
  lines.push(`- ${Object.entries(audit).sort().map(([k, v]) => `${k}: ${v}`).join('; ')}; warn or above: ${warnLines}`);
  lines.push('', `### Errors: ${errors.length === 0 ? 'none' : errors.length}`);
  if (errors.length > 0) {
    const counts = {};
    for (const e of errors) counts[e] = (counts[e] ?? 0) + 1;
    lines.push('', ...Object.entries(counts).map(([e, n]) => `- ${n} × ${e}`));
  }
  return `${lines.join('\n')}\n`;
}

function reportReaders(lines, meta, r) {
  const range = ([lo, hi], fmt = String) => (Number.isFinite(lo) ? [...new Set([fmt(lo), fmt(hi)])].join('–') : '–');
  const kib = (v) => `${(v / 1024).toFixed(0)} KiB`;
  lines.push('', '### Event stream readers and tunnel setup: a reader that stops reading (issue 27)', '');
  lines.push(
    `The granted hop above on \`plain\` (connect → CONNECT with its token → 200 → 32 B → first echoed byte), ${meta.readerN} sequential tunnels per batch, ${meta.readerRounds} rounds in the order A B C A B C …, after a warm-up. Each reader is a child process on the admin socket, on \`GET /v1/events?kind=decision\`; C reads the response head, then pause()s, and each of its batches starts after ${meta.stallFill} untimed tunnels (${FILL_CONCURRENCY} at a time) that fill its queues. A0 ran before any reader had subscribed (from the first subscriber on, Sluice builds a decision event on every hop for the rest of its life): not interleaved, a reference for A.`,
  );
  lines.push('');
  lines.push('| condition | hops | errors | p50 | p90 | p99 | round p50 min–max | hops/s | Sluice CPU µs/hop |');
  lines.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|');
  const row = (label, c) =>
    lines.push(`| ${label} | ${c.ops} | ${c.errors} | ${us(c.p50)} | ${us(c.p90)} | ${us(c.p99)} | ${us(Math.min(...c.roundP50))}–${us(Math.max(...c.roundP50))} | ${Number.isFinite(c.hopsPerS) ? c.hopsPerS.toFixed(0) : '–'} | ${Number.isFinite(c.cpuUsPerHop) ? c.cpuUsPerHop.toFixed(0) : '–'} |`);
  row('A0: no reader, none ever (before the rounds)', r.a0);
  row('A: no reader on `/v1/events`', r.a);
  row('B: one reader that reads every decision', r.b);
  row('C: one reader that stopped reading', r.c);
  lines.push('');
  lines.push('| ratio | p50 | p90 | p99 | per-round p50: median (min–max) | hops/s | Sluice CPU/hop |');
  lines.push('|---|---:|---:|---:|---:|---:|---:|');
  for (const [label, q] of [['B / A', r.ratioB], ['C / A', r.ratioC]]) {
    lines.push(`| ${label} | ${x(q.p50)} | ${x(q.p90)} | ${x(q.p99)} | ${x(q.roundP50.median)} (${x(q.roundP50.min)}–${x(q.roundP50.max)}) | ${x(q.hopsPerS)} | ${x(q.cpu)} |`);
  }
  lines.push('');
  const st = r.stalled;
  lines.push(
    `Reader B received ${r.reading.delivered} decision events for ${r.reading.ops} timed hops (${r.reading.gaps} gaps). Reader C stalled: ${
      st.hasQueues ? `just before each resume the kernel held ${range(st.readerRecvQ, kib)} unread at the reader and ${range(st.sluiceSendQ, kib)} of send memory at Sluice's end (\`ss -xn\`); ` : 'kernel queues unknown (no `ss -xn`); '
    }once resumed it read ${range(st.delivered)} events, then a \`gap\` with reason \`slow_reader\` naming ${range(st.dropped)} dropped ids, at least the ${range(st.ops)} timed hops of the batch in ${st.covered} of ${st.batches} batches (in those, every timed hop was published to a reader whose queue was full).`,
  );
}

main()
  .then(async (code) => {
    await cleanup();
    process.exit(code);
  })
  .catch(async (err) => {
    // After SIGINT/SIGTERM the children are gone on purpose: the failures that follow are not news.
    if (cleaning === undefined) console.error(err instanceof Error ? err.stack : err);
    await cleanup();
    process.exit(1);
  });
