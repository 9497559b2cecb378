#!/usr/bin/env node
// The Sluice benchmark: `npm run bench` (full, about 17 min) or `npm run bench -- --quick` (about 3 min).
// Runs the scenarios of issues 6 and 16 against direct, the two Node floors (node:http and node:net),
// Sluice (a dns.hosts name, and an IP literal as users run it), Squid and tinyproxy, interleaved
// and repeated, with a C load generator and origin (bench/loadgen.c); then tunnel setup over Sluice's
// TLS listeners beside its plain one (issue 28, bench/tls-setup.mjs). Writes bench/results/ and
// regenerates docs/benchmarks.md. See bench/README.md. Only loopback traffic; every child is killed on
// exit, failure and SIGINT.
import { spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { renderMarkdown, summarize } from './report.mjs';
import { writeDoc } from './doc.mjs';
import { summarizeProfile, renderProfile } from './profile.mjs';
import { measureSandboxStart, sandboxStartUnavailable } from './sandbox-start.mjs';
import { measureTlsSetup, tlsSetupUnavailable } from './tls-setup.mjs';

const BENCH = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(BENCH, '..');
const BUILD = path.join(BENCH, '.build');
const LOADGEN = path.join(BUILD, 'loadgen');
const ALL_TARGETS = ['direct', 'floor', 'netfloor', 'sluice', 'sluice-real', 'squid', 'tinyproxy'];
/** The two Sluice targets: `sluice` (a dns.hosts name, exact rules) and `sluice-real` (an IP literal, as users run it). */
const SLUICE_TARGETS = ['sluice', 'sluice-real'];
const isSluice = (t) => SLUICE_TARGETS.includes(t);
/** Preloaded into every Node target (floor, netfloor, sluice, sluice-real): GC time and allocation in the rate scenario. */
const GC_PROBE = path.join(BENCH, 'gc-probe.mjs');
const ALL_SCENARIOS = ['latency', 'rate', 'bulk', 'bulkup', 'http', 'idle', 'tls', 'ask'];
/**
 * Not run per target: `tls` starts one Sluice of its own after the rounds (bench/tls-setup.mjs); `ask`
 * runs bench/ask-release.mjs (held-hop release latency, and a grant's `ask` field on a granted hop).
 */
const SLUICE_PARTS = ['tls', 'ask'];
const MiB = 1024 * 1024;

const MODES = {
  // quick: the idle scenario in the first round only (7 targets; RSS per idle tunnel varies little between rounds)
  quick: { rounds: 2, latencyS: 1, rateS: 1.5, httpS: 1.5, warmS: 2, bulkBytes: 256 * MiB, idle: 2000, idleRounds: 1, settleMs: 500, budgetS: 300, tlsSeqS: 1, tlsConcS: 1, tlsWarmS: 1, tlsConcurrency: 4, askArgs: ['--rounds', '1', '--n', '300', '--asks', '100', '--fan-rounds', '10', '--no-readers'] },
  full: { rounds: 5, latencyS: 3, rateS: 3, httpS: 3, warmS: 3, bulkBytes: 256 * MiB, idle: 10000, idleRounds: 20, settleMs: 1000, budgetS: 1080, tlsSeqS: 2, tlsConcS: 2, tlsWarmS: 2, tlsConcurrency: 4, askArgs: ['--rounds', '3', '--reader-rounds', '3'] },
};

// ---------- arguments ----------
function usage() {
  return `usage: npm run bench [-- options]
  --quick                 2.5-3.5 minutes: 2 rounds, short scenarios, 2,000 idle tunnels in round 1 only
  --rounds N              rounds (default 5 full, 2 quick)
  --targets a,b           of ${ALL_TARGETS.join(',')} (default: all that are installed)
  --scenarios a,b         of ${ALL_SCENARIOS.join(',')} (default: all; tls: tunnel setup over TLS listeners,
                          one Sluice of its own after the rounds; --scenarios tls runs only that; ask:
                          bench/ask-release.mjs, held-hop release latency, after the rounds)
  --idle N                idle tunnels to open (default 10000 full, 2000 quick; capped by the fd limit)
  --no-build              do not rebuild dist/ even when src/ is newer
  --no-pin                do not pin with taskset
  --nice N                run proxies, load generator and origin with nice -n N (negative needs root; default 0)
  --install-peers         apt-get install squid tinyproxy first (uses sudo when not root)
  --profile               profile Sluice (node --cpu-prof) during the tunnel-setup scenario instead of benchmarking
  --sluice-bin FILE       run this Sluice entry instead of bin/sluice.js (A/B a patched build; implies --no-build)
  --no-doc                do not regenerate docs/benchmarks.md
  --gc-probe              preload bench/gc-probe.mjs into the Node targets (allocation and GC pause per
                          tunnel); off by default: the probe adds heap and GC work, more to the light
                          floors than to Sluice, so timed ratios are measured without it (issue 26)
  --no-save               print the table only
  -h, --help`;
}
const argv = process.argv.slice(2);
const opt = { quick: false, build: true, pin: true, installPeers: false, profile: false, doc: true, save: true };
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  const next = () => {
    if (i + 1 >= argv.length) fail(`${a} needs a value`);
    return argv[++i];
  };
  if (a === '--quick') opt.quick = true;
  else if (a === '--rounds') opt.rounds = Number(next());
  else if (a === '--targets') opt.targets = next().split(',');
  else if (a === '--scenarios') opt.scenarios = next().split(',');
  else if (a === '--idle') opt.idle = Number(next());
  else if (a === '--grants') opt.grants = Number(next());
  else if (a === '--no-build') opt.build = false;
  else if (a === '--no-pin') opt.pin = false;
  else if (a === '--nice') {
    opt.nice = Number(next());
    if (!Number.isInteger(opt.nice) || opt.nice < -20 || opt.nice > 19) fail('--nice must be -20..19');
  }
  else if (a === '--install-peers') opt.installPeers = true;
  else if (a === '--profile') opt.profile = true;
  else if (a === '--gc-probe') opt.gcProbe = true;
  else if (a === '--no-doc') opt.doc = false;
  else if (a === '--sluice-bin') {
    opt.sluiceBin = path.resolve(next());
    opt.build = false;
  }
  else if (a === '--no-save') opt.save = false;
  else if (a === '-h' || a === '--help') {
    console.log(usage());
    process.exit(0);
  } else fail(`unknown option ${a}\n${usage()}`);
}
const mode = opt.quick ? 'quick' : 'full';
const S = { ...MODES[mode] };
if (opt.rounds !== undefined) {
  if (!Number.isInteger(opt.rounds) || opt.rounds < 1 || opt.rounds > 20) fail('--rounds must be 1..20');
  S.rounds = opt.rounds;
}
if (opt.grants !== undefined && (!Number.isInteger(opt.grants) || opt.grants < 1 || opt.grants > 100000)) fail('--grants must be 1..100000');
if (opt.idle !== undefined) {
  if (!Number.isInteger(opt.idle) || opt.idle < 1 || opt.idle > 50000) fail('--idle must be 1..50000');
  S.idle = opt.idle;
}
for (const t of opt.targets ?? []) if (!ALL_TARGETS.includes(t)) fail(`unknown target ${t}`);
for (const s of opt.scenarios ?? []) if (!ALL_SCENARIOS.includes(s)) fail(`unknown scenario ${s}`);
const scenarios = opt.profile ? ['latency', 'rate', 'http'] : (opt.scenarios ?? ALL_SCENARIOS);
/** The scenarios each target runs in the rounds; none when only a Sluice part (tls) was asked for. */
const perTarget = scenarios.filter((s) => !SLUICE_PARTS.includes(s));

