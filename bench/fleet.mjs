#!/usr/bin/env node
// The fleet benchmark: `npm run bench:fleet` (about 2 to 3 minutes). One redis-server and 3 Sluice
// instances on ledger.store redis (docs/fleet.md), a loopback echo origin (bench/loadgen.c in server
// mode) and 1,000 live tunnels spread over the instances. Measures:
//   1. revocation lag: from a DELETE /v1/grants/{id} sent to one instance's admin socket to the last of
//      that grant's tunnels closed on each instance, over 20 revokes, first with notifications, then
//      with every subscription killed (CLIENT KILL TYPE pubsub) before each revoke, so only the 25 ms
//      revision poll carries it;
//   2. new tunnels/s of one Sluice on the Redis store against the file store (bench/loadgen.c rate,
//      c=32, interleaved rounds, medians), and the ratio;
//   3. budgets across the fleet (docs/fleet.md, "Budgets across the fleet"), on the same 3 instances
//      (ledger.redis.leaseTtlMs 2000): maxBytes 4 MiB driven from every instance at once until refused,
//      the bytes relayed (counted at the client and at an in-process echo origin), the store's count and
//      the overshoot against the bound of one chunk per instance, 5 times; maxConcurrent 10 under 40
//      concurrent CONNECTs, 5 times; maxConnections 30 under 60 CONNECTs, 3 times; and the time until a
//      SIGKILLed instance's leases come back.
// Writes bench/results/<date>-<commit>-fleet.json and .md. See bench/README.md, "Fleet". Only
// loopback traffic; every child runs in its own process group and is killed on exit, failure and
// SIGINT; every loop has a count and a time bound, every socket a timeout. No dependency beyond node:
// Redis is spoken to in RESP by hand.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

const BENCH = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(BENCH, '..');
const BUILD = path.join(BENCH, '.build');
const LOADGEN = path.join(BUILD, 'loadgen');
// Its own copy of dist/, so that a concurrent `npm run bench` (which owns .build/sluice) is not disturbed.
const SNAPSHOT = path.join(BUILD, 'sluice-fleet');
const ORIGIN_NAME = 'origin.bench';
const REDIS_SERVER = ['/usr/bin/redis-server', '/usr/local/bin/redis-server'].find((p) => fs.existsSync(p));
const RUN_BUDGET_MS = 240_000; // a hard stop for the whole run; a normal run takes about 2 minutes

// ---------- arguments ----------
function usage() {
  return `usage: npm run bench:fleet [-- options]
  --instances N       Sluice instances in the fleet (default 3)
  --tunnels N         live tunnels spread over the instances (default 1000)
  --grants N          grants, one revoke each, per delivery mode (default 20)
  --rounds N          rounds of the tunnel-rate comparison (default 3)
  --rate-seconds S    measured seconds per rate round (default 5)
  --no-build          do not rebuild dist/ even when src/ is newer
  --sluice-bin FILE   run this Sluice entry instead of a copy of bin/sluice.js (an A/B of another build; implies --no-build)
  --no-pin            do not pin with taskset
  --no-save           print the table only
  -h, --help`;
}
const opt = { instances: 3, tunnels: 1000, grants: 20, rounds: 3, rateS: 5, warmS: 2, build: true, pin: true, save: true };
{
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const num = (lo, hi) => {
      const v = Number(argv[++i]);
      if (!Number.isFinite(v) || v < lo || v > hi) fail(`${a} must be a number in ${lo}..${hi}`);
      return v;
    };
    if (a === '--instances') opt.instances = Math.floor(num(1, 8));
    else if (a === '--tunnels') opt.tunnels = Math.floor(num(1, 20000));
    else if (a === '--grants') opt.grants = Math.floor(num(1, 200));
    else if (a === '--rounds') opt.rounds = Math.floor(num(1, 10));
    else if (a === '--rate-seconds') opt.rateS = num(0.5, 60);
    else if (a === '--no-build') opt.build = false;
    else if (a === '--sluice-bin') {
      if (i + 1 >= argv.length) fail('--sluice-bin needs a file');
      opt.sluiceBin = path.resolve(argv[++i]);
      if (!fs.existsSync(opt.sluiceBin)) fail(`${opt.sluiceBin} does not exist`);
    }
    else if (a === '--no-pin') opt.pin = false;
    else if (a === '--no-save') opt.save = false;
    else if (a === '--fleet') {
      // accepted, so that `node bench/fleet.mjs --fleet` (as in `npm run bench -- --fleet`) works too
    } else if (a === '-h' || a === '--help') {
      console.log(usage());
      process.exit(0);
    } else fail(`unknown option ${a}\n${usage()}`);
  }
  if (opt.tunnels < opt.grants) fail('--tunnels must be at least --grants');
}

function fail(msg) {
  console.error(`bench:fleet: ${msg}`);
  process.exit(2);
}
const log = (msg) => console.error(`[fleet ${new Date().toISOString().slice(11, 19)}] ${msg}`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const sh = (cmd, args, o = {}) => spawnSync(cmd, args, { encoding: 'utf8', timeout: 30_000, ...o });
const which = (name) => {
  for (const dir of ['/usr/sbin', '/usr/bin', '/sbin', '/bin', '/usr/local/bin', ...(process.env.PATH ?? '').split(':')]) {
    const p = path.join(dir, name);
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return p;
    } catch {}
  }
  return null;
};

// The client holds every tunnel's socket: raise this process's open-file limit first when it is too low.
{
  const need = opt.tunnels + 512;
  const soft = Number(sh('sh', ['-c', 'ulimit -n']).stdout.trim());
  if (Number.isFinite(soft) && soft < need && process.env.SLUICE_FLEET_REEXEC !== '1') {
    const r = spawnSync('sh', ['-c', `ulimit -n ${need} 2>/dev/null || ulimit -n "$(ulimit -Hn)"; exec "$@"`, 'sh', process.execPath, ...process.argv.slice(1)], {
      stdio: 'inherit',
      env: { ...process.env, SLUICE_FLEET_REEXEC: '1' },
    });
    process.exit(r.status ?? 1);
  }
  if (Number.isFinite(soft) && soft < need) fail(`the open-file limit is ${soft}; ${need} are needed for ${opt.tunnels} tunnels (raise the hard limit, or pass --tunnels)`);
}

// ---------- children: tracked, killed on every way out ----------
const children = new Set();
const tmpDirs = new Set();
function killAll() {
  for (const c of children) {
    try {
      process.kill(-c.pid, 'SIGKILL');
    } catch {}
  }
  children.clear();
  for (const d of tmpDirs) {
    try {
      fs.rmSync(d, { recursive: true, force: true });
    } catch {}
  }
  tmpDirs.clear();
}
process.on('exit', killAll);
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(sig, () => {
    console.error(`\nbench:fleet: ${sig}, stopping every child`);
    killAll();
    process.exit(130);
  });
}
process.on('uncaughtException', (e) => {
  console.error(`bench:fleet: ${e.stack ?? e}`);
  killAll();
  process.exit(1);
});
process.on('unhandledRejection', (e) => {
  console.error(`bench:fleet: ${e?.stack ?? e}`);
  killAll();
  process.exit(1);
});

let PIN = false;
/** A child in its own process group, open-file limit raised, pinned to `cpu` when pinning is on. */
function launch(cmd, args, { cpu, cwd, name } = {}) {
  const inner = PIN && cpu !== undefined ? ['taskset', '-c', String(cpu), cmd, ...args] : [cmd, ...args];
  const child = spawn('sh', ['-c', 'ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null; exec "$@"', 'sh', ...inner], {
    cwd: cwd ?? ROOT,
    detached: true,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  child.benchName = name ?? path.basename(cmd);
  child.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  child.exited.then(() => children.delete(child));
  child.on('error', () => {});
  child.stdin.on('error', () => {});
  children.add(child);
  return child;
}

/** SIGTERM to the group, SIGKILL after graceMs. */
async function stop(child, graceMs = 3000) {
  if (!child || child.exitCode !== null || child.signalCode !== null) return child?.exited;
  try {
    process.kill(-child.pid, 'SIGTERM');
  } catch {}
  if ((await Promise.race([child.exited, sleep(graceMs).then(() => 'timeout')])) === 'timeout') {
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {}
    await Promise.race([child.exited, sleep(2000)]);
  }
  return child.exited;
}

function collect(stream, limit = 1 << 20) {
  const chunks = [];
  let size = 0;
  stream.on('data', (d) => {
    if (size < limit) chunks.push(d);
    size += d.length;
  });
  return () => Buffer.concat(chunks).toString('utf8');
}

function tmpDir(prefix) {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), `sluice-fleet-${prefix}-`));
  tmpDirs.add(d);
  return d;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function safeRead(p) {
  try {
    return fs.readFileSync(p, 'utf8');
  } catch {
    return '';
  }
}

// ---------- /proc: CPU seconds of a process group ----------
const CLK_TCK = Number(sh('getconf', ['CLK_TCK']).stdout.trim()) || 100;
function groupCpu(pgid) {
  let ticks = 0;
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const st = fs.readFileSync(`/proc/${e}/stat`, 'utf8');
      const rest = st.slice(st.lastIndexOf(')') + 2).split(' ');
      if (Number(rest[2]) === pgid) ticks += Number(rest[11]) + Number(rest[12]);
    } catch {}
  }
  return ticks / CLK_TCK;
}

/** Busy seconds of CPU `n` from /proc/stat (user, nice, system, irq, softirq). */
function cpuBusy(n) {
  const m = new RegExp(`^cpu${n} (.*)$`, 'm').exec(safeRead('/proc/stat'));
  if (!m) return null;
  const [user, nice, system, , , irq, softirq] = m[1].trim().split(/\s+/).map(Number);
  return (user + nice + system + irq + softirq) / CLK_TCK;
}