function fail(msg) {
  console.error(`bench: ${msg}`);
  process.exit(2);
}
const log = (msg) => console.error(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---------- children: tracked, killed on every way out ----------
const children = new Set();
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
    console.error(`\nbench: ${sig}, stopping every child`);
    killAll();
    process.exit(130);
  });
}
process.on('uncaughtException', (e) => {
  console.error(`bench: ${e.stack ?? e}`);
  killAll();
  process.exit(1);
});
process.on('unhandledRejection', (e) => {
  console.error(`bench: ${e?.stack ?? e}`);
  killAll();
  process.exit(1);
});

let PIN = false;
/**
 * Starts a child in its own process group, with the open-file limit raised to the hard limit, pinned to
 * `cpu` when pinning is on. `exec` keeps the pid: it is the program's own pid (and process group).
 */
function launch(cmd, args, { cpu, cwd, env, name } = {}) {
  let inner = PIN && cpu !== undefined ? ['taskset', '-c', String(cpu), cmd, ...args] : [cmd, ...args];
  if (opt.nice) inner = ['nice', '-n', String(opt.nice), ...inner];
  const child = spawn('sh', ['-c', 'ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null; exec "$@"', 'sh', ...inner], {
    cwd: cwd ?? ROOT,
    env: env ?? process.env,
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
  const t = sleep(graceMs).then(() => 'timeout');
  if ((await Promise.race([child.exited, t])) === 'timeout') {
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

/** Runs the load generator pinned to the client CPU; resolves with its JSON result. */
async function loadgen(args, timeoutMs) {
  const child = launch(LOADGEN, args, { cpu: 1, name: 'loadgen' });
  child.stdin.end();
  const out = collect(child.stdout);
  const err = collect(child.stderr);
  const timer = sleep(timeoutMs).then(() => 'timeout');
  const r = await Promise.race([child.exited, timer]);
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

// ---------- /proc ----------
const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;
function groupPids(pgid) {
  const pids = [];
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const st = fs.readFileSync(`/proc/${e}/stat`, 'utf8');
      const rest = st.slice(st.lastIndexOf(')') + 2).split(' ');
      if (Number(rest[2]) === pgid) pids.push(Number(e));
    } catch {}
  }
  return pids;
}
/** CPU seconds (user + system) of every process of a process group. */
function groupCpu(pgid) {
  let ticks = 0;
  for (const pid of groupPids(pgid)) {
    try {
      const st = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      const rest = st.slice(st.lastIndexOf(')') + 2).split(' ');
      ticks += Number(rest[11]) + Number(rest[12]);
    } catch {}
  }
  return ticks / CLK_TCK;
}
/** Resident set size in KiB of every process of a process group. */
function groupRssKiB(pgid) {
  let kib = 0;
  for (const pid of groupPids(pgid)) {
    try {
      const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
      if (m) kib += Number(m[1]);
    } catch {}
  }
  return kib;
}

/** Per-CPU busy and steal seconds from /proc/stat (busy: user, nice, system, irq, softirq). */
function cpuStat() {
  const out = {};
  for (const line of safeRead('/proc/stat').split('\n')) {
    const m = /^cpu(\d+) (.*)$/.exec(line);
    if (!m) continue;
    const [user, nice, system, , , irq, softirq, steal] = m[2].trim().split(/\s+/).map(Number);
    out[m[1]] = { busy: (user + nice + system + irq + softirq) / CLK_TCK, steal: (steal || 0) / CLK_TCK };
  }
  return out;
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

async function waitPort(port, child, timeoutMs) {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (child.exitCode !== null || child.signalCode !== null) return false;
    const ok = await new Promise((resolve) => {
      const s = net.connect({ host: '127.0.0.1', port });
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (ok) return true;
    await sleep(50);
  }
  return false;
}

const sh = (cmd, args, o = {}) => spawnSync(cmd, args, { encoding: 'utf8', timeout: 30_000, ...o });
const which = (name) => {
  for (const dir of ['/usr/sbin', '/usr/bin', '/sbin', '/bin', '/usr/local/bin', '/usr/local/sbin', ...(process.env.PATH ?? '').split(':')]) {
    const p = path.join(dir, name);
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return p;
    } catch {}
  }
  return null;
};

// ---------- preparation ----------
function buildLoadgen() {
  const src = path.join(BENCH, 'loadgen.c');
  const fresh = fs.existsSync(LOADGEN) && fs.statSync(LOADGEN).mtimeMs >= fs.statSync(src).mtimeMs;
  if (fresh) return;
  const cc = process.env.CC ?? (which('cc') ? 'cc' : which('gcc') ? 'gcc' : null);
  if (!cc) fail('no C compiler: install one (Debian: sudo apt-get install -y gcc), or set CC');
  fs.mkdirSync(BUILD, { recursive: true });
  const r = sh(cc, ['-O2', '-Wall', '-o', LOADGEN, src]);
  if (r.status !== 0) fail(`building the load generator failed:\n${r.stderr}`);
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

/** dist/ as shipped: built when missing, rebuilt when src/ is newer (unless --no-build). */
function ensureSluiceBuilt(notes) {
  const main = path.join(ROOT, 'dist', 'main.js');
  const exists = fs.existsSync(main);
  const stale = exists && newestMtime(path.join(ROOT, 'src')) > fs.statSync(main).mtimeMs;
  if (exists && (!stale || !opt.build)) {
    if (stale) notes.push('dist/ is older than src/ and --no-build was given: Sluice ran from the existing dist/.');
    return { ok: true, rebuilt: false, stale };
  }
  if (!exists && !opt.build) return { ok: false, reason: 'dist/ is missing and --no-build was given (run npm run build)' };
  if (!fs.existsSync(path.join(ROOT, 'node_modules'))) {
    log('node_modules/ is missing: running npm ci');
    const r = sh('npm', ['ci'], { cwd: ROOT, timeout: 600_000, stdio: 'inherit' });
    if (r.status !== 0) return { ok: false, reason: 'npm ci failed' };
  }
  log(exists ? 'src/ is newer than dist/: npm run build' : 'dist/ is missing: npm run build');
  const r = sh('npm', ['run', 'build'], { cwd: ROOT, timeout: 300_000 });
  if (r.status !== 0) {
    const msg = (r.stdout + r.stderr).trim().split('\n').slice(-5).join(' | ');
    if (fs.existsSync(main)) {
      notes.push(`npm run build failed (${msg}); Sluice ran from the dist/ that tsc emitted or left.`);
      log(`npm run build failed; continuing with dist/: ${msg}`);
      return { ok: true, rebuilt: false, buildError: msg };
    }
    return { ok: false, reason: `npm run build failed: ${msg}` };
  }
  return { ok: true, rebuilt: true };
}

/**
 * Copies dist/ and bin/ into bench/.build/sluice/ and runs Sluice from there for the whole run, so that
 * a rebuild of dist/ by someone else (npm test rebuilds it) cannot change Sluice between rounds.
 * Inside the repository, so node_modules still resolves.
 */
function snapshotSluice() {
  const snap = path.join(BUILD, 'sluice');
  fs.rmSync(snap, { recursive: true, force: true });
  fs.mkdirSync(snap, { recursive: true });
  fs.cpSync(path.join(ROOT, 'dist'), path.join(snap, 'dist'), { recursive: true });
  fs.cpSync(path.join(ROOT, 'bin'), path.join(snap, 'bin'), { recursive: true });
  fs.writeFileSync(path.join(snap, 'package.json'), '{ "type": "module", "private": true }\n');
  return path.join(snap, 'bin', 'sluice.js');
}

function installPeers() {
  const pkgs = ['squid', 'tinyproxy'].filter((p) => !which(p));
  if (pkgs.length === 0) return;
  const root = process.getuid?.() === 0;
  const cmd = root ? 'apt-get' : 'sudo';
  const args = root ? ['install', '-y', ...pkgs] : ['apt-get', 'install', '-y', ...pkgs];
  log(`installing ${pkgs.join(' ')}: ${cmd} ${args.join(' ')}`);
  const r = sh(cmd, args, { stdio: 'inherit', timeout: 600_000, env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
  if (r.status !== 0) log('apt-get install failed; the missing peers are skipped');
}

// ---------- targets ----------
let sluiceEntry = path.join(ROOT, 'bin', 'sluice.js');
const TOKEN = randomBytes(18).toString('hex');
const GRANT = 'bench';

/**
 * `--grants N`: N-1 other grants of 10 rules each around the bench grant (half before, half after), to
 * show that tunnel setup does not depend on how many grants there are.
 */
function fillerGrants(count, from = 0) {
  const lines = [];
  for (let i = from; i < from + count; i++) {
    const rules = Array.from({ length: 10 }, (_, r) => (r % 2 === 0 ? `"https://api${r}.tenant${i}.example"` : `"https://*.cdn${r}.tenant${i}.example"`));
    lines.push(`  - id: tenant${i}`, `    tokenSha256: ${createHash('sha256').update(`filler-${i}`).digest('hex')}`, `    destinations: [${rules.join(', ')}]`);
  }
  return lines;
}
const AUTH = Buffer.from(`${GRANT}:${TOKEN}`).toString('base64');
const ORIGIN_NAME = 'origin.bench';

const tmpDirs = new Set();
function tmpDir(prefix, mode, { keep = false } = {}) {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), `sluice-bench-${prefix}-`));
  if (mode) fs.chmodSync(d, mode);
  if (!keep) tmpDirs.add(d);
  return d;
}

/**
 * The GC probe of a Node target: `node --import bench/gc-probe.mjs` with the socket it answers on in
 * SLUICE_BENCH_GC_PROBE (the probe removes the variable from its own environment at once).
 */
function gcProbe(dir) {
  if (!opt.gcProbe) return { flags: [], env: { ...process.env }, sock: null };
  const sock = path.join(dir, 'gc-probe.sock');
  return { flags: ['--import', pathToFileURL(GC_PROBE).href], env: { ...process.env, SLUICE_BENCH_GC_PROBE: sock }, sock };
}

/** One command to a target's GC probe; resolves with its JSON answer, or null (no probe, error, 5 s). */
function probeCommand(inst, cmd) {
  if (!inst?.probe) return Promise.resolve(null);
  return new Promise((resolve) => {
    const s = net.connect(inst.probe);
    let buf = '';
    const done = (v) => {
      clearTimeout(timer);
      s.destroy();
      resolve(v);
    };
    const timer = setTimeout(() => done(null), 5000);
    s.setEncoding('utf8');
    s.on('connect', () => s.write(`${cmd}\n`));
    s.on('data', (d) => {
      buf += d;
      const i = buf.indexOf('\n');
      if (i < 0) return;
      try {
        done(JSON.parse(buf.slice(0, i)));
      } catch {
        done(null);
      }
    });
    s.on('error', () => done(null));
  });
}

/** A Node floor proxy (`floor-proxy.mjs` or `floor-net.mjs`): same launch, same pinning, same probe. */
function nodeFloor(file, name) {
  return {
    available: () => null,
    version: () => `node ${process.version}`,
    async start() {
      const port = await freePort();
      const dir = tmpDir(name);
      const probe = gcProbe(dir);
      const child = launch(process.execPath, [...probe.flags, path.join(BENCH, file), String(port)], { cpu: 0, name, env: probe.env });
      const err = collect(child.stderr);
      collect(child.stdout);
      return { child, port, host: '127.0.0.1', auth: null, dir, probe: probe.sock, logs: () => err() };
    },
  };
}

/**
 * Sluice from dist/ as shipped, one token listener, audit to a file. `real: false` (target `sluice`): the
 * origin by a dns.hosts name with exact rules. `real: true` (target `sluice-real`, as users run it):
 * an IP-literal target, `tcp://127.0.0.1:<port>` and `http://127.0.0.1:<port>` rules, no dns.hosts.
 */
function sluiceTarget({ real }) {
  return {
    available: () => null,
    version: () => {
      const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
      return opt.sluiceBin ? `${pkg.version} (${path.relative(ROOT, opt.sluiceBin)})` : `${pkg.version} (dist/, copied at the start of the run)`;
    },
    async start({ origin, nodeFlags = [] }) {
      const port = await freePort();
      const dir = tmpDir(real ? 'sluice-real' : 'sluice');
      const host = real ? '127.0.0.1' : ORIGIN_NAME;
      const cfg = [
        '# generated by bench/run.mjs',
        'listeners:',
        '  - name: bench',
        `    listen: 127.0.0.1:${port}`,
        '    identify: token',
        `state: ${dir}/state`,
        ...(real ? [] : ['dns:', '  hosts:', `    ${ORIGIN_NAME}: [127.0.0.1]`]),
        'audit:',
        `  file: ${dir}/audit.jsonl`,
        'grants:',
        ...fillerGrants(Math.floor(((opt.grants ?? 1) - 1) / 2)),
        `  - id: ${GRANT}`,
        `    tokenSha256: ${createHash('sha256').update(TOKEN).digest('hex')}`,
        `    destinations: ["tcp://${host}:${origin.echo}", "tcp://${host}:${origin.bulk}", "http://${host}:${origin.http}"]`,
        '    allowAddressClasses: [loopback]',
        ...fillerGrants(Math.ceil(((opt.grants ?? 1) - 1) / 2), Math.floor(((opt.grants ?? 1) - 1) / 2)),
        '',
      ].join('\n');
      fs.writeFileSync(path.join(dir, 'sluice.yaml'), cfg);
      const probe = gcProbe(dir);
      const child = launch(process.execPath, [...probe.flags, ...nodeFlags, opt.sluiceBin ?? sluiceEntry, 'start', '--config', path.join(dir, 'sluice.yaml')], {
        cpu: 0,
        cwd: dir,
        name: real ? 'sluice-real' : 'sluice',
        env: probe.env,
      });
      const err = collect(child.stderr, 4 << 20);
      collect(child.stdout);
      return { child, port, host, auth: AUTH, dir, probe: probe.sock, logs: () => err(), audit: path.join(dir, 'audit.jsonl') };
    },
  };
}

/** Each target: available() → null or a reason to skip; start() → { port, host, auth, child, dir, probe, logs }. */
const TARGETS = {
  direct: { available: () => null },
  floor: nodeFloor('floor-proxy.mjs', 'floor'),
  netfloor: nodeFloor('floor-net.mjs', 'netfloor'),
  sluice: sluiceTarget({ real: false }),
  'sluice-real': sluiceTarget({ real: true }),
  squid: {
    available: () => (which('squid') ? null : 'squid is not installed (Debian: sudo apt-get install -y squid, or npm run bench -- --install-peers)'),
    version: () => (sh(which('squid'), ['-v']).stdout.split('\n')[0] ?? '').replace(/^Squid Cache: Version /, ''),
    async start({ maxFds }) {
      const port = await freePort();
      const dir = tmpDir('squid', 0o777); // squid drops to the `proxy` user when started as root
      const cfg = [
        '# generated by bench/run.mjs: no auth, no cache, every port allowed, loopback only',
        `http_port 127.0.0.1:${port}`,
        'http_access allow all',
        'cache deny all',
        'cache_mem 0 MB',
        `pid_filename ${dir}/squid.pid`,
        `cache_log ${dir}/cache.log`,
        `access_log stdio:${dir}/access.log`,
        `coredump_dir ${dir}`,
        `max_filedescriptors ${maxFds}`,
        'pinger_enable off',
        'visible_hostname bench',
        'shutdown_lifetime 0 seconds',
        'dns_nameservers 127.0.0.1',
        '',
      ].join('\n');
      fs.writeFileSync(path.join(dir, 'squid.conf'), cfg);
      const child = launch(which('squid'), ['-N', '-f', path.join(dir, 'squid.conf')], { cpu: 0, name: 'squid' });
      const err = collect(child.stderr);
      collect(child.stdout);
      return { child, port, host: '127.0.0.1', auth: null, dir, logs: () => err() + safeRead(path.join(dir, 'cache.log')) };
    },
  },
  tinyproxy: {
    available: () => (which('tinyproxy') ? null : 'tinyproxy is not installed (Debian: sudo apt-get install -y tinyproxy, or npm run bench -- --install-peers)'),
    version: () => (sh(which('tinyproxy'), ['-v']).stdout.trim() || '').replace(/^tinyproxy /, ''),
    async start({ maxTunnels }) {
      const port = await freePort();
      const dir = tmpDir('tinyproxy', 0o777);
      const root = process.getuid?.() === 0;
      const cfg = [
        '# generated by bench/run.mjs: no auth, every CONNECT port allowed, loopback only',
        ...(root ? ['User nobody', 'Group nogroup'] : []),
        `Port ${port}`,
        'Listen 127.0.0.1',
        'Timeout 600',
        `MaxClients ${maxTunnels + 100}`,
        `LogFile "${dir}/tinyproxy.log"`,
        'LogLevel Connect',
        `PidFile "${dir}/tinyproxy.pid"`,
        '',
      ].join('\n');
      fs.writeFileSync(path.join(dir, 'tinyproxy.conf'), cfg);
      const child = launch(which('tinyproxy'), ['-d', '-c', path.join(dir, 'tinyproxy.conf')], { cpu: 0, name: 'tinyproxy' });
      const err = collect(child.stderr);
      collect(child.stdout);
      return { child, port, host: '127.0.0.1', auth: null, dir, logs: () => err() };
    },
  },
};

function safeRead(p) {
  try {
    return fs.readFileSync(p, 'utf8');
  } catch {
    return '';
  }
}

// ---------- scenarios ----------
function tunnelArgs(inst, origin, kind) {
  if (!inst) return ['--target', `127.0.0.1:${origin[kind]}`];
  return ['--target', `127.0.0.1:${inst.port}`, '--connect', `${inst.host}:${origin[kind]}`, ...(inst.auth ? ['--auth', inst.auth] : [])];
}
function httpArgs(inst, origin) {
  if (!inst) return ['--target', `127.0.0.1:${origin.http}`, '--host', `127.0.0.1:${origin.http}`];
  return ['--target', `127.0.0.1:${inst.port}`, '--host', `${inst.host}:${origin.http}`, '--absolute', ...(inst.auth ? ['--auth', inst.auth] : [])];
}

/**
 * Runs one client scenario and adds the CPU of proxy, client and origin (percent of one core). With
 * `gc`, the target's GC probe (Node targets) is started before and stopped after, and its answer is
 * kept as `r.gc`, with allocation and GC time per completed exchange.
 */
async function measured(inst, originChild, fn, { gc = false } = {}) {
  const probing = gc && inst?.probe ? (await probeCommand(inst, 'start'))?.ok === true : false;
  const p0 = inst ? groupCpu(inst.child.pid) : 0;
  const o0 = groupCpu(originChild.pid);
  const c0 = cpuStat();
  const t0 = performance.now();
  const r = await fn();
  const wall = (performance.now() - t0) / 1000;
  const c1 = cpuStat();
  const p1 = inst ? groupCpu(inst.child.pid) : 0;
  const o1 = groupCpu(originChild.pid);
  const clientS = (r.cpu_user_s ?? 0) + (r.cpu_sys_s ?? 0);
  r.cpu = {
    proxyS: inst ? p1 - p0 : null,
    // the proxy's process-group CPU time (user + system) over the exchanges the client completed
    proxyUsPerDone: inst && r.done > 0 ? (1e6 * (p1 - p0)) / r.done : null,
    proxyPct: inst ? (100 * (p1 - p0)) / wall : null,
    clientPct: (100 * clientS) / (r.wall_s ?? wall),
    originPct: (100 * (o1 - o0)) / wall,
  };
  if (PIN && c0['0'] && c1['0']) {
    // what else ran on the proxy's core: busy time of CPU 0 that was not the proxy, and hypervisor steal
    const busy = c1['0'].busy - c0['0'].busy;
    r.cpu.othersOnProxyCpuPct = Math.max(0, (100 * (busy - (p1 - p0))) / wall);
    r.cpu.stealProxyCpuPct = (100 * (c1['0'].steal - c0['0'].steal)) / wall;
  }
  if (probing) {
    const g = await probeCommand(inst, 'stop');
    if (g?.ok) {
      r.gc = {
        ...g,
        allocatedBytesPerDone: r.done > 0 ? g.allocatedBytes / r.done : null,
        gcPauseUsPerDone: r.done > 0 ? g.gcPauseUs / r.done : null,
      };
    } else r.gc = { ok: false, error: g?.error ?? 'the GC probe did not answer' };
  }
  return r;
}

/**
 * bench/ask-release.mjs as a child, on the dist/ this run built (--no-build copies it), bounded to 15
 * minutes: its markdown report is kept whole for the results file.
 */
function runAskRelease(args) {
  const r = spawnSync(process.execPath, [path.join(BENCH, 'ask-release.mjs'), '--no-build', '--no-save', ...args], { cwd: ROOT, encoding: 'utf8', timeout: 900_000, maxBuffer: 16 << 20 });
  return { ok: r.status === 0, status: r.status, error: r.error?.message ?? null, markdown: (r.stdout ?? '').trim() };
}

async function runScenario(name, inst, origin, originChild) {
  const t = (s) => Math.ceil(s * 1000) + 20_000;
  switch (name) {
    case 'latency':
      return measured(inst, originChild, () => loadgen(['latency', ...tunnelArgs(inst, origin, 'echo'), '--size', '32', '--duration', String(S.latencyS)], t(S.latencyS)));
    case 'rate':
      return measured(inst, originChild, () => loadgen(['rate', ...tunnelArgs(inst, origin, 'echo'), '--size', '32', '--concurrency', '32', '--duration', String(S.rateS)], t(S.rateS)), { gc: true });
    case 'bulk':
      return measured(inst, originChild, () => loadgen(['bulk', ...tunnelArgs(inst, origin, 'bulk'), '--bytes', String(S.bulkBytes)], 60_000));
    case 'bulkup':
      // client to origin: the direction a proxy reads from the socket it accepted (ADR 0022)
      return measured(inst, originChild, () => loadgen(['bulk', ...tunnelArgs(inst, origin, 'bulk'), '--bytes', String(S.bulkBytes), '--up'], 60_000));
    case 'http':
      return measured(inst, originChild, () => loadgen(['http', ...httpArgs(inst, origin), '--concurrency', '32', '--duration', String(S.httpS)], t(S.httpS)));
    default:
      throw new Error(`unknown scenario ${name}`);
  }
}

/** Opens N idle tunnels and reports the proxy's RSS growth per tunnel. */
async function idleScenario(inst, origin, originChild, count) {
  // warm the code paths that open and close tunnels, then take the baseline
  await loadgen(['idle', ...tunnelArgs(inst, origin, 'echo'), '--count', '300', '--hold-max', '0'], 30_000);
  await sleep(S.settleMs);
  const rss0 = groupRssKiB(inst.child.pid);
  const p0 = groupCpu(inst.child.pid);
  const t0 = performance.now();
  const child = launch(LOADGEN, ['idle', ...tunnelArgs(inst, origin, 'echo'), '--count', String(count), '--parallel', '64', '--hold-max', '120'], { cpu: 1, name: 'loadgen' });
  const lines = readline.createInterface({ input: child.stdout });
  const got = [];
  let onLine;
  lines.on('line', (l) => {
    got.push(l);
    onLine?.();
  });
  const err = collect(child.stderr);
  const waitFor = async (pred, ms) => {
    const end = Date.now() + ms;
    while (Date.now() < end) {
      const hit = got.find(pred);
      if (hit) return hit;
      if (child.exitCode !== null) break;
      await new Promise((r) => {
        onLine = r;
        setTimeout(r, 200);
      });
    }
    return got.find(pred);
  };
  try {
    const ready = await waitFor((l) => l.startsWith('READY '), 130_000);
    if (!ready) throw new Error(`idle: no READY line (${err().trim()})`);
    const r = JSON.parse(ready.slice(6));
    await sleep(S.settleMs);
    const rss1 = groupRssKiB(inst.child.pid);
    const wall = (performance.now() - t0) / 1000;
    const p1 = groupCpu(inst.child.pid);
    child.stdin.end('\n');
    const fin = await waitFor((l) => l.startsWith('{'), 30_000);
    const f = fin ? JSON.parse(fin) : {};
    return {
      count,
      established: r.established,
      failed: r.failed,
      openS: r.open_s,
      aliveAtEnd: f.alive_at_end ?? null,
      dropped: f.dropped ?? null,
      errors: f.errors,
      statuses: f.statuses,
      rssBeforeKiB: rss0,
      rssAfterKiB: rss1,
      perTunnelKiB: r.established > 0 ? (rss1 - rss0) / r.established : null,
      cpu: { proxyPct: (100 * (p1 - p0)) / wall, clientPct: (100 * ((f.cpu_user_s ?? 0) + (f.cpu_sys_s ?? 0))) / wall, originPct: null },
    };
  } finally {
    await stop(child, 2000);
  }
}

async function startTarget(name, ctx) {
  const inst = await TARGETS[name].start(ctx);
  if (!(await waitPort(inst.port, inst.child, 15_000))) {
    await stop(inst.child);
    throw new Error(`${name} did not listen on ${inst.port}: ${inst.logs().trim().split('\n').slice(-8).join(' | ')}`);
  }
  // one real tunnel before anything is measured
  let probe;
  for (let i = 0; i < 20; i++) {
    probe = await loadgen(['latency', ...tunnelArgs(inst, ctx.origin, 'echo'), '--max', '3', '--duration', '2'], 20_000);
    if (probe.done >= 1) return inst;
    await sleep(100);
  }
  await stop(inst.child);
  throw new Error(`${name}: the probe tunnel failed: ${JSON.stringify(probe.errors)} ${JSON.stringify(probe.statuses)}`);
}

/** Stops an instance; reports whether it was still alive (a crash otherwise) and what it logged. */
async function stopTarget(name, inst, report) {
  const alive = inst.child.exitCode === null && inst.child.signalCode === null;
  const ex = await stop(inst.child, isSluice(name) ? 8000 : 3000);
  if (!alive) report.failures.push({ scenario: null, message: `${name} exited by itself during the run (${ex.code ?? ex.signal}): ${inst.logs().trim().split('\n').slice(-5).join(' | ')}` });
  if (isSluice(name)) await readSluiceAudit(name, inst, report);
  if (inst.dir) {
    fs.rmSync(inst.dir, { recursive: true, force: true });
    tmpDirs.delete(inst.dir);
  }
}

/** What each Sluice target wrote, over all its rounds: audit records and operational log lines. */
const sluiceAudits = {};
const TIMING_SAMPLE_CAP = 20_000;
function pushTiming(sluiceAudit, scenario, field, value) {
  const byField = (sluiceAudit.timings[scenario] ??= {});
  const arr = (byField[field] ??= []);
  if (typeof value === 'number' && arr.length < TIMING_SAMPLE_CAP) arr.push(value);
}
async function readSluiceAudit(target, inst, report) {
  const sluiceAudit = (sluiceAudits[target] ??= { lines: 0, decisions: {}, closes: {}, warnLines: 0, warnSamples: [], timings: {} });
  const logs = inst.logs();
  for (const l of logs.split('\n')) {
    // The operational log names its level ("level":"warn"); older builds wrote pino's number (40 and up).
    const m = /"level":(?:(\d+)|"(\w+)")/.exec(l);
    if (m ? (m[1] !== undefined ? Number(m[1]) >= 40 : ['warn', 'error', 'fatal'].includes(m[2])) : /error|warn/i.test(l)) {
      sluiceAudit.warnLines++;
      if (sluiceAudit.warnSamples.length < 10) sluiceAudit.warnSamples.push(l.slice(0, 400));
    }
  }
  if (!fs.existsSync(inst.audit)) return;
  // attribute records to the scenario that was running when they were written
  const windows = inst.windows ?? [];
  const scenarioAt = (ts) => {
    const t = Date.parse(ts);
    return windows.find((w) => t >= w.fromMs && t <= w.toMs)?.scenario ?? null;
  };
  const rl = readline.createInterface({ input: fs.createReadStream(inst.audit) });
  for await (const line of rl) {
    if (!line) continue;
    sluiceAudit.lines++;
    let r;
    try {
      r = JSON.parse(line);
    } catch {
      sluiceAudit.decisions.unparsable = (sluiceAudit.decisions.unparsable ?? 0) + 1;
      continue;
    }
    if (r.kind === 'decision') {
      const k = `${r.request} ${r.reason}`;
      sluiceAudit.decisions[k] = (sluiceAudit.decisions[k] ?? 0) + 1;
      const sc = r.timings ? scenarioAt(r.ts) : null;
      if (sc) for (const [f, v] of Object.entries(r.timings)) pushTiming(sluiceAudit, sc, f, v);
    } else if (r.kind === 'close') {
      const k = `${r.request} ${r.closedBy}${r.status !== 200 ? ` status ${r.status}` : ''}`;
      sluiceAudit.closes[k] = (sluiceAudit.closes[k] ?? 0) + 1;
      const sc = scenarioAt(r.ts);
      if (sc && 'firstByteUs' in r) pushTiming(sluiceAudit, sc, 'firstByteUs', r.firstByteUs);
    }
  }
  void report;
}

// ---------- main ----------
async function main() {
  const started = Date.now();
  const notes = [];
  const loadBefore = os.loadavg().map((x) => x.toFixed(2));
  buildLoadgen();
  if (opt.installPeers) installPeers();

  // pinning: proxy on CPU 0, client and origin on CPU 1
  const nproc = os.availableParallelism?.() ?? os.cpus().length;
  let pinning = 'none';
  if (opt.pin && which('taskset') && nproc >= 2 && sh('taskset', ['-c', '0,1', 'true']).status === 0) {
    PIN = true;
    pinning = 'taskset: proxy on CPU 0, load generator and origin on CPU 1';
  } else {
    pinning = opt.pin ? `none (${!which('taskset') ? 'taskset not found' : nproc < 2 ? 'fewer than 2 CPUs' : 'taskset failed'})` : 'none (--no-pin)';
    notes.push(`Not pinned: ${pinning}. Proxy, client and origin share the CPUs.`);
  }

  // file descriptors: a tunnel holds two in the proxy
  const limit = Number(sh('sh', ['-c', 'ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null; ulimit -n']).stdout.trim()) || 1024;
  const fdCap = Math.floor((limit - 300) / 2);
  let idleCount = S.idle;
  let idleNote = `fd limit ${limit}`;
  if (idleCount > fdCap) {
    idleNote = `capped from ${idleCount.toLocaleString('en-US')}: the fd limit is ${limit} and a tunnel holds 2 fds in the proxy`;
    log(`idle tunnels: ${idleNote}`);
    notes.push(`Idle tunnels ${idleNote}; ${fdCap.toLocaleString('en-US')} were opened.`);
    idleCount = fdCap;
  }

  // targets
  // the TLS part alone needs only Sluice's build: no peer is started, so none is listed
  const wanted = opt.profile || (perTarget.length === 0 && !opt.targets) ? ['sluice-real'] : (opt.targets ?? ALL_TARGETS);
  const targets = [];
  let sluiceSnapshot = null;
  for (const t of wanted) {
    const firstSluice = isSluice(t) && !targets.some(isSluice);
    if (firstSluice && (opt.grants ?? 1) > 1) notes.push(`Sluice ran with ${opt.grants.toLocaleString('en-US')} grants of up to 10 rules each (--grants).`);
    let reason = TARGETS[t].available();
    if (!reason && isSluice(t) && opt.sluiceBin) {
      if (!fs.existsSync(opt.sluiceBin)) reason = `${opt.sluiceBin} does not exist`;
      else if (firstSluice) notes.push(`Sluice ran from ${path.relative(ROOT, opt.sluiceBin)}, not bin/sluice.js.`);
    } else if (!reason && isSluice(t) && sluiceSnapshot) {
      reason = sluiceSnapshot.reason ?? null;
    } else if (!reason && isSluice(t)) {
      // built and copied once, for both Sluice targets
      const b = ensureSluiceBuilt(notes);
      sluiceSnapshot = b.ok ? {} : { reason: b.reason };
      if (!b.ok) reason = b.reason;
      else sluiceEntry = snapshotSluice();
    }
    if (reason) {
      log(`skipping ${t}: ${reason}`);
      notes.push(`${t} skipped: ${reason}`);
    } else targets.push(t);
  }
  if (targets.length === 0) fail('no target to run');
  const versions = {};
  for (const t of targets) if (TARGETS[t].version) versions[t] = TARGETS[t].version();
  // the commit Sluice was built from: read now, next to the build and the copy of dist/
  const commit = sh('git', ['rev-parse', '--short=10', 'HEAD'], { cwd: ROOT }).stdout.trim() || 'unknown';
  const dirty = sh('git', ['status', '--porcelain', '--', 'src', 'bin', 'package.json'], { cwd: ROOT }).stdout.trim() !== '';

  // the origin: echo, bulk and HTTP ports, for the whole run
  const budgetS = S.budgetS;
  const originChild = launch(LOADGEN, ['server', '--max-seconds', String(budgetS + 600)], { cpu: 1, name: 'origin' });
  const originLine = await new Promise((resolve, reject) => {
    const rl = readline.createInterface({ input: originChild.stdout });
    rl.once('line', resolve);
    originChild.exited.then(() => reject(new Error('the origin server exited')));
    setTimeout(() => reject(new Error('the origin server did not start')), 10_000);
  });
  const origin = JSON.parse(originLine);
  collect(originChild.stderr);
  log(`origin: echo ${origin.echo}, bulk ${origin.bulk}, http ${origin.http}; targets ${targets.join(', ')}; ${mode} mode, ${S.rounds} round(s)`);
  const ctx = { origin, maxFds: limit, maxTunnels: idleCount };

  if (opt.profile) return profileSluice(ctx, originChild, commit, dirty);

  const runs = [];
  let cut = false;
  for (let round = 1; round <= S.rounds && !cut && perTarget.length > 0; round++) {
    // rotate the order every round, so that no target always runs first or last
    const order = targets.map((_, i) => targets[(i + round - 1) % targets.length]);
    for (const t of order) {
      if ((Date.now() - started) / 1000 > budgetS) {
        cut = true;
        notes.push(`Time budget of ${budgetS} s reached: stopped after round ${round - 1} (${round > 1 ? 'complete rounds only in the medians' : 'partial'}).`);
        break;
      }
      const report = { target: t, round, scenarios: {}, failures: [] };
      runs.push(report);
      const main = perTarget.filter((s) => s !== 'idle');
      if (main.length) {
        let inst = null;
        try {
          if (t !== 'direct') inst = await startTarget(t, ctx);
          // warm-up (JIT, pools, caches): not recorded
          await runWarm(inst, origin);
          for (const s of main) {
            try {
              const fromMs = Date.now();
              report.scenarios[s] = await runScenario(s, inst, origin, originChild);
              if (inst) (inst.windows ??= []).push({ scenario: s, fromMs, toMs: Date.now() });
            } catch (e) {
              report.failures.push({ scenario: s, message: e.message });
            }
          }
        } catch (e) {
          report.failures.push({ scenario: 'start', message: e.message });
        } finally {
          if (inst) await stopTarget(t, inst, report);
        }
      }
      if (scenarios.includes('idle') && t !== 'direct' && round <= S.idleRounds) {
        let inst = null;
        try {
          inst = await startTarget(t, ctx);
          report.scenarios.idle = await idleScenario(inst, origin, originChild, idleCount);
        } catch (e) {
          report.failures.push({ scenario: 'idle', message: e.message });
        } finally {
          if (inst) await stopTarget(t, inst, report);
        }
      }
      log(`round ${round} ${t}: ${brief(report)}`);
    }
  }
  // tunnel setup over TLS listeners (issue 28): one Sluice of its own, three listeners, after the rounds
  let tlsSetup = null;
  if (scenarios.includes('tls')) {
    const reason = !targets.some(isSluice) ? 'no Sluice target in this run' : tlsSetupUnavailable();
    if (reason) notes.push(`TLS tunnel setup not measured: ${reason}.`);
    else {
      log('tls: tunnel setup over plain, TLS token and TLS certificate listeners of one Sluice, interleaved');
      try {
        tlsSetup = await measureTlsSetup(
          { launch, stop, collect, groupCpu, cpuStat, pinned: PIN, freePort, tmpDir, log },
          { entry: opt.sluiceBin ?? sluiceEntry, origin, rounds: S.rounds, seqS: S.tlsSeqS, concS: S.tlsConcS, concurrency: S.tlsConcurrency, warmS: S.tlsWarmS },
        );
        if (tlsSetup.audit.leaks.length) notes.push(`TLS tunnel setup: ${tlsSetup.audit.leaks.join('; ')}.`);
      } catch (e) {
        notes.push(`TLS tunnel setup failed: ${e.message}`);
      }
    }
  }
  await stop(originChild, 1000);

  // Asks (issue 27): how soon a held hop goes on after the answer, and that `ask` costs a granted hop nothing.
  let askRelease = null;
  if (scenarios.includes('ask')) {
    if (!targets.some(isSluice)) notes.push('Ask release latency not measured: no Sluice target in this run.');
    else {
      log('ask: held-hop release latency (bench/ask-release.mjs)');
      askRelease = runAskRelease(S.askArgs);
      if (!askRelease.ok) notes.push(`Ask release latency: bench/ask-release.mjs exited ${askRelease.status}${askRelease.error ? ` (${askRelease.error})` : ''}.`);
    }
  }

  // `sluice run -- true`: the start-up of a short confined command (issue 12), against its floors.
  let sandboxStart = null;
  if (targets.some(isSluice) && perTarget.length > 0) {
    const reason = sandboxStartUnavailable();
    if (reason) notes.push(`sluice run start-up not measured: ${reason}.`);
    else {
      log('sluice run start-up: interleaved runs of sluice run -- true and its floors');
      try {
        sandboxStart = await measureSandboxStart({ runs: mode === 'quick' ? 10 : 30 });
      } catch (e) {
        notes.push(`sluice run start-up failed: ${e.message}`);
      }
    }
  }

  const finishedAt = new Date().toISOString();
  const result = {
    schema: 1,
    mode,
    rounds: S.rounds,
    startedAt: new Date(started).toISOString(),
    finishedAt,
    durationS: Math.round((Date.now() - started) / 1000),
    commit,
    dirty,
    node: process.version,
    machine: machineInfo(nproc),
    loadavg: { before: loadBefore, after: os.loadavg().map((x) => x.toFixed(2)) },
    pinning,
    nice: opt.nice ?? 0,
    versions,
    targets,
    scenarios,
    settings: {
      ...S,
      idleCount,
      idleNote,
      fdLimit: limit,
      sluiceRoute: 'direct',
      sluiceDns: `dns.hosts ${ORIGIN_NAME} → 127.0.0.1`,
      sluiceRealTarget: '127.0.0.1 literal, tcp://127.0.0.1:<port> and http://127.0.0.1:<port> rules, allowAddressClasses [loopback], no dns.hosts',
      peersDial: '127.0.0.1 literal',
      netfloorHttp: 'absolute-form rewritten to origin-form, one upstream connection per client connection, responses piped unparsed',
      gcProbe: opt.gcProbe ? 'rate scenario, Node targets: v8.GCProfiler via node --import bench/gc-probe.mjs' : 'off (--gc-probe): no target carries it, so the floors are measured as they run',
    },
    runs,
    notes,
    sandboxStart,
    tlsSetup,
    askRelease,
  };
  if (targets.some(isSluice)) {
    const { median } = await import('./report.mjs');
    result.sluiceAudits = {};
    for (const [t, sluiceAudit] of Object.entries(sluiceAudits)) {
      const timingsMedianUs = {};
      for (const [sc, byField] of Object.entries(sluiceAudit.timings)) {
        timingsMedianUs[sc] = {};
        for (const [f, arr] of Object.entries(byField)) timingsMedianUs[sc][f] = arr.length ? median(arr) : null;
      }
      result.sluiceAudits[t] = {
        lines: sluiceAudit.lines,
        decisions: sluiceAudit.decisions,
        closes: sluiceAudit.closes,
        warnLines: sluiceAudit.warnLines,
        warnSamples: sluiceAudit.warnSamples,
        timingsMedianUs,
      };
    }
    // the `sluice` target's, where results before issue 16 kept it
    if (result.sluiceAudits.sluice) result.sluiceAudit = result.sluiceAudits.sluice;
  }
  result.summary = summarize(result);
  const md = renderMarkdown(result);
  console.log(`\n${md}`);
  if (opt.save) {
    const dir = path.join(BENCH, 'results');
    fs.mkdirSync(dir, { recursive: true });
    // a run of the TLS part alone is not a source for docs/benchmarks.md (doc.mjs skips a result without rounds)
    const base = `${finishedAt.slice(0, 10)}-${commit}${perTarget.length === 0 ? '-tls' : ''}${mode === 'quick' ? '-quick' : ''}`;
    fs.writeFileSync(path.join(dir, `${base}.json`), JSON.stringify(result, null, 1) + '\n');
    fs.writeFileSync(path.join(dir, `${base}.md`), `# Benchmark ${base}\n\nGenerated by \`npm run bench${mode === 'quick' || perTarget.length === 0 ? ' --' : ''}${mode === 'quick' ? ' --quick' : ''}${perTarget.length === 0 ? ' --scenarios tls' : ''}\`.\n\n${md}`);
    log(`wrote bench/results/${base}.json and .md (${result.durationS} s)`);
    if (opt.doc && perTarget.length > 0) {
      const doc = writeDoc();
      log(`regenerated ${path.relative(ROOT, doc)}`);
    }
  }
}

async function runWarm(inst, origin) {
  const w = S.warmS;
  if (scenarios.some((s) => s === 'latency' || s === 'rate')) await loadgen(['rate', ...tunnelArgs(inst, origin, 'echo'), '--concurrency', '32', '--duration', String(w)], 30_000);
  if (scenarios.includes('http')) await loadgen(['http', ...httpArgs(inst, origin), '--concurrency', '32', '--duration', String(w)], 30_000);
}

function brief(report) {
  const s = report.scenarios;
  const parts = [];
  if (s.latency) parts.push(`p50 ${s.latency.latency_us.p50.toFixed(0)} µs p99 ${s.latency.latency_us.p99.toFixed(0)} µs`);
  if (s.rate) parts.push(`${Math.round(s.rate.rate)} tunnels/s${s.rate.cpu?.proxyUsPerDone ? ` (${Math.round(s.rate.cpu.proxyUsPerDone)} µs CPU${s.rate.gc?.ok ? `, ${(s.rate.gc.allocatedBytesPerDone / 1000).toFixed(1)} kB, ${s.rate.gc.gcPauseUsPerDone.toFixed(1)} µs GC` : ''} per tunnel)` : ''}`);
  if (s.bulk) parts.push(`${Math.round(s.bulk.mibps ?? 0)} MiB/s`);
  if (s.bulkup) parts.push(`up ${Math.round(s.bulkup.mibps ?? 0)} MiB/s`);
  if (s.http) parts.push(`${Math.round(s.http.rate)} req/s`);
  if (s.idle) parts.push(`${s.idle.perTunnelKiB?.toFixed(1)} KiB/tunnel (${s.idle.aliveAtEnd}/${s.idle.count} held)`);
  const errs = Object.values(s).reduce((n, x) => n + Object.values(x.errors ?? {}).reduce((a, b) => a + b, 0), 0);
  if (errs) parts.push(`${errs} client errors`);
  for (const f of report.failures) parts.push(`FAILED ${f.scenario ?? ''}: ${f.message.slice(0, 200)}`);
  return parts.join(', ');
}

function machineInfo(nproc) {
  const cpuinfo = safeRead('/proc/cpuinfo');
  const mem = /MemTotal:\s+(\d+)/.exec(safeRead('/proc/meminfo'));
  return {
    nproc,
    model: /model name\s*:\s*(.*)/.exec(cpuinfo)?.[1]?.trim() ?? os.cpus()[0]?.model ?? 'unknown',
    memTotalKiB: mem ? Number(mem[1]) : Math.round(os.totalmem() / 1024),
    kernel: os.release(),
    arch: process.arch,
  };
}

/** --profile: Sluice under node --cpu-prof; self time during the tunnel-setup and new-tunnels scenarios. */
async function profileSluice(ctx, originChild, commit, dirty) {
  const dir = tmpDir('prof', undefined, { keep: true });
  const inst = await startTarget('sluice-real', { ...ctx, nodeFlags: ['--cpu-prof', '--cpu-prof-dir', dir] });
  const report = { failures: [] };
  const nowUs = () => Number(process.hrtime.bigint() / 1000n);
  const windows = [];
  try {
    await runWarm(inst, ctx.origin);
    for (const sc of ['latency', 'rate', 'http']) {
      const fromUs = nowUs();
      const r = await runScenario(sc, inst, ctx.origin, originChild);
      windows.push({ sc, r, fromUs, toUs: nowUs() });
    }
  } finally {
    await stopTarget('sluice-real', inst, report);
    await stop(originChild, 1000);
  }
  const file = fs.readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
  if (!file) fail(`no .cpuprofile was written in ${dir} (Sluice exit: ${report.failures.map((f) => f.message).join('; ') || 'ok'})`);
  const prof = JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8'));
  const parts = [`# Sluice CPU profile (commit \`${commit}\`, Node ${process.version}, ${new Date().toISOString()})`, '',
    `Generated by \`npm run bench -- --profile\`: Sluice from ${opt.sluiceBin ? path.relative(ROOT, opt.sluiceBin) : 'dist/ (a copy made at the start)'}${dirty ? ', working tree modified' : ''}, under \`node --cpu-prof\`, ${pinning()}, after a warm-up. Only the samples taken while each scenario ran are counted (startup and warm-up are left out). V8 samples wall-clock time of the main thread: a function that wakes another thread on the same pinned core (a libuv threadpool write, for example) is charged with the time the core spends elsewhere until the main thread runs again.`, ''];
  for (const w of windows) {
    const s = summarizeProfile(prof, ROOT, { ...w, distDir: path.dirname(path.dirname(opt.sluiceBin ?? sluiceEntry)) + '/dist' });
    const what = {
      latency: `Tunnel setup, sequential, ${S.latencyS} s: ${w.r.done} tunnels, p50 ${w.r.latency_us.p50.toFixed(0)} µs, p99 ${w.r.latency_us.p99.toFixed(0)} µs, proxy CPU ${w.r.cpu.proxyPct.toFixed(0)}%`,
      rate: `New tunnels, 32 concurrent, ${S.rateS} s: ${Math.round(w.r.rate)} tunnels/s, proxy CPU ${w.r.cpu.proxyPct.toFixed(0)}%`,
      http: `Plain HTTP keep-alive, 32 concurrent, ${S.httpS} s: ${Math.round(w.r.rate)} req/s, proxy CPU ${w.r.cpu.proxyPct.toFixed(0)}%`,
    }[w.sc];
    const title = { latency: 'Tunnel setup (latency scenario)', rate: 'New tunnels/s (rate scenario)', http: 'Plain HTTP forwarding (http scenario)' }[w.sc];
    parts.push(renderProfile(s, { title, scenario: what }));
  }
  const md = parts.join('\n');
  console.log(md);
  if (opt.save) {
    const out = path.join(BENCH, 'results', `${new Date().toISOString().slice(0, 10)}-${commit}-profile.md`);
    fs.mkdirSync(path.dirname(out), { recursive: true });
    fs.writeFileSync(out, md);
    log(`wrote ${path.relative(ROOT, out)}; the raw profile is ${path.join(dir, file)}`);
  } else log(`the raw profile is ${path.join(dir, file)}`);
}

function pinning() {
  return PIN ? 'pinned to CPU 0 (client and origin on CPU 1)' : 'not pinned';
}

main().then(
  () => {
    killAll();
    process.exit(0);
  },
  (e) => {
    console.error(`bench: ${e.stack ?? e}`);
    killAll();
    process.exit(1);
  },
);