// ---------- preparation (as bench/run.mjs does) ----------
function buildLoadgen() {
  const src = path.join(BENCH, 'loadgen.c');
  if (fs.existsSync(LOADGEN) && fs.statSync(LOADGEN).mtimeMs >= fs.statSync(src).mtimeMs) return;
  const cc = process.env.CC ?? (which('cc') ? 'cc' : which('gcc') ? 'gcc' : null);
  if (!cc) fail('no C compiler: install one (Debian: sudo apt-get install -y gcc), or set CC');
  fs.mkdirSync(BUILD, { recursive: true });
  const tmp = `${LOADGEN}.${process.pid}`;
  const r = sh(cc, ['-O2', '-Wall', '-o', tmp, src]);
  if (r.status !== 0) fail(`building the load generator failed:\n${r.stderr}`);
  fs.renameSync(tmp, LOADGEN);
  log(`built ${path.relative(ROOT, LOADGEN)} with ${cc} -O2`);
}

function newestMtime(dir) {
  let newest = 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) newest = Math.max(newest, newestMtime(p));
    else if (e.name.endsWith('.ts')) newest = Math.max(newest, fs.statSync(p).mtimeMs);
  }
  return newest;
}

function ensureSluiceBuilt(notes) {
  const main = path.join(ROOT, 'dist', 'main.js');
  const exists = fs.existsSync(main);
  const stale = exists && newestMtime(path.join(ROOT, 'src')) > fs.statSync(main).mtimeMs;
  if (exists && (!stale || !opt.build)) {
    if (stale) notes.push('dist/ is older than src/ and --no-build was given: Sluice ran from the existing dist/.');
    return;
  }
  if (!exists && !opt.build) fail('dist/ is missing and --no-build was given (run npm run build)');
  log(exists ? 'src/ is newer than dist/: npm run build' : 'dist/ is missing: npm run build');
  const r = sh('npm', ['run', 'build'], { cwd: ROOT, timeout: 300_000 });
  if (r.status !== 0) {
    const msg = (r.stdout + r.stderr).trim().split('\n').slice(-5).join(' | ');
    if (!fs.existsSync(main)) fail(`npm run build failed: ${msg}`);
    notes.push(`npm run build failed (${msg}); Sluice ran from the dist/ that tsc emitted or left.`);
  }
}

/** dist/ and bin/ copied once; every Sluice of the run starts from the copy (inside the repository, so node_modules resolves). */
function snapshotSluice() {
  fs.rmSync(SNAPSHOT, { recursive: true, force: true });
  fs.mkdirSync(SNAPSHOT, { recursive: true });
  fs.cpSync(path.join(ROOT, 'dist'), path.join(SNAPSHOT, 'dist'), { recursive: true });
  fs.cpSync(path.join(ROOT, 'bin'), path.join(SNAPSHOT, 'bin'), { recursive: true });
  fs.writeFileSync(path.join(SNAPSHOT, 'package.json'), '{ "type": "module", "private": true }\n');
  return path.join(SNAPSHOT, 'bin', 'sluice.js');
}

// ---------- RESP, by hand ----------
class RespError extends Error {}
function respEncode(args) {
  const parts = [`*${args.length}\r\n`];
  for (const a of args) {
    const s = String(a);
    parts.push(`$${Buffer.byteLength(s)}\r\n${s}\r\n`);
  }
  return parts.join('');
}
/** One reply from buf at off: [value, next offset], or null while incomplete. */
function respParse(buf, off, depth = 0) {
  if (depth > 8) throw new Error('RESP nesting too deep');
  if (off >= buf.length) return null;
  const eol = buf.indexOf('\r\n', off);
  if (eol < 0) return null;
  const line = buf.toString('utf8', off + 1, eol);
  switch (String.fromCharCode(buf[off])) {
    case '+':
      return [line, eol + 2];
    case '-':
      return [new RespError(line), eol + 2];
    case ':':
      return [Number(line), eol + 2];
    case '$': {
      const n = Number(line);
      if (n < 0) return [null, eol + 2];
      if (buf.length < eol + 2 + n + 2) return null;
      return [buf.toString('utf8', eol + 2, eol + 2 + n), eol + 4 + n];
    }
    case '*': {
      const n = Number(line);
      if (n < 0) return [null, eol + 2];
      const arr = [];
      let o = eol + 2;
      for (let i = 0; i < n; i++) {
        const r = respParse(buf, o, depth + 1);
        if (!r) return null;
        arr.push(r[0]);
        o = r[1];
      }
      return [arr, o];
    }
    default:
      throw new Error(`unexpected RESP type ${JSON.stringify(String.fromCharCode(buf[off]))}`);
  }
}
/** A plain (non-pubsub) Redis connection: call(...args) → reply, each with a timeout. */
function respConnect(port, timeoutMs = 2000) {
  return new Promise((resolve, reject) => {
    const sock = net.connect({ host: '127.0.0.1', port });
    const pending = [];
    let buf = Buffer.alloc(0);
    const failAll = (e) => {
      for (const p of pending.splice(0)) {
        clearTimeout(p.timer);
        p.reject(e);
      }
    };
    sock.setTimeout(timeoutMs, () => sock.destroy(new Error(`redis connect to ${port} timed out`)));
    sock.once('error', reject);
    sock.on('error', (e) => failAll(e));
    sock.on('close', () => failAll(new Error('redis connection closed')));
    sock.on('data', (d) => {
      buf = buf.length ? Buffer.concat([buf, d]) : d;
      for (let i = 0; i < 10_000; i++) {
        const r = respParse(buf, 0);
        if (!r) break;
        buf = buf.subarray(r[1]);
        const p = pending.shift();
        if (!p) continue;
        clearTimeout(p.timer);
        if (r[0] instanceof RespError) p.reject(r[0]);
        else p.resolve(r[0]);
      }
    });
    sock.once('connect', () => {
      sock.setTimeout(0);
      sock.off('error', reject);
      resolve({
        call: (...args) =>
          new Promise((res, rej) => {
            const timer = setTimeout(() => {
              rej(new Error(`redis ${args[0]} timed out`));
              sock.destroy();
            }, 5000);
            pending.push({ resolve: res, reject: rej, timer });
            sock.write(respEncode(args));
          }),
        close: () => sock.destroy(),
      });
    });
  });
}

async function startRedis() {
  if (!REDIS_SERVER) fail('redis-server is not installed (Debian: sudo apt-get install -y redis-server)');
  const port = await freePort();
  const dir = tmpDir('redis');
  const conf = path.join(dir, 'redis.conf');
  // The persistence settings docs/fleet.md asks for (everysec), no RDB snapshots, loopback only.
  fs.writeFileSync(
    conf,
    [`port ${port}`, 'bind 127.0.0.1', `dir ${dir}`, 'save ""', 'appendonly yes', 'appendfsync everysec', 'maxmemory-policy noeviction', 'daemonize no', 'loglevel warning', ''].join('\n'),
  );
  const child = launch(REDIS_SERVER, [conf], { cpu: 1, name: 'redis-server' });
  const err = collect(child.stderr);
  collect(child.stdout);
  const end = Date.now() + 10_000;
  while (Date.now() < end) {
    if (child.exitCode !== null) break;
    try {
      const c = await respConnect(port, 500);
      const pong = await c.call('PING');
      if (pong === 'PONG') return { child, port, url: `redis://127.0.0.1:${port}/0`, client: c };
      c.close();
    } catch {}
    await sleep(50);
  }
  throw new Error(`redis-server did not answer on ${port}: ${err().trim().slice(-400)}`);
}

// ---------- Sluice ----------
let sluiceEntry = null;

/**
 * Starts `sluice start --config` from the copy of dist/, with a token listener on 127.0.0.1:0 (the port
 * is read from the "listening" log line), an admin Unix socket and an audit file in its own temp dir.
 */
async function startSluice({ name, ledger, cpu, grantsYaml = ['grants: []'] }) {
  const dir = tmpDir(name);
  const cfg = [
    '# generated by bench/fleet.mjs',
    'listeners:',
    `  - name: ${name}`,
    '    listen: 127.0.0.1:0',
    '    identify: token',
    'admin:',
    `  listen: unix:${dir}/state/admin.sock`,
    '  drainTimeoutMs: 2000',
    `state: ${dir}/state`,
    ...ledger,
    'dns:',
    '  hosts:',
    `    ${ORIGIN_NAME}: [127.0.0.1]`,
    'audit:',
    `  file: ${dir}/audit.jsonl`,
    ...grantsYaml,
    '',
  ].join('\n');
  fs.writeFileSync(path.join(dir, 'sluice.yaml'), cfg);
  const child = launch(process.execPath, [sluiceEntry, 'start', '--config', path.join(dir, 'sluice.yaml')], { cpu, cwd: dir, name });
  collect(child.stdout);
  const lines = [];
  const warn = [];
  let onLine = null;
  readline.createInterface({ input: child.stderr }).on('line', (l) => {
    if (lines.length < 2000) lines.push(l);
    // The operational log names its level ("level":"warn"); older builds wrote pino's number (40 and up).
    const m = /"level":(?:(\d+)|"(\w+)")/.exec(l);
    const atWarn = m ? (m[1] !== undefined ? Number(m[1]) >= 40 : ['warn', 'error', 'fatal'].includes(m[2])) : /error|warn/i.test(l);
    if (atWarn && warn.length < 50) warn.push(l.slice(0, 400));
    onLine?.();
  });
  const inst = { name, child, dir, adminSocket: path.join(dir, 'state', 'admin.sock'), audit: path.join(dir, 'audit.jsonl'), logs: () => lines.join('\n'), warn, port: null };
  const end = Date.now() + 15_000;
  while (Date.now() < end && inst.port === null) {
    for (const l of lines) {
      try {
        const r = JSON.parse(l);
        if (r.msg === 'listening' && r.listener === name) inst.port = Number(String(r.address).split(':').pop());
      } catch {}
    }
    if (inst.port !== null || child.exitCode !== null || child.signalCode !== null) break;
    await Promise.race([new Promise((r) => (onLine = r)), sleep(100)]);
  }
  onLine = null;
  if (inst.port === null) {
    await stop(child, 1000);
    throw new Error(`${name} did not start: ${inst.logs().trim().split('\n').slice(-6).join(' | ')}`);
  }
  // the admin socket answers
  for (let i = 0; i < 50; i++) {
    try {
      if ((await admin(inst, 'GET', '/healthz', undefined, 1000)).status === 200) return inst;
    } catch {}
    await sleep(50);
  }
  throw new Error(`${name}: the admin socket ${inst.adminSocket} does not answer /healthz`);
}

/** One admin request over the instance's Unix socket; resolves { status, body }. */
function admin(inst, method, p, body, timeoutMs = 5000) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? null : Buffer.from(JSON.stringify(body));
    const req = http.request(
      {
        socketPath: inst.adminSocket,
        method,
        path: p,
        agent: false,
        timeout: timeoutMs,
        headers: data ? { 'content-type': 'application/json', 'content-length': data.length } : {},
      },
      (res) => {
        const chunks = [];
        res.on('data', (d) => chunks.push(d));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json = null;
          try {
            json = JSON.parse(text);
          } catch {}
          resolve({ status: res.statusCode, body: json ?? text });
        });
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`admin ${method} ${p} timed out after ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(data ?? undefined);
  });
}

async function issueGrant(inst, origin) {
  const r = await admin(inst, 'POST', '/v1/grants', { destinations: [`tcp://${ORIGIN_NAME}:${origin.echo}`], allowAddressClasses: ['loopback'] });
  if (r.status !== 201 || typeof r.body?.token !== 'string') throw new Error(`POST /v1/grants on ${inst.name}: ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
  return { id: r.body.id, token: r.body.token };
}

/** Reads an instance's audit file: decisions by request and reason, closes by closedBy. */
function readAudit(file) {
  const out = { decisions: {}, closes: {}, revokedCloses: 0, lines: 0 };
  for (const line of safeRead(file).split('\n')) {
    if (!line) continue;
    out.lines++;
    let r;
    try {
      r = JSON.parse(line);
    } catch {
      continue;
    }
    if (r.kind === 'decision') {
      const k = `${r.request} ${r.reason}`;
      out.decisions[k] = (out.decisions[k] ?? 0) + 1;
    } else if (r.kind === 'close') {
      out.closes[r.closedBy] = (out.closes[r.closedBy] ?? 0) + 1;
      if (r.closedBy === 'revoked') out.revokedCloses++;
    }
  }
  return out;
}

// ---------- tunnels ----------
const IDLE_GUARD_MS = 150_000; // an open tunnel is destroyed by the client after this long (never expected)
let onAnyClose = null;

/** CONNECT through a Sluice, prove the tunnel with one echoed byte, and keep it open. */
function openTunnel(port, authority, token, timeoutMs = 5000) {
  return new Promise((resolve, reject) => {
    const sock = net.connect({ host: '127.0.0.1', port });
    let head = Buffer.alloc(0);
    let stage = 'head';
    const done = (e) => {
      sock.removeAllListeners('data');
      sock.setTimeout(0);
      if (e) {
        sock.destroy();
        reject(e);
      } else {
        sock.resume(); // keep reading, so that the proxy's FIN is seen ('end', then 'close')
        resolve(sock);
      }
    };
    sock.setNoDelay(true);
    sock.setTimeout(timeoutMs, () => done(new Error('tunnel setup timed out')));
    sock.on('error', (e) => {
      if (stage !== 'open') done(e);
    });
    sock.on('close', () => {
      if (stage !== 'open') done(new Error(`closed during ${stage}`));
    });
    sock.on('connect', () => sock.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\nProxy-Authorization: Bearer ${token}\r\n\r\n`));
    sock.on('data', (d) => {
      head = Buffer.concat([head, d]);
      if (stage === 'head') {
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) {
          if (head.length > 16384) done(new Error('response head too large'));
          return;
        }
        const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head.toString('latin1', 0, end))?.[1]);
        if (status !== 200) return done(new Error(`CONNECT answered ${status || 'garbage'}: ${head.toString('latin1', 0, Math.min(end, 200)).split('\r\n').find((l) => /proxy-status/i.test(l)) ?? ''}`));
        head = head.subarray(end + 4);
        stage = 'echo';
        sock.write('x');
      }
      if (stage === 'echo' && head.length >= 1) {
        if (head[0] !== 0x78) return done(new Error('the echo byte differs'));
        stage = 'open';
        done(null);
      }
    });
  });
}

/** Runs fn over items with at most `limit` in flight; bounded by the item count and by deadlineMs. */
async function pool(items, limit, deadlineMs, fn) {
  let next = 0;
  const end = Date.now() + deadlineMs;
  const worker = async () => {
    while (next < items.length && Date.now() < end) await fn(items[next++]);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return next;
}

// ---------- statistics ----------
function pct(values, p) {
  if (!values.length) return null;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}
function median(values) {
  if (!values.length) return null;
  const s = [...values].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}
const lagStats = (v) => ({ n: v.length, p50: pct(v, 50), p99: pct(v, 99), max: v.length ? Math.max(...v) : null });

// ---------- part 1: revocation lag on the fleet ----------
async function revocationPhase({ mode, fleet, redis, origin, grantsPerPhase, tunnels, deadline }) {
  const killPubsub = mode === 'poll';
  const prefix = 'fleet:';
  const phase = { mode, revokes: [], anomalies: [], tunnelsWanted: tunnels, tunnelsOpened: 0, openErrors: {}, openS: null };
  // grants, issued round-robin over the instances (a grant issued anywhere holds everywhere)
  const grants = [];
  for (let g = 0; g < grantsPerPhase; g++) grants.push(await issueGrant(fleet[g % fleet.length], origin));
  const knownBy = async (inst, id) => (await admin(inst, 'GET', `/v1/grants/${id}`, undefined, 2000)).status === 200;
  const syncEnd = Date.now() + 10_000;
  for (const inst of fleet) for (const g of grants) while (!(await knownBy(inst, g.id))) {
    if (Date.now() > syncEnd) throw new Error(`${inst.name} did not learn grant ${g.id} within 10 s`);
    await sleep(20);
  }
  // tunnels: grant g gets about tunnels/grants of them; tunnel k goes to instance k mod N (round-robin)
  const plan = [];
  for (let k = 0; k < tunnels; k++) plan.push({ g: k % grantsPerPhase, inst: k % fleet.length, sock: null, closedAt: null });
  const t0 = performance.now();
  await pool(plan, 48, 90_000, async (t) => {
    try {
      t.sock = await openTunnel(fleet[t.inst].port, `${ORIGIN_NAME}:${origin.echo}`, grants[t.g].token);
      phase.tunnelsOpened++;
      t.sock.setTimeout(IDLE_GUARD_MS, () => {
        t.guard = true;
        t.sock.destroy();
      });
      t.sock.on('error', (e) => (t.error = e.code ?? e.message));
      t.sock.once('close', () => {
        t.closedAt = performance.now();
        onAnyClose?.();
      });
    } catch (e) {
      phase.openErrors[e.message] = (phase.openErrors[e.message] ?? 0) + 1;
    }
  });
  phase.openS = (performance.now() - t0) / 1000;
  const live = plan.filter((t) => t.sock);
  log(`${mode}: ${live.length}/${tunnels} tunnels open over ${fleet.length} instances in ${phase.openS.toFixed(1)} s (${fleet.map((_, i) => live.filter((t) => t.inst === i).length).join('/')})`);
  if (Object.keys(phase.openErrors).length) log(`${mode}: tunnel errors ${JSON.stringify(phase.openErrors)}`);
  await sleep(200);

  const numsub = async () => Number((await redis.client.call('PUBSUB', 'NUMSUB', `${prefix}changes`))[1]);
  for (let g = 0; g < grantsPerPhase && Date.now() < deadline; g++) {
    const mine = live.filter((t) => t.g === g);
    const closedEarly = mine.filter((t) => t.closedAt !== null).length;
    if (closedEarly) phase.anomalies.push(`grant ${g}: ${closedEarly} tunnel(s) closed before its revoke`);
    const othersOpenBefore = live.filter((t) => t.g > g && t.closedAt === null);
    const revoker = Math.floor(Math.random() * fleet.length);
    const rec = { grant: grants[g].id, revoker: fleet[revoker].name, perInstance: {} };
    if (killPubsub) {
      rec.killed = await redis.client.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
      rec.subscribersAtRevoke = await numsub();
    }
    const allClosed = new Promise((resolve) => {
      const check = () => {
        if (mine.every((t) => t.closedAt !== null)) resolve(true);
      };
      onAnyClose = check;
      check();
    });
    const sent = performance.now();
    let answer;
    try {
      answer = await admin(fleet[revoker], 'DELETE', `/v1/grants/${grants[g].id}`);
    } catch (e) {
      answer = { status: 0, body: e.message };
    }
    rec.answerMs = performance.now() - sent;
    rec.status = answer.status;
    rec.endedConnections = answer.body?.endedConnections ?? null;
    if (killPubsub) rec.subscribersAfterAnswer = await numsub();
    if (answer.status !== 200) phase.anomalies.push(`grant ${g}: DELETE on ${fleet[revoker].name} answered ${answer.status} ${JSON.stringify(answer.body).slice(0, 200)}`);
    await Promise.race([allClosed, sleep(3000)]);
    onAnyClose = null;
    for (let i = 0; i < fleet.length; i++) {
      const on = mine.filter((t) => t.inst === i);
      const open = on.filter((t) => t.closedAt === null);
      const closes = on.filter((t) => t.closedAt !== null).map((t) => t.closedAt);
      rec.perInstance[fleet[i].name] = {
        tunnels: on.length,
        lagMs: open.length === 0 && closes.length ? Math.max(...closes) - sent : null,
        firstMs: closes.length ? Math.min(...closes) - sent : null,
        stillOpen: open.length,
        local: i === revoker,
      };
      if (open.length) {
        phase.anomalies.push(`grant ${g} (${grants[g].id}): ${open.length} of ${on.length} tunnel(s) on ${fleet[i].name} still open 3 s after the DELETE on ${fleet[revoker].name}`);
        for (const t of open) t.sock.destroy();
      }
    }
    const collateral = othersOpenBefore.filter((t) => t.closedAt !== null).length;
    if (collateral) phase.anomalies.push(`grant ${g}: ${collateral} tunnel(s) of other, unrevoked grants closed during its revoke`);
    phase.revokes.push(rec);
    if (killPubsub) {
      // the subscriptions come back (ioredis reconnects) before the next kill, so every kill removes them
      const end = Date.now() + 3000;
      while (Date.now() < end && (await numsub()) < fleet.length) await sleep(20);
    }
    await sleep(150 + Math.floor(Math.random() * 100));
  }
  // whatever is still open (a cut run) is closed by the client
  for (const t of live) if (t.closedAt === null) t.sock.destroy();
  const expectedLocal = (rec) => rec.perInstance[rec.revoker]?.tunnels;
  for (const rec of phase.revokes) {
    if (rec.status === 200 && rec.endedConnections !== null && rec.endedConnections !== expectedLocal(rec)) {
      phase.anomalies.push(`grant ${rec.grant}: DELETE on ${rec.revoker} reported endedConnections ${rec.endedConnections}, ${expectedLocal(rec)} tunnels were open there`);
    }
    if (killPubsub && rec.subscribersAfterAnswer !== 0) phase.anomalies.push(`grant ${rec.grant}: ${rec.subscribersAfterAnswer} subscription(s) were back before the DELETE was answered: the notification may have been delivered`);
  }
  // statistics: per instance, overall, and remote only (the instances that did not take the DELETE)
  const all = [];
  const remote = [];
  const perInstance = {};
  for (const inst of fleet) perInstance[inst.name] = [];
  for (const rec of phase.revokes) {
    for (const [name, r] of Object.entries(rec.perInstance)) {
      if (r.lagMs === null) continue;
      all.push(r.lagMs);
      perInstance[name].push(r.lagMs);
      if (!r.local) remote.push(r.lagMs);
    }
  }
  phase.lag = { all: lagStats(all), remote: lagStats(remote), perInstance: Object.fromEntries(Object.entries(perInstance).map(([k, v]) => [k, lagStats(v)])) };
  phase.lostNotificationsConfirmed = killPubsub ? phase.revokes.filter((r) => r.subscribersAtRevoke === 0 && r.subscribersAfterAnswer === 0).length : null;
  return phase;
}

// ---------- part 1b: budgets across the fleet (docs/fleet.md, "Budgets across the fleet") ----------
const LEASE_TTL_MS = 2000; // ledger.redis.leaseTtlMs of the fleet's instances (the default is 10 s)
const FLEET_PREFIX = 'fleet:';
const BYTES_MAX = 4 << 20; // limits.maxBytes of the byte-budget grants
const BYTES_TUNNELS_PER_INSTANCE = 4;
const BYTES_REPS = 5;
/**
 * How each tunnel drives the maxBytes grant: "bulk" keeps 256 KiB in flight (a plain upload through an
 * echo), "paced" one 16 KiB write at a time, so that the reservations can keep up with the relay.
 */
const BYTE_VARIANTS = [
  { variant: 'bulk', window: 256 << 10, block: 16 << 10 },
  { variant: 'paced', window: 16 << 10, block: 16 << 10 },
];
const CONC_REPS = 5;
const QUOTA_REPS = 3;
/** grant/shared-budgets.ts byteChunk(), restated: a 64th of the budget, between 16 KiB and 1 MiB. */
const byteChunk = (maxBytes) => Math.min(1 << 20, Math.max(16 << 10, Math.ceil(maxBytes / 64)));

/**
 * An echo origin in this process that counts what reaches it: the bytes Sluice relayed upstream,
 * exactly (the client counts the downstream ones).
 */
function startCountingEcho() {
  return new Promise((resolve, reject) => {
    const state = { received: 0, open: 0, accepted: 0 };
    const sockets = new Set();
    const server = net.createServer({ allowHalfOpen: true }, (s) => {
      state.open++;
      state.accepted++;
      sockets.add(s);
      s.setNoDelay(true);
      s.setTimeout(30_000, () => s.destroy());
      s.on('data', (d) => {
        state.received += d.length;
        if (!s.write(d)) s.pause();
      });
      s.on('drain', () => s.resume());
      s.on('end', () => s.end());
      s.on('error', () => {});
      s.on('close', () => {
        state.open--;
        sockets.delete(s);
      });
    });
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () =>
      resolve({
        port: server.address().port,
        state,
        close: () => {
          for (const s of sockets) s.destroy();
          server.close();
        },
      }),
    );
  });
}

/** POST /v1/grants with limits, on one instance; waits until every instance of the fleet knows it. */
async function issueBudgetGrant(fleet, issuer, destinations, limits) {
  const r = await admin(issuer, 'POST', '/v1/grants', { destinations, allowAddressClasses: ['loopback'], limits });
  if (r.status !== 201 || typeof r.body?.token !== 'string') throw new Error(`POST /v1/grants (limits ${JSON.stringify(limits)}) on ${issuer.name}: ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
  const g = { id: r.body.id, token: r.body.token };
  const end = Date.now() + 10_000;
  for (const inst of fleet) {
    while ((await admin(inst, 'GET', `/v1/grants/${g.id}`, undefined, 2000)).status !== 200) {
      if (Date.now() > end) throw new Error(`${inst.name} did not learn grant ${g.id} within 10 s`);
      await sleep(20);
    }
  }
  return g;
}

/** The status and the Proxy-Status details (Sluice's reason) of a CONNECT answer head. */
function parseAnswer(head) {
  return { status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1]) || 0, reason: /details="([^"]*)"/i.exec(head)?.[1] ?? null };
}

/**
 * One CONNECT attempt; never rejects. Resolves { ok, status, reason, error, sock } once the tunnel is
 * proven by one echoed byte (ok: the socket is kept open and returned) or refused/failed.
 */
function tryTunnel(port, authority, token, timeoutMs = 3000) {
  return new Promise((resolve) => {
    const r = { ok: false, status: 0, reason: null, error: null, sock: null };
    const sock = net.connect({ host: '127.0.0.1', port });
    let head = Buffer.alloc(0);
    let stage = 'head';
    const done = (error) => {
      if (stage === 'done') return;
      stage = 'done';
      sock.removeAllListeners('data');
      sock.setTimeout(0);
      if (error !== null) {
        r.error ??= error;
        sock.destroy();
      } else {
        r.ok = true;
        r.sock = sock;
        sock.resume();
        sock.setTimeout(IDLE_GUARD_MS, () => sock.destroy());
      }
      resolve(r);
    };
    sock.setNoDelay(true);
    sock.setTimeout(timeoutMs, () => done('timeout'));
    sock.on('error', (e) => {
      if (stage !== 'done') done(e.code ?? e.message);
    });
    sock.on('close', () => {
      if (stage !== 'done') done(`closed during ${stage}`);
    });
    sock.on('connect', () => sock.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\nProxy-Authorization: Bearer ${token}\r\n\r\n`));
    sock.on('data', (d) => {
      head = Buffer.concat([head, d]);
      if (stage === 'head') {
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) return head.length > 16384 ? done('response head too large') : undefined;
        Object.assign(r, parseAnswer(head.toString('latin1', 0, end)));
        if (r.status !== 200) return done(`refused ${r.status}`);
        head = head.subarray(end + 4);
        stage = 'echo';
        sock.write('x');
      }
      if (stage === 'echo' && head.length >= 1) done(head[0] === 0x78 ? null : 'the echo byte differs');
    });
  });
}

/**
 * A CONNECT that, once answered 200, keeps up to `window` bytes in flight through the echo origin until
 * the proxy cuts it (or `capBytes` are written and echoed, or nothing moves for idleMs). Never rejects.
 */
function pumpTunnel(port, authority, token, { block, window, capBytes, idleMs = 5000 }) {
  return new Promise((resolve) => {
    const r = { opened: false, status: 0, reason: null, written: 0, received: 0, cut: false, capped: false, timedOut: false, error: null };
    const sock = net.connect({ host: '127.0.0.1', port });
    let head = Buffer.alloc(0);
    let stage = 'head';
    let weClosed = false;
    const close = () => {
      weClosed = true;
      sock.destroy();
    };
    const pump = () => {
      while (stage === 'open' && !weClosed && r.written - r.received < window && r.written < capBytes) {
        sock.write(block);
        r.written += block.length;
      }
      if (r.written >= capBytes && r.received >= r.written) {
        r.capped = true;
        close();
      }
    };
    sock.setNoDelay(true);
    sock.setTimeout(idleMs, () => {
      r.timedOut = true;
      close();
    });
    sock.on('error', (e) => (r.error ??= e.code ?? e.message));
    sock.on('close', () => {
      if (stage === 'open' && !weClosed) r.cut = true;
      sock.setTimeout(0);
      resolve(r);
    });
    sock.on('connect', () => sock.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\nProxy-Authorization: Bearer ${token}\r\n\r\n`));
    sock.on('data', (d) => {
      if (stage === 'open') {
        r.received += d.length;
        return pump();
      }
      if (stage !== 'head') return;
      head = Buffer.concat([head, d]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) {
        if (head.length > 16384) {
          r.error = 'response head too large';
          close();
        }
        return;
      }
      Object.assign(r, parseAnswer(head.toString('latin1', 0, end)));
      if (r.status !== 200) {
        stage = 'refused';
        return close();
      }
      stage = 'open';
      r.opened = true;
      r.received += head.length - (end + 4);
      pump();
    });
  });
}

const countBy = (list, key) => {
  const out = {};
  for (const x of list) {
    const k = key(x);
    out[k] = (out[k] ?? 0) + 1;
  }
  return out;
};

/** maxBytes: every instance drives the grant at once, reconnecting after each cut, until refused. */
async function byteBudgetRep({ fleet, redis, echo, rep, deadline, variant, window, block: blockSize }) {
  const maxBytes = BYTES_MAX;
  const chunk = byteChunk(maxBytes);
  const authority = `${ORIGIN_NAME}:${echo.port}`;
  // the previous repetition's origin sockets are gone before the counters start again
  for (let i = 0; i < 100 && echo.state.open > 0; i++) await sleep(20);
  const g = await issueBudgetGrant(fleet, fleet[rep % fleet.length], [`tcp://${authority}`], { maxBytes });
  const originBefore = echo.state.received;
  const block = Buffer.alloc(blockSize, 0x61);
  const endAt = Math.min(deadline, Date.now() + 20_000);
  const tunnels = [];
  const workers = [];
  const t0 = performance.now();
  for (let i = 0; i < fleet.length; i++) {
    for (let k = 0; k < BYTES_TUNNELS_PER_INSTANCE; k++) {
      workers.push(
        (async () => {
          // each worker: a tunnel at a time; after a cut, a new one; stops once the CONNECT is refused
          for (let n = 0; n < 60 && Date.now() < endAt; n++) {
            const r = await pumpTunnel(fleet[i].port, authority, g.token, { block, window, capBytes: 4 * maxBytes });
            tunnels.push({ inst: i, worker: k, ...r });
            if (!r.opened && r.reason === 'byte_limit_reached') return 'refused';
            if (r.opened && !r.cut) return r.capped ? 'capped' : 'stalled';
            if (!r.opened) await sleep(20);
          }
          return 'bounded';
        })(),
      );
    }
  }
  const ends = await Promise.all(workers);
  const driveMs = performance.now() - t0;
  for (let i = 0; i < 100 && echo.state.open > 0; i++) await sleep(20);
  const storeBytes = Number(await redis.client.call('HGET', `${FLEET_PREFIX}usage:${g.id}`, 'bytes'));
  const received = tunnels.reduce((n, t) => n + t.received, 0);
  const echoedWritten = tunnels.reduce((n, t) => n + Math.min(t.written, t.received), 0);
  const clientRelayed = echoedWritten + received; // written bytes that came back, plus the bytes that came back
  const originReceived = echo.state.received - originBefore;
  const exactRelayed = originReceived + received; // upstream as counted by the origin, downstream by the client
  const perInstance = fleet.map((inst, i) => {
    const mine = tunnels.filter((t) => t.inst === i);
    return { name: inst.name, tunnels: mine.filter((t) => t.opened).length, cut: mine.filter((t) => t.cut).length, received: mine.reduce((n, t) => n + t.received, 0) };
  });
  const bound = fleet.length * chunk;
  const rec = {
    variant,
    window,
    block: blockSize,
    rep,
    grant: g.id,
    maxBytes,
    chunk,
    bound,
    shortBound: 2 * fleet.length * chunk,
    driveMs,
    clientRelayed,
    exactRelayed,
    originReceived,
    clientReceived: received,
    storeBytes,
    overshoot: clientRelayed - maxBytes,
    exactOvershoot: exactRelayed - maxBytes,
    tunnelsOpened: tunnels.filter((t) => t.opened).length,
    tunnelsCut: tunnels.filter((t) => t.cut).length,
    refusals: countBy(tunnels.filter((t) => !t.opened), (t) => t.reason ?? t.error ?? `status ${t.status}`),
    workerEnds: countBy(ends, (e) => e),
    perInstance,
  };
  rec.boundHeld = rec.exactOvershoot <= bound && rec.overshoot <= bound;
  rec.shortfallWithinBound = maxBytes - exactRelayed < rec.shortBound;
  return rec;
}

/** maxConcurrent: `attempts` CONNECTs at once, round-robin over the instances, held until all are answered. */
async function concurrencyRep({ fleet, redis, origin, rep, maxConcurrent = 10, attempts = 40 }) {
  const authority = `${ORIGIN_NAME}:${origin.echo}`;
  const g = await issueBudgetGrant(fleet, fleet[rep % fleet.length], [`tcp://${authority}`], { maxConcurrent });
  const results = await Promise.all(Array.from({ length: attempts }, (_, k) => tryTunnel(fleet[k % fleet.length].port, authority, g.token, 5000)));
  const ok = results.filter((r) => r.ok);
  const leasesHeld = Number(await redis.client.call('ZCARD', `${FLEET_PREFIX}leases:${g.id}`));
  for (const r of ok) r.sock.destroy();
  // closed connections give their leases back at once
  let leasesAfter = leasesHeld;
  const end = Date.now() + 3000;
  while (Date.now() < end && leasesAfter > 0) {
    await sleep(20);
    leasesAfter = Number(await redis.client.call('ZCARD', `${FLEET_PREFIX}leases:${g.id}`));
  }
  return {
    rep,
    grant: g.id,
    maxConcurrent,
    attempts,
    succeeded: ok.length,
    perInstance: fleet.map((_, i) => results.filter((r, k) => r.ok && k % fleet.length === i).length),
    refusals: countBy(results.filter((r) => !r.ok), (r) => r.reason ?? r.error),
    leasesWhileHeld: leasesHeld,
    leasesAfterClose: leasesAfter,
    exact: ok.length === maxConcurrent,
  };
}

/** maxConnections: `attempts` CONNECTs, 3 in flight, round-robin over the instances, each closed once proven. */
async function quotaRep({ fleet, redis, origin, rep, maxConnections = 30, attempts = 60 }) {
  const authority = `${ORIGIN_NAME}:${origin.echo}`;
  const g = await issueBudgetGrant(fleet, fleet[rep % fleet.length], [`tcp://${authority}`], { maxConnections });
  const plan = Array.from({ length: attempts }, (_, k) => ({ k, inst: k % fleet.length, r: null }));
  await pool(plan, fleet.length, 30_000, async (a) => {
    a.r = await tryTunnel(fleet[a.inst].port, authority, g.token, 3000);
    if (a.r.ok) a.r.sock.destroy();
  });
  const done = plan.filter((a) => a.r !== null);
  const ok = done.filter((a) => a.r.ok);
  const storeConnections = Number(await redis.client.call('HGET', `${FLEET_PREFIX}usage:${g.id}`, 'connections'));
  return {
    rep,
    grant: g.id,
    maxConnections,
    attempts: done.length,
    succeeded: ok.length,
    perInstance: fleet.map((_, i) => ok.filter((a) => a.inst === i).length),
    lastSuccessAt: ok.length ? Math.max(...ok.map((a) => a.k)) : null,
    refusals: countBy(done.filter((a) => !a.r.ok), (a) => a.r.reason ?? a.r.error),
    storeConnections,
    exact: ok.length === maxConnections,
  };
}

/**
 * Lease return: one instance holds all 5 slots of a maxConcurrent-5 grant; SIGKILL its process group;
 * the time until a CONNECT for the grant succeeds on another instance. The instance is not restarted
 * (nothing after this uses the fleet).
 */
async function leaseReturn({ fleet, redis, origin, victimIndex }) {
  const maxConcurrent = 5;
  const authority = `${ORIGIN_NAME}:${origin.echo}`;
  const victim = fleet[victimIndex];
  const others = fleet.filter((_, i) => i !== victimIndex);
  const g = await issueBudgetGrant(fleet, others[0], [`tcp://${authority}`], { maxConcurrent });
  const held = [];
  for (let i = 0; i < maxConcurrent; i++) {
    const r = await tryTunnel(victim.port, authority, g.token, 3000);
    if (!r.ok) throw new Error(`lease return: tunnel ${i + 1} on ${victim.name} failed: ${r.reason ?? r.error}`);
    held.push(r.sock);
  }
  const before = await tryTunnel(others[0].port, authority, g.token, 3000);
  if (before.ok) before.sock.destroy();
  const rec = { grant: g.id, maxConcurrent, leaseTtlMs: LEASE_TTL_MS, renewEveryMs: Math.max(100, Math.floor(LEASE_TTL_MS / 3)), victim: victim.name, heldOnVictim: held.length, refusedBeforeKill: before.ok ? 'NOT refused' : before.reason ?? before.error };
  victim.killedByBench = true;
  const t0 = performance.now();
  try {
    process.kill(-victim.child.pid, 'SIGKILL');
  } catch (e) {
    throw new Error(`lease return: SIGKILL to ${victim.name}'s group failed: ${e.message}`);
  }
  // what the store says right after the kill: the latest lease expiry against Redis' clock
  const [leases, time] = await Promise.all([redis.client.call('ZRANGE', `${FLEET_PREFIX}leases:${g.id}`, '0', '-1', 'WITHSCORES'), redis.client.call('TIME')]);
  const redisNow = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000);
  const expiries = leases.filter((_, i) => i % 2 === 1).map(Number);
  rec.leasesAtKill = expiries.length;
  rec.predictedMs = expiries.length ? Math.max(...expiries) - redisNow : null;
  rec.firstExpiryMs = expiries.length ? Math.min(...expiries) - redisNow : null;
  const refusals = [];
  let attempts = 0;
  while (attempts < 600 && performance.now() - t0 < 4 * LEASE_TTL_MS + 5000) {
    const r = await tryTunnel(others[attempts % others.length].port, authority, g.token, 2000);
    attempts++;
    if (r.ok) {
      rec.measuredMs = performance.now() - t0;
      rec.on = others[(attempts - 1) % others.length].name;
      r.sock.destroy();
      break;
    }
    refusals.push(r.reason ?? r.error);
    await sleep(10);
  }
  rec.measuredMs ??= null;
  rec.attempts = attempts;
  rec.refusalsMeanwhile = countBy(refusals, (x) => x);
  for (const s of held) s.destroy();
  await Promise.race([victim.child.exited, sleep(2000)]);
  return rec;
}

async function budgetPart({ fleet, redis, origin, deadline }) {
  const out = { leaseTtlMs: LEASE_TTL_MS, bytes: [], concurrency: [], quota: [], lease: null, skipped: [] };
  const echo = await startCountingEcho();
  try {
    for (const v of BYTE_VARIANTS) for (let rep = 1; rep <= BYTES_REPS; rep++) {
      if (Date.now() > deadline - 30_000) {
        out.skipped.push(`maxBytes ${v.variant} repetition ${rep}`);
        continue;
      }
      const r = await byteBudgetRep({ fleet, redis, echo, rep, deadline: deadline - 25_000, ...v });
      out.bytes.push(r);
      log(`budget maxBytes ${v.variant} ${rep}: relayed ${r.clientRelayed} (client) ${r.exactRelayed} (origin+client), store ${r.storeBytes}, overshoot ${r.overshoot} / ${r.exactOvershoot} vs bound ${r.bound}; ${r.tunnelsOpened} tunnels, ${r.tunnelsCut} cut, refusals ${JSON.stringify(r.refusals)}`);
    }
  } finally {
    echo.close();
  }
  for (let rep = 1; rep <= CONC_REPS; rep++) {
    if (Date.now() > deadline - 20_000) {
      out.skipped.push(`maxConcurrent repetition ${rep}`);
      continue;
    }
    const r = await concurrencyRep({ fleet, redis, origin, rep });
    out.concurrency.push(r);
    log(`budget maxConcurrent ${rep}: ${r.succeeded}/${r.attempts} succeeded (${r.perInstance.join('/')}), refusals ${JSON.stringify(r.refusals)}, leases ${r.leasesWhileHeld} → ${r.leasesAfterClose} after close`);
  }
  for (let rep = 1; rep <= QUOTA_REPS; rep++) {
    if (Date.now() > deadline - 15_000) {
      out.skipped.push(`maxConnections repetition ${rep}`);
      continue;
    }
    const r = await quotaRep({ fleet, redis, origin, rep });
    out.quota.push(r);
    log(`budget maxConnections ${rep}: ${r.succeeded}/${r.attempts} succeeded (${r.perInstance.join('/')}), store connections ${r.storeConnections}, refusals ${JSON.stringify(r.refusals)}`);
  }
  if (Date.now() > deadline - 10_000) out.skipped.push('lease return');
  else {
    out.lease = await leaseReturn({ fleet, redis, origin, victimIndex: fleet.length - 1 });
    log(`budget lease return: ${fmt(out.lease.measuredMs, 0)} ms after SIGKILL of ${out.lease.victim} (store's latest expiry ${fmt(out.lease.predictedMs, 0)} ms; leaseTtlMs ${LEASE_TTL_MS}), ${out.lease.attempts} attempts`);
  }
  const bytesSummary = (list) => {
    if (!list.length) return null;
    const over = list.map((r) => r.overshoot);
    const exactOver = list.map((r) => r.exactOvershoot);
    const short = list.map((r) => r.maxBytes - r.exactRelayed);
    return {
          reps: list.length,
          maxBytes: BYTES_MAX,
          chunk: byteChunk(BYTES_MAX),
          bound: list[0].bound,
          shortBound: list[0].shortBound,
          overshootMax: Math.max(...over),
          overshootMedian: median(over),
          exactOvershootMax: Math.max(...exactOver),
          exactOvershootMedian: median(exactOver),
          shortfallMax: Math.max(...short),
          shortfallMedian: median(short),
          boundHeldEveryTime: list.every((r) => r.boundHeld),
          shortfallWithinBoundEveryTime: list.every((r) => r.shortfallWithinBound),
    };
  };
  out.summary = {
    bytes: bytesSummary(out.bytes),
    bytesByVariant: Object.fromEntries(BYTE_VARIANTS.map((v) => [v.variant, bytesSummary(out.bytes.filter((r) => r.variant === v.variant))])),
    concurrency: out.concurrency.length ? { reps: out.concurrency.length, succeeded: out.concurrency.map((r) => r.succeeded), exactEveryTime: out.concurrency.every((r) => r.exact) } : null,
    quota: out.quota.length ? { reps: out.quota.length, succeeded: out.quota.map((r) => r.succeeded), exactEveryTime: out.quota.every((r) => r.exact) } : null,
    leaseReturnMs: out.lease?.measuredMs ?? null,
  };
  return out;
}

// ---------- part 2: tunnel rate, file store against Redis store ----------
async function loadgen(args, timeoutMs) {
  const child = launch(LOADGEN, args, { cpu: 1, name: 'loadgen' });
  child.stdin.end();
  const out = collect(child.stdout);
  const err = collect(child.stderr);
  const r = await Promise.race([child.exited, sleep(timeoutMs).then(() => 'timeout')]);
  if (r === 'timeout') {
    await stop(child, 500);
    throw new Error(`loadgen ${args[0]} timed out after ${timeoutMs} ms`);
  }
  const line = out().trim().split('\n').pop();
  try {
    return JSON.parse(line);
  } catch {
    throw new Error(`loadgen ${args[0]} exited ${r.code ?? r.signal}: ${err().trim() || line}`);
  }
}

async function rateRound(store, round, { redis, origin }) {
  const ledger =
    store === 'redis'
      ? ['ledger:', '  store: redis', '  redis:', `    url: ${redis.url}`, `    keyPrefix: "rate${round}:"`, '  maxStaleMs: 1000']
      : ['ledger:', '  store: file'];
  const inst = await startSluice({ name: `rate-${store}`, ledger, cpu: 0 });
  try {
    // a run-time grant, as a fleet uses them: in the state directory (file) or in Redis (redis)
    const g = await issueGrant(inst, origin);
    const tunnel = ['--target', `127.0.0.1:${inst.port}`, '--connect', `${ORIGIN_NAME}:${origin.echo}`, '--auth', Buffer.from(`${g.id}:${g.token}`).toString('base64'), '--size', '1'];
    let probe = null;
    for (let i = 0; i < 20; i++) {
      probe = await loadgen(['latency', ...tunnel, '--max', '3', '--duration', '2'], 20_000);
      if (probe.done >= 1) break;
      await sleep(100);
    }
    if (!probe || probe.done < 1) throw new Error(`rate-${store}: the probe tunnel failed: ${JSON.stringify(probe?.errors)} ${JSON.stringify(probe?.statuses)}`);
    await loadgen(['rate', ...tunnel, '--concurrency', '32', '--duration', String(opt.warmS)], opt.warmS * 1000 + 20_000);
    const c0 = groupCpu(inst.child.pid);
    const b0 = cpuBusy(0);
    const w0 = performance.now();
    const r = await loadgen(['rate', ...tunnel, '--concurrency', '32', '--duration', String(opt.rateS)], opt.rateS * 1000 + 20_000);
    const wall = (performance.now() - w0) / 1000;
    const proxyS = groupCpu(inst.child.pid) - c0;
    const proxyPct = (100 * proxyS) / wall;
    // what else ran on Sluice's core (other work on the machine): busy time of CPU 0 that was not Sluice
    const b1 = cpuBusy(0);
    const othersOnProxyCpuPct = PIN && b0 !== null && b1 !== null ? Math.max(0, (100 * (b1 - b0 - proxyS)) / wall) : null;
    const errors = Object.values(r.errors ?? {}).reduce((a, b) => a + (typeof b === 'number' ? b : 0), 0);
    return { store, round, rate: r.rate, done: r.done, proxyCpuPct: proxyPct, othersOnProxyCpuPct, clientCpuPct: (100 * ((r.cpu_user_s ?? 0) + (r.cpu_sys_s ?? 0))) / (r.wall_s ?? wall), errors: r.errors, statuses: r.statuses, errorCount: errors, latencyUs: r.latency_us ?? null };
  } finally {
    const alive = inst.child.exitCode === null && inst.child.signalCode === null;
    await stop(inst.child, 5000);
    if (!alive) throw new Error(`rate-${store} exited by itself: ${inst.logs().split('\n').slice(-5).join(' | ')}`);
    inst.auditSummary = readAudit(inst.audit);
    rateAudit[store] ??= { decisions: {}, closes: {}, warn: [] };
    for (const [k, v] of Object.entries(inst.auditSummary.decisions)) rateAudit[store].decisions[k] = (rateAudit[store].decisions[k] ?? 0) + v;
    for (const [k, v] of Object.entries(inst.auditSummary.closes)) rateAudit[store].closes[k] = (rateAudit[store].closes[k] ?? 0) + v;
    rateAudit[store].warn.push(...inst.warn.slice(0, 5));
  }
}
const rateAudit = {};

// ---------- report ----------
const fmt = (v, d = 1) => (v === null || v === undefined ? '–' : Number(v).toFixed(d));
function renderMarkdown(result) {
  const L = [];
  const modeName = { notify: 'notification + poll', poll: 'poll only (CLIENT KILL TYPE pubsub before each revoke)' };
  L.push(`Commit \`${result.commit}\`${result.dirty ? ' (working tree modified)' : ''}, Node ${result.node}, ${result.redisVersion}, ${result.machine.nproc} CPUs (${result.machine.model}), load average ${result.loadavg.before.join(' ')} → ${result.loadavg.after.join(' ')}. ${result.durationS} s.`);
  L.push('');
  L.push(`## Revocation lag`);
  L.push('');
  L.push(`${result.settings.instances} Sluice instances on \`ledger.store: redis\` (\`maxStaleMs: 1000\`), one \`redis-server\` (appendonly, everysec, noeviction), ${result.settings.tunnels.toLocaleString('en-US')} live CONNECT tunnels over ${result.settings.grants} run-time grants, round-robin over the instances. Each of ${result.settings.grants} revokes is a \`DELETE /v1/grants/{id}\` on a random instance's admin socket; lag = from the request sent to the last of that grant's tunnels on an instance seen closed by the client. "remote" leaves out the instance that took the DELETE (it revokes locally, without the store). Instances ${result.fleetPinning}.`);
  L.push('');
  L.push('| delivery | instance | samples | p50 ms | p99 ms | max ms |');
  L.push('|---|---|---:|---:|---:|---:|');
  for (const ph of result.fleet.phases) {
    const row = (label, s) => L.push(`| ${modeName[ph.mode]} | ${label} | ${s.n} | ${fmt(s.p50)} | ${fmt(s.p99)} | ${fmt(s.max)} |`);
    row('all', ph.lag.all);
    row('remote only', ph.lag.remote);
    for (const [name, s] of Object.entries(ph.lag.perInstance)) row(name, s);
  }
  L.push('');
  for (const ph of result.fleet.phases) {
    L.push(`- ${modeName[ph.mode]}: ${ph.tunnelsOpened}/${ph.tunnelsWanted} tunnels opened in ${fmt(ph.openS)} s${Object.keys(ph.openErrors).length ? ` (errors: ${JSON.stringify(ph.openErrors)})` : ''}; ${ph.revokes.length} revokes, DELETE answered in p50 ${fmt(median(ph.revokes.map((r) => r.answerMs)))} ms${ph.mode === 'poll' ? `; notification lost (no subscriber from the kill to the answer) in ${ph.lostNotificationsConfirmed}/${ph.revokes.length}` : ''}.`);
  }
  L.push(`- Audit, close records \`closedBy: revoked\` per instance: ${Object.entries(result.fleet.audit).map(([n, a]) => `${n} ${a.revokedCloses}`).join(', ')} (tunnels opened: ${result.fleet.phases.reduce((n, p) => n + p.tunnelsOpened, 0)}).`);
  const anomalies = result.fleet.phases.flatMap((p) => p.anomalies.map((a) => `${p.mode}: ${a}`));
  L.push(`- Anomalies: ${anomalies.length ? '' : 'none (every revoke ended every tunnel of its grant on every instance, and no other).'}`);
  for (const a of anomalies.slice(0, 40)) L.push(`  - ${a}`);
  if (result.fleet.warn.length) L.push(`- Sluice log lines at warn or above: ${result.fleet.warn.length} (first: \`${result.fleet.warn[0].slice(0, 200)}\`)`);
  L.push('');
  L.push('## Tunnel rate: Redis store against file store');
  L.push('');
  L.push(`One Sluice, a run-time grant issued through its admin socket, \`bench/loadgen.c rate\`: CONNECT, 1 byte echoed, close; 32 concurrent, ${result.settings.rateS} s per round after a ${result.settings.warmS} s warm-up, ${result.settings.rounds} interleaved rounds. ${result.pinning}.`);
  L.push('');
  const roundNos = [...new Set(result.rate.rounds.map((r) => r.round))].sort((a, b) => a - b);
  const cell = (store, n) => result.rate.rounds.find((r) => r.store === store && r.round === n);
  L.push(`| store | ${roundNos.map((n) => `round ${n}`).join(' | ')} | median tunnels/s | Sluice CPU % (median) | other work on its CPU % (median) | client errors |`);
  L.push(`|---|${roundNos.map(() => '---:').join('|')}|---:|---:|---:|---:|`);
  for (const store of ['file', 'redis']) {
    const rs = result.rate.rounds.filter((r) => r.store === store);
    L.push(`| ${store} | ${roundNos.map((n) => fmt(cell(store, n)?.rate, 0)).join(' | ')} | ${fmt(result.rate.median[store], 0)} | ${fmt(median(rs.map((r) => r.proxyCpuPct)), 0)} | ${fmt(median(rs.map((r) => r.othersOnProxyCpuPct).filter((v) => v !== null)), 0)} | ${rs.reduce((n, r) => n + r.errorCount, 0)} |`);
  }
  L.push(`| redis / file, same round | ${roundNos.map((n) => fmt(result.rate.pairedRatios.find((p) => p.round === n)?.ratio, 3)).join(' | ')} | ${fmt(median(result.rate.pairedRatios.map((p) => p.ratio)), 3)} | | | |`);
  L.push('');
  L.push(`**redis / file = ${fmt(result.rate.ratio, 3)}** (ratio of the medians; target ≥ 0.95: ${result.rate.ratio === null ? 'not measured' : result.rate.ratio >= 0.95 ? 'met' : 'NOT met'}). Sluice below 100% of its core, with other work on that core, means the machine and not Sluice set the rate: read the same-round ratios and their spread before the verdict.${result.rate.failures.length ? ` Failures: ${result.rate.failures.join('; ')}` : ''}`);
  L.push('');
  L.push('## Budgets across the fleet');
  L.push('');
  const b = result.budgets;
  if (!b) L.push('Not measured (see the notes).');
  else {
    const kib = (v) => (v === null || v === undefined ? '–' : `${(v / 1024).toFixed(1)} KiB`);
    const sb = b.summary.bytes;
    L.push(`The same ${result.settings.instances} instances, \`ledger.redis.leaseTtlMs: ${b.leaseTtlMs}\`; run-time grants with \`limits\` issued through an admin socket (the instance rotates), used once every instance knows them.`);
    L.push('');
    L.push(`**maxBytes.** A grant with \`maxBytes\` ${sb ? `${sb.maxBytes} (${kib(sb.maxBytes)}; chunk ${kib(sb.chunk)})` : ''}, a new one each repetition; ${BYTES_TUNNELS_PER_INSTANCE} tunnels per instance at once to an echo origin in the bench process; "bulk": each keeps 256 KiB in flight in 16 KiB writes, "paced": one 16 KiB write in flight at a time; after a cut a worker opens a new tunnel, and stops when the CONNECT is refused (at most 60 tunnels a worker, 20 s a repetition). "client" = bytes written that came back + bytes received; "origin+client" = bytes that reached the origin + bytes received (every relayed byte, both directions). Overshoot = relayed − maxBytes; bound = one chunk per instance (${sb ? kib(sb.bound) : '–'}); a negative overshoot is a shortfall, documented as under two chunks per instance (${sb ? kib(2 * sb.bound) : '–'}).`);
    L.push('');
    L.push('| variant | rep | relayed, client | relayed, origin+client | store `usage` bytes | overshoot, client | overshoot, origin+client | bound | held | tunnels (cut) | refusals | ms |');
    L.push('|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|---:|');
    for (const r of b.bytes) L.push(`| ${r.variant} | ${r.rep} | ${r.clientRelayed} | ${r.exactRelayed} | ${r.storeBytes} | ${r.overshoot} (${kib(r.overshoot)}) | ${r.exactOvershoot} (${kib(r.exactOvershoot)}) | ${r.bound} | ${r.boundHeld ? 'yes' : '**NO**'} | ${r.tunnelsOpened} (${r.tunnelsCut}) | ${Object.entries(r.refusals).map(([k, v]) => `${k} ${v}`).join(', ')} | ${fmt(r.driveMs, 0)} |`);
    L.push('');
    for (const [name, v] of Object.entries(b.summary.bytesByVariant)) if (v) L.push(`- ${name}: overshoot, client max ${v.overshootMax} (${kib(v.overshootMax)}), median ${v.overshootMedian} (${kib(v.overshootMedian)}); origin+client max ${v.exactOvershootMax} (${kib(v.exactOvershootMax)}), median ${v.exactOvershootMedian} (${kib(v.exactOvershootMedian)}); shortfall (maxBytes − origin+client) max ${kib(v.shortfallMax)}, median ${kib(v.shortfallMedian)} against under ${kib(v.shortBound)} documented: ${v.shortfallWithinBoundEveryTime ? 'within' : '**NOT within**'}.`);
    L.push('');
    if (sb) L.push(`All ${sb.reps} repetitions: client max ${sb.overshootMax} (${kib(sb.overshootMax)}), median ${sb.overshootMedian} (${kib(sb.overshootMedian)}); origin+client max ${sb.exactOvershootMax} (${kib(sb.exactOvershootMax)}), median ${sb.exactOvershootMedian} (${kib(sb.exactOvershootMedian)}); bound ${sb.bound} (${kib(sb.bound)}): **${sb.boundHeldEveryTime ? 'held every time' : 'NOT held every time'}**; shortfall under two chunks per instance every time: ${sb.shortfallWithinBoundEveryTime ? 'yes' : '**no**'}.`);
    L.push('');
    const sc = b.summary.concurrency;
    L.push(`**maxConcurrent.** A grant with \`maxConcurrent: 10\`; 40 CONNECTs at once, round-robin over the instances, each proven by an echoed byte and held until all 40 are answered, then closed.`);
    L.push('');
    L.push('| rep | succeeded | per instance | refusals | leases held → after close |');
    L.push('|---:|---:|---|---|---|');
    for (const r of b.concurrency) L.push(`| ${r.rep} | ${r.succeeded}${r.exact ? '' : ' **(not 10)**'} | ${r.perInstance.join(' / ')} | ${Object.entries(r.refusals).map(([k, v]) => `${k} ${v}`).join(', ')} | ${r.leasesWhileHeld} → ${r.leasesAfterClose} |`);
    L.push('');
    if (sc) L.push(`Exactly 10 every time: ${sc.exactEveryTime ? 'yes' : '**no**'} (${sc.succeeded.join(', ')}).`);
    L.push('');
    const sq = b.summary.quota;
    L.push(`**maxConnections.** A grant with \`maxConnections: 30\`; 60 CONNECTs, 3 in flight, round-robin over the instances, each proven by an echoed byte and closed.`);
    L.push('');
    L.push('| rep | succeeded | per instance | store `usage` connections | refusals |');
    L.push('|---:|---:|---|---:|---|');
    for (const r of b.quota) L.push(`| ${r.rep} | ${r.succeeded}${r.exact ? '' : ' **(not 30)**'} | ${r.perInstance.join(' / ')} | ${r.storeConnections} | ${Object.entries(r.refusals).map(([k, v]) => `${k} ${v}`).join(', ')} |`);
    L.push('');
    if (sq) L.push(`Exactly 30 every time: ${sq.exactEveryTime ? 'yes' : '**no**'} (${sq.succeeded.join(', ')}).`);
    L.push('');
    const le = b.lease;
    if (le) {
      L.push(`**Lease return.** A grant with \`maxConcurrent: 5\`; ${le.heldOnVictim} tunnels on ${le.victim}; a 6th on another instance was ${le.refusedBeforeKill === 'NOT refused' ? '**not refused**' : `refused (${le.refusedBeforeKill})`}; then SIGKILL to ${le.victim}'s process group, and CONNECTs on the other instances (every ~10 ms) until one succeeds. Leases are renewed every ${le.renewEveryMs} ms, so a slot comes back between ${le.leaseTtlMs - le.renewEveryMs} and ${le.leaseTtlMs} ms after the kill.`);
      L.push('');
      L.push(`**${le.measuredMs === null ? 'no CONNECT succeeded' : `${fmt(le.measuredMs, 0)} ms`}** from the SIGKILL to the first CONNECT that succeeded${le.on ? ` (on ${le.on})` : ''}, after ${le.attempts} attempts (${Object.entries(le.refusalsMeanwhile).map(([k, v]) => `${k} ${v}`).join(', ') || 'none refused'}); the store's latest lease expiry at the kill was ${fmt(le.predictedMs, 0)} ms away (earliest ${fmt(le.firstExpiryMs, 0)} ms), leaseTtlMs ${le.leaseTtlMs}. ${le.victim} was not restarted (nothing after this uses the fleet).`);
      L.push('');
    }
  }
  if (result.notes.length) {
    L.push('## Notes');
    L.push('');
    for (const n of result.notes) L.push(`- ${n}`);
    L.push('');
  }
  return L.join('\n');
}

// ---------- main ----------
async function main() {
  const started = Date.now();
  const deadline = started + RUN_BUDGET_MS;
  const notes = [];
  const loadBefore = os.loadavg().map((x) => x.toFixed(2));
  const nproc = os.availableParallelism?.() ?? os.cpus().length;
  let pinning;
  if (opt.pin && which('taskset') && nproc >= 2 && sh('taskset', ['-c', '0,1', 'true']).status === 0) {
    PIN = true;
    pinning = 'Pinned: Sluice on CPU 0, load generator, origin and redis-server on CPU 1';
  } else {
    pinning = `Not pinned (${!opt.pin ? '--no-pin' : !which('taskset') ? 'taskset not found' : nproc < 2 ? 'fewer than 2 CPUs' : 'taskset failed'})`;
  }
  buildLoadgen();
  if (opt.sluiceBin) {
    sluiceEntry = opt.sluiceBin;
    notes.push(`Sluice ran from ${opt.sluiceBin}, not from dist/: the commit and tree state above describe the repository, not that build.`);
  } else {
    ensureSluiceBuilt(notes);
    sluiceEntry = snapshotSluice();
  }
  const commit = sh('git', ['rev-parse', '--short=10', 'HEAD'], { cwd: ROOT }).stdout.trim() || 'unknown';
  const dirty = sh('git', ['status', '--porcelain', '--', 'src', 'bin', 'package.json'], { cwd: ROOT }).stdout.trim() !== '';
  const redisVersion = (sh(REDIS_SERVER ?? 'redis-server', ['--version']).stdout.match(/v=(\S+)/)?.[1] ?? '?').replace(/^/, 'redis-server ');

  // the origin: bench/loadgen.c in server mode (its echo port), for the whole run
  const originChild = launch(LOADGEN, ['server', '--max-seconds', String(Math.ceil(RUN_BUDGET_MS / 1000) + 60)], { cpu: 1, name: 'origin' });
  collect(originChild.stderr);
  const origin = JSON.parse(
    await new Promise((resolve, reject) => {
      readline.createInterface({ input: originChild.stdout }).once('line', resolve);
      originChild.exited.then(() => reject(new Error('the origin server exited')));
      setTimeout(() => reject(new Error('the origin server did not start')), 10_000);
    }),
  );
  const redis = await startRedis();
  log(`origin echo ${origin.echo}; redis-server on ${redis.port}; ${pinning.toLowerCase()}`);

  // part 1: the fleet. Unpinned: N instances, Redis, the origin and this client share the CPUs.
  const fleet = [];
  const fleetResult = { phases: [], audit: {}, warn: [] };
  let budgets = null;
  try {
    for (let i = 0; i < opt.instances; i++) {
      fleet.push(
        await startSluice({
          name: `sluice-${i}`,
          ledger: ['ledger:', '  store: redis', '  redis:', `    url: ${redis.url}`, `    keyPrefix: "${FLEET_PREFIX}"`, `    leaseTtlMs: ${LEASE_TTL_MS}`, '  maxStaleMs: 1000'],
        }),
      );
    }
    log(`fleet: ${fleet.map((f) => `${f.name} on ${f.port}`).join(', ')}`);
    for (const mode of ['notify', 'poll']) {
      if (Date.now() > deadline - 90_000) {
        notes.push(`Time budget: the ${mode} phase was not run.`);
        continue;
      }
      const ph = await revocationPhase({ mode, fleet, redis, origin, grantsPerPhase: opt.grants, tunnels: opt.tunnels, deadline: deadline - 120_000 });
      fleetResult.phases.push(ph);
      log(`${mode}: lag ms all p50 ${fmt(ph.lag.all.p50)} p99 ${fmt(ph.lag.all.p99)} max ${fmt(ph.lag.all.max)}; remote p50 ${fmt(ph.lag.remote.p50)} p99 ${fmt(ph.lag.remote.p99)} max ${fmt(ph.lag.remote.max)}; ${ph.anomalies.length} anomalies`);
      await sleep(300);
    }
    // budgets across the fleet, on the same instances; the last step SIGKILLs one of them
    if (Date.now() > deadline - 100_000) notes.push('Time budget: the budget part was not run.');
    else {
      try {
        budgets = await budgetPart({ fleet, redis, origin, deadline: deadline - 60_000 });
        for (const s of budgets.skipped) notes.push(`Time budget: ${s} was not run.`);
      } catch (e) {
        notes.push(`The budget part failed: ${e.message}`);
        log(`budget part failed: ${e.stack ?? e.message}`);
      }
    }
  } finally {
    for (const inst of fleet) {
      const alive = inst.child.exitCode === null && inst.child.signalCode === null;
      if (!alive && !inst.killedByBench) notes.push(`${inst.name} exited by itself during the run: ${inst.logs().split('\n').slice(-3).join(' | ')}`);
      await stop(inst.child, 5000);
      fleetResult.audit[inst.name] = readAudit(inst.audit);
      fleetResult.warn.push(...inst.warn.map((w) => `${inst.name}: ${w}`));
    }
  }

  // part 2: tunnel rate, file against redis, interleaved (the order alternates every round)
  const rate = { rounds: [], failures: [], median: {}, ratio: null };
  for (let round = 1; round <= opt.rounds; round++) {
    for (const store of round % 2 ? ['file', 'redis'] : ['redis', 'file']) {
      if (Date.now() > deadline - (opt.rateS + opt.warmS + 10) * 1000) {
        rate.failures.push(`round ${round} ${store}: skipped, the run's time budget is spent`);
        continue;
      }
      try {
        const r = await rateRound(store, round, { redis, origin });
        rate.rounds.push(r);
        log(`rate round ${round} ${store}: ${Math.round(r.rate)} tunnels/s, Sluice CPU ${Math.round(r.proxyCpuPct)}%${r.othersOnProxyCpuPct !== null ? `, other work on its CPU ${Math.round(r.othersOnProxyCpuPct)}%` : ''}${r.errorCount ? `, ${r.errorCount} client errors` : ''}`);
      } catch (e) {
        rate.failures.push(`round ${round} ${store}: ${e.message}`);
        log(`rate round ${round} ${store} failed: ${e.message}`);
      }
    }
  }
  for (const store of ['file', 'redis']) rate.median[store] = median(rate.rounds.filter((r) => r.store === store).map((r) => r.rate));
  if (rate.median.file && rate.median.redis) rate.ratio = rate.median.redis / rate.median.file;
  rate.pairedRatios = [];
  for (let round = 1; round <= opt.rounds; round++) {
    const f = rate.rounds.find((r) => r.store === 'file' && r.round === round);
    const x = rate.rounds.find((r) => r.store === 'redis' && r.round === round);
    if (f?.rate && x?.rate) rate.pairedRatios.push({ round, ratio: x.rate / f.rate });
  }
  rate.audit = rateAudit;

  redis.client.close();
  await stop(redis.child, 2000);
  await stop(originChild, 1000);

  const finishedAt = new Date().toISOString();
  const result = {
    // not schema 1: bench/doc.mjs reads only run.mjs results (schema 1) for docs/benchmarks.md
    schema: 'fleet-1',
    mode: 'fleet',
    startedAt: new Date(started).toISOString(),
    finishedAt,
    durationS: Math.round((Date.now() - started) / 1000),
    commit,
    dirty,
    node: process.version,
    redisVersion,
    machine: { nproc, model: os.cpus()[0]?.model ?? 'unknown', kernel: os.release(), arch: process.arch },
    loadavg: { before: loadBefore, after: os.loadavg().map((x) => x.toFixed(2)) },
    pinning,
    fleetPinning: 'not pinned (instances, redis-server, origin and client share the CPUs)',
    settings: { instances: opt.instances, tunnels: opt.tunnels, grants: opt.grants, rounds: opt.rounds, rateS: opt.rateS, warmS: opt.warmS, maxStaleMs: 1000, pollMs: 25, concurrency: 32, leaseTtlMs: LEASE_TTL_MS },
    fleet: fleetResult,
    rate,
    budgets,
    notes,
  };
  const md = renderMarkdown(result);
  console.log(`\n${md}`);
  if (opt.save) {
    const dir = path.join(BENCH, 'results');
    fs.mkdirSync(dir, { recursive: true });
    const base = `${finishedAt.slice(0, 10)}-${commit}-fleet`;
    fs.writeFileSync(path.join(dir, `${base}.json`), JSON.stringify(result, null, 1) + '\n');
    fs.writeFileSync(path.join(dir, `${base}.md`), `# Fleet benchmark ${base}\n\nGenerated by \`npm run bench:fleet\`.\n\n${md}\n`);
    log(`wrote bench/results/${base}.json and .md (${result.durationS} s)`);
  }
}

main().then(
  () => {
    killAll();
    process.exit(0);
  },
  (e) => {
    console.error(`bench:fleet: ${e.stack ?? e}`);
    killAll();
    process.exit(1);
  },
);
