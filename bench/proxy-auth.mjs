#!/usr/bin/env node
// What proxy authentication to the corporate upstream costs per connection (issue 18): tunnel setup and
// forwarded plain-HTTP latency, and Sluice's CPU per operation, with Sluice run as users run it (a real
// `node bin/sluice.js start` child, a Basic token on every request, audit on to a file) in front of one
// real Squid per mechanism on loopback: none, basic (basic_ncsa_auth), negotiate (negotiate_kerberos_auth
// against a throwaway MIT realm, test/support/kdc.ts) and ntlm (ntlm_fake_auth), plus Squid without
// Sluice as the baseline. The fixtures are the tests' own (test/support/*.ts), loaded through Vite's
// module runner (a devDependency already), so the bench adds no dependency and no second copy of them.
//
//   npm run bench:auth [-- --rounds 3 --n 300 --warmup 50 --no-build --no-save]
//
// Everything stays on 127.0.0.1. Every child runs in its own process group (or is owned by a fixture
// that kills it) and is killed on exit, failure, SIGINT and SIGTERM. Every socket operation has a
// timeout, every batch a count, and the whole run a deadline.
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { exitHarness, privateBuild, sh, shOr, startOriginsChild } from './lib/harness.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '..');

// ---------------------------------------------------------------------------------------------------
// Origin mode: the echo and HTTP origins run in a child of their own, so the client's event loop
// measures only the client side.
if (process.argv[2] === '--serve-origins') {
  const body = Buffer.from('ok\n');
  const echo = net.createServer((s) => {
    s.on('error', () => s.destroy());
    s.pipe(s);
  });
  const web = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'text/plain', 'content-length': body.length }).end(body));
  });
  web.keepAliveTimeout = 30_000;
  await new Promise((r) => echo.listen(0, '127.0.0.1', r));
  await new Promise((r) => web.listen(0, '127.0.0.1', r));
  process.stdout.write(`${JSON.stringify({ echo: echo.address().port, http: web.address().port })}\n`);
  // Dies with the parent: stdin closes when the bench exits, however it exits.
  process.stdin.on('close', () => process.exit(0)).resume();
  await new Promise(() => undefined);
}

// ---------------------------------------------------------------------------------------------------
// Options
const argv = process.argv.slice(2);
const flag = (name) => argv.includes(name);
const num = (name, dflt) => {
  const i = argv.indexOf(name);
  if (i < 0) return dflt;
  const v = Number(argv[i + 1]);
  if (!Number.isInteger(v) || v < 1) {
    console.error(`${name} needs a positive integer, got ${JSON.stringify(argv[i + 1])}`);
    process.exit(2);
  }
  return v;
};
const known = new Set(['--rounds', '--n', '--warmup', '--no-build', '--no-save', '--help']);
for (let i = 0; i < argv.length; i += 1) {
  if (!known.has(argv[i])) {
    console.error(`unknown option ${argv[i]}; options: --rounds N (default 3) --n N (ops per batch, 300) --warmup N (50) --no-build --no-save`);
    process.exit(2);
  }
  if (['--rounds', '--n', '--warmup'].includes(argv[i])) i += 1;
}
if (flag('--help')) {
  console.log('npm run bench:auth [-- --rounds N --n N --warmup N --no-build --no-save]  (see bench/README.md#proxy-authentication-cost)');
  process.exit(0);
}
const ROUNDS = num('--rounds', 3);
const N = num('--n', 300);
const WARMUP = num('--warmup', 50);
const OP_TIMEOUT_MS = 5_000;
const MAX_ERRORS_PER_BATCH = 10;
const RUN_DEADLINE_MS = 10 * 60_000;

// ---------------------------------------------------------------------------------------------------
// Every child we start is stopped on every way out; a private copy of Sluice (bench/lib/harness.mjs).
const { cleanups, cleanup } = exitHarness(RUN_DEADLINE_MS);
const BUILD = path.join(HERE, '.build', 'sluice-auth');
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
/** The pids of `root` and every descendant (Squid and its auth helpers). */
function tree(root) {
  const parent = new Map();
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      parent.set(Number(d), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // gone
    }
  }
  const out = [root];
  for (let i = 0; i < out.length; i += 1) for (const [pid, ppid] of parent) if (ppid === out[i]) out.push(pid);
  return out;
}
const treeCpuUs = (root) => tree(root).reduce((sum, pid) => sum + cpuUs(pid), 0);
/** The pid of the squid running with `dir`/squid.conf. */
function squidPid(dir) {
  const conf = path.join(dir, 'squid.conf');
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0').includes(conf)) return Number(d);
    } catch {
      // gone
    }
  }
  throw new Error(`no squid process for ${conf}`);
}

const percentile = (sorted, p) => (sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]);
const median = (v) => percentile([...v].sort((a, b) => a - b), 50);

/** One CONNECT tunnel: connect, CONNECT, read the head, send 32 B, resolve at the first echoed byte. */
function tunnelOnce(port, target, auth) {
  return new Promise((resolve) => {
    const t0 = process.hrtime.bigint();
    const socket = net.connect({ host: '127.0.0.1', port, noDelay: true });
    let head = '';
    let open = false;
    const done = (err, us) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(err === undefined ? { us } : { error: err });
    };
    const timer = setTimeout(() => done(`timeout after ${OP_TIMEOUT_MS} ms`), OP_TIMEOUT_MS);
    socket.once('error', (e) => done(e.code ?? e.message));
    socket.once('close', () => done('closed before the echo'));
    socket.once('connect', () => {
      socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n${auth}\r\n`);
    });
    socket.on('data', (chunk) => {
      if (open) {
        done(undefined, Number(process.hrtime.bigint() - t0) / 1000);
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
      else socket.write(Buffer.alloc(32, 0x61));
    });
  });
}

/** A keep-alive client connection that sends absolute-form GETs one at a time. */
function httpClient(port) {
  const socket = net.connect({ host: '127.0.0.1', port, noDelay: true });
  let buf = Buffer.alloc(0);
  let pending;
  let broken;
  const fail = (why) => {
    broken ??= why;
    pending?.(undefined);
  };
  socket.on('error', (e) => fail(e.code ?? e.message));
  socket.on('close', () => fail('connection closed'));
  socket.on('data', (chunk) => {
    buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
    const end = buf.indexOf('\r\n\r\n');
    if (end < 0 || pending === undefined) return;
    const head = buf.subarray(0, end).toString('latin1');
    const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? NaN);
    if (!Number.isInteger(length)) {
      fail(`no content-length: ${head.split('\r\n')[0]}`);
      return;
    }
    if (buf.length < end + 4 + length) return;
    buf = buf.subarray(end + 4 + length);
    const p = pending;
    pending = undefined;
    p(head);
  });
  const ready = new Promise((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  return {
    async get(target, auth) {
      await ready;
      if (broken !== undefined) return { error: broken };
      const t0 = process.hrtime.bigint();
      const head = await new Promise((resolve) => {
        const timer = setTimeout(() => {
          broken ??= `timeout after ${OP_TIMEOUT_MS} ms`;
          resolve(undefined);
        }, OP_TIMEOUT_MS);
        pending = (h) => {
          clearTimeout(timer);
          resolve(h);
        };
        socket.write(`GET http://${target}/ HTTP/1.1\r\nHost: ${target}\r\n${auth}\r\n`);
      });
      if (head === undefined) return { error: broken ?? 'no answer' };
      const status = head.slice(9, 12);
      if (status !== '200') return { error: `status ${status}: ${/proxy-status: [^\r]*/i.exec(head)?.[0] ?? head.split('\r\n')[0]}` };
      return { us: Number(process.hrtime.bigint() - t0) / 1000 };
    },
    close: () => socket.destroy(),
  };
}

// ---------------------------------------------------------------------------------------------------
async function main() {
  const started = Date.now();
  const loadBefore = os.loadavg();
  const how = build();
  const { runnerImport } = await import('vite');
  const load = async (file) => (await runnerImport(path.join(ROOT, 'test', 'support', file), { configFile: false, logLevel: 'error' })).module;
  const [{ startKdc, kdcAvailable }, { startSquid, squidAvailable, squidBinary }, { startSluiceProcess }] = await Promise.all(
    ['kdc.ts', 'squid.ts', 'sluice-process.ts'].map(load),
  );
  if (!squidAvailable()) throw new Error('squid is not installed: sudo apt-get install -y squid apache2-utils');
  if (!kdcAvailable()) throw new Error('the MIT KDC is not installed: sudo apt-get install -y krb5-kdc krb5-admin-server krb5-user');

  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-bench-auth-'));
  cleanups.push(() => fs.rmSync(work, { recursive: true, force: true }));

  // Origins in a child process of their own.
  const origins = await startOriginsChild(fileURLToPath(import.meta.url), cleanups);

  // A throwaway realm: the proxy's service key and the user whose ticket Sluice presents.
  const kdc = await startKdc();
  cleanups.push(() => kdc.close());
  const keytab = await kdc.addService('HTTP/localhost');
  const krbPassword = crypto.randomBytes(12).toString('base64url');
  await kdc.addUser('svc', krbPassword);
  const ccache = path.join(work, 'svc.ccache');
  await kdc.kinit('svc', krbPassword, ccache);

  const basicPassword = crypto.randomBytes(12).toString('base64url');
  const hosts = { 'origin.test': '127.0.0.1' };
  const squidOpts = {
    none: { hosts },
    basic: { hosts, users: { bench: basicPassword } },
    negotiate: { hosts, negotiate: { keytab, krb5Config: kdc.krb5Config } },
    ntlm: { hosts, ntlm: true },
  };
  const squids = {};
  for (const [mech, opts] of Object.entries(squidOpts)) {
    squids[mech] = await startSquid(opts);
    cleanups.push(() => squids[mech].close());
    squids[mech].pid = squidPid(squids[mech].dir);
  }

  // One Sluice per mechanism, as users run it.
  const token = crypto.randomBytes(18).toString('base64url');
  const tokenSha256 = crypto.createHash('sha256').update(token).digest('hex');
  const sluiceAuth = `Proxy-Authorization: Basic ${Buffer.from(`bench:${token}`).toString('base64')}\r\n`;
  fs.writeFileSync(path.join(work, 'basic.txt'), `bench:${basicPassword}\n`, { mode: 0o600 });
  fs.writeFileSync(path.join(work, 'ntlm.txt'), `BENCH\\bench:${basicPassword}\n`, { mode: 0o600 });
  const proxyFor = (mech, port) => {
    // 127.0.0.1, not localhost: no resolution of the proxy name in the measured path; the Kerberos
    // service name is given instead (the principal Squid's keytab holds).
    const url = `http://127.0.0.1:${port}`;
    if (mech === 'none') return { url };
    if (mech === 'basic') return { url, auth: 'basic', credentialsFile: path.join(work, 'basic.txt') };
    if (mech === 'negotiate') return { url, auth: 'negotiate', spn: 'HTTP@localhost' };
    return { url, auth: 'ntlm', credentialsFile: path.join(work, 'ntlm.txt') };
  };
  const bin = path.join(BUILD, 'bin', 'sluice.js');
  const env = { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^KRB5/.test(k))), KRB5_CONFIG: kdc.krb5Config, KRB5CCNAME: `FILE:${ccache}` };
  const sluices = {};
  for (const mech of Object.keys(squidOpts)) {
    const dir = path.join(work, `sluice-${mech}`);
    fs.mkdirSync(dir);
    const p = await startSluiceProcess({
      name: `sluice (${mech})`,
      cwd: dir,
      env,
      // The private copy, not the checkout's bin/: `sluice start --config FILE` as users run it.
      wrap: (a) => [a[0], [bin, ...a.slice(2)]],
      config: {
        listeners: [{ name: 'bench', listen: '127.0.0.1:0', identify: 'token' }],
        state: path.join(dir, 'state'),
        dns: { servers: 'system', hosts: { 'origin.test': ['127.0.0.1'] } },
        route: { mode: 'proxy', proxy: proxyFor(mech, squids[mech].port) },
        audit: { file: path.join(dir, 'audit.jsonl') },
        grants: [
          {
            id: 'bench',
            tokenSha256,
            destinations: [`tcp://origin.test:${origins.echo}`, `http://origin.test:${origins.http}`],
            allowAddressClasses: ['loopback'],
          },
        ],
      },
    });
    cleanups.push(() => p.kill9());
    p.dir = dir;
    sluices[mech] = p;
  }

  // Cases: each mechanism through Sluice, and Squid without Sluice (no auth) as the baseline.
  const MECHS = ['none', 'basic', 'negotiate', 'ntlm'];
  const cases = [
    { name: 'squid-direct', label: 'Squid alone (no Sluice, no auth)', port: squids.none.port, auth: '', cpuPid: undefined, squid: squids.none },
    ...MECHS.map((m) => ({ name: m, label: `Sluice → Squid, ${m === 'none' ? 'no proxy auth' : m}`, port: sluices[m].port, auth: sluiceAuth, cpuPid: sluices[m].pid, squid: squids[m] })),
  ];
  const tunnelTarget = `origin.test:${origins.echo}`;
  const httpTarget = `origin.test:${origins.http}`;
  const results = Object.fromEntries(cases.map((c) => [c.name, { tunnel: [], http: [] }]));
  const errors = [];

  const batch = async (c, kind, n, record) => {
    const samples = [];
    let errs = 0;
    const client = kind === 'http' ? httpClient(c.port) : undefined;
    const cpu0 = c.cpuPid === undefined ? 0 : cpuUs(c.cpuPid);
    const sq0 = treeCpuUs(c.squid.pid);
    const t0 = process.hrtime.bigint();
    try {
      for (let i = 0; i < n && errs < MAX_ERRORS_PER_BATCH; i += 1) {
        const r = kind === 'http' ? await client.get(httpTarget, c.auth) : await tunnelOnce(c.port, tunnelTarget, c.auth);
        if (r.error === undefined) samples.push(r.us);
        else {
          errs += 1;
          errors.push(`${c.name} ${kind}${record ? '' : ' (warm-up)'}: ${r.error}`);
          if (kind === 'http') break; // the connection is gone
        }
      }
    } finally {
      client?.close();
    }
    const wallUs = Number(process.hrtime.bigint() - t0) / 1000;
    const cpu = c.cpuPid === undefined ? undefined : cpuUs(c.cpuPid) - cpu0;
    const squidCpu = treeCpuUs(c.squid.pid) - sq0;
    if (record) results[c.name][kind].push({ samples, ops: samples.length, errors: errs, cpuUs: cpu, squidCpuUs: squidCpu, wallUs });
  };

  console.error(`warm-up: ${WARMUP} tunnels and ${WARMUP} requests per case`);
  for (const c of cases) {
    await batch(c, 'tunnel', WARMUP, false);
    await batch(c, 'http', WARMUP, false);
  }
  for (let r = 0; r < ROUNDS; r += 1) {
    // Interleaved: each round visits every case, in an order rotated round by round.
    const order = cases.map((_, i) => cases[(i + r) % cases.length]);
    for (const kind of ['tunnel', 'http']) for (const c of order) await batch(c, kind, N, true);
    console.error(`round ${r + 1}/${ROUNDS} done (${((Date.now() - started) / 1000).toFixed(0)} s)`);
  }

  // What the upstream saw: proof that each mechanism really authenticated, and its legs per operation.
  const squidSeen = {};
  for (const m of MECHS) {
    const log = await squids[m].accessLog();
    const byKey = {};
    const users = new Set();
    for (const e of log) {
      const key = `${e.method} ${e.status}`;
      byKey[key] = (byKey[key] ?? 0) + 1;
      if (e.status === 200 && e.user !== null) users.add(e.user);
    }
    squidSeen[m] = { byKey, users: [...users] };
  }
  // Stopped (SIGTERM) before their audit is read: Sluice writes it asynchronously and flushes on shutdown.
  const stopped = Object.fromEntries(await Promise.all(MECHS.map(async (m) => [m, await sluices[m].stop('SIGTERM', 10_000)])));
  for (const m of MECHS) if (stopped[m] !== 0) errors.push(`${m}: sluice exited with ${String(stopped[m])} on SIGTERM`);
  const audit = {};
  for (const m of MECHS) {
    const counts = {};
    for (const line of fs.readFileSync(path.join(sluices[m].dir, 'audit.jsonl'), 'utf8').split('\n')) {
      if (!line.startsWith('{')) continue;
      const rec = JSON.parse(line);
      const key = rec.reason !== undefined ? `decision ${rec.reason}` : rec.closedBy !== undefined ? `close ${rec.closedBy}` : 'other';
      counts[key] = (counts[key] ?? 0) + 1;
    }
    // Neither the proxy credentials nor the client's token may reach the audit or the log.
    const written = fs.readFileSync(path.join(sluices[m].dir, 'audit.jsonl'), 'utf8') + sluices[m].stderr();
    if (written.includes(basicPassword) || written.includes(token)) errors.push(`${m}: a secret is in the audit file or the log`);
    audit[m] = counts;
  }
  const warnLines = Object.fromEntries(MECHS.map((m) => [m, sluices[m].stderr().split('\n').filter((l) => /"level":(40|50|60|"warn"|"error"|"fatal")/.test(l)).length]));

  // Summaries
  const summarize = (batches, withCpu) => {
    const all = batches.flatMap((b) => b.samples).sort((a, b) => a - b);
    const ops = batches.reduce((s, b) => s + b.ops, 0);
    const roundP50 = batches.map((b) => median(b.samples));
    const cpuPerOp = withCpu ? batches.map((b) => b.cpuUs / Math.max(1, b.ops)) : [];
    return {
      ops,
      errors: batches.reduce((s, b) => s + b.errors, 0),
      p50: percentile(all, 50),
      p99: percentile(all, 99),
      roundP50Min: Math.min(...roundP50),
      roundP50Max: Math.max(...roundP50),
      cpuUsPerOp: withCpu ? median(cpuPerOp) : undefined,
      cpuUsPerOpMin: withCpu ? Math.min(...cpuPerOp) : undefined,
      cpuUsPerOpMax: withCpu ? Math.max(...cpuPerOp) : undefined,
      squidCpuUsPerOp: median(batches.map((b) => b.squidCpuUs / Math.max(1, b.ops))),
    };
  };
  const summary = {};
  for (const c of cases) summary[c.name] = { tunnel: summarize(results[c.name].tunnel, c.cpuPid !== undefined), http: summarize(results[c.name].http, c.cpuPid !== undefined) };

  const commit = shOr('git', ['-C', ROOT, 'rev-parse', '--short=10', 'HEAD'], 'unknown');
  const dirty = shOr('git', ['-C', ROOT, 'status', '--porcelain', '--', 'src', 'bin'], '').length > 0;
  const meta = {
    date: new Date().toISOString(),
    commit,
    dirty,
    build: how,
    node: process.version,
    squid: shOr(squidBinary(), ['-v']).split('\n')[0] ?? '',
    krb5: shOr('krb5-config', ['--version'], 'MIT krb5 (version unknown)'),
    cpu: `${os.cpus()[0]?.model ?? '?'} × ${os.cpus().length}`,
    kernel: `${os.type()} ${os.release()}`,
    loadBefore: loadBefore.map((x) => x.toFixed(2)).join(' '),
    loadAfter: os.loadavg().map((x) => x.toFixed(2)).join(' '),
    seconds: Math.round((Date.now() - started) / 1000),
    rounds: ROUNDS,
    n: N,
    warmup: WARMUP,
  };
  const md = report(meta, cases, summary, squidSeen, audit, warnLines, errors);
  console.log(md);
  if (!flag('--no-save')) {
    const dir = path.join(HERE, 'results');
    fs.mkdirSync(dir, { recursive: true });
    const file = path.join(dir, `${meta.date.slice(0, 10)}-proxy-auth.md`);
    // Runs of one day go in one file, newest last: machines are noisy, so keep every run side by side.
    if (fs.existsSync(file)) fs.appendFileSync(file, `\n---\n\n${md}`);
    else fs.writeFileSync(file, `# Proxy authentication cost per connection (issue 18)\n\nWritten by \`npm run bench:auth\` (bench/proxy-auth.mjs); see bench/README.md#proxy-authentication-cost for what the numbers mean.\n\n${md}`);
    fs.writeFileSync(file.replace(/\.md$/, `-${meta.date.slice(11, 19).replace(/:/g, '')}.json`), JSON.stringify({ meta, summary, squidSeen, audit, warnLines, errors, raw: results }, (_, v) => (typeof v === 'number' && !Number.isInteger(v) ? Math.round(v * 10) / 10 : v), 1));
    console.error(`written: ${path.relative(ROOT, file)} (+ .json with every sample)`);
  }
  return errors.length === 0 ? 0 : 1;
}

const us = (v) => (Number.isFinite(v) ? (v >= 10_000 ? `${(v / 1000).toFixed(1)} ms` : `${Math.round(v)} µs`) : '–');
const x = (a, b) => (Number.isFinite(a) && Number.isFinite(b) && b > 0 ? `${(a / b).toFixed(2)}×` : '–');

function report(meta, cases, summary, squidSeen, audit, warnLines, errors) {
  const lines = [];
  lines.push(`## Run ${meta.date} (commit ${meta.commit}${meta.dirty ? ', src/ or bin/ modified' : ''})`);
  lines.push('');
  lines.push(`${meta.rounds} interleaved rounds × ${meta.n} sequential operations per case and kind, after ${meta.warmup} of each per case as warm-up; ${meta.seconds} s in all. Not pinned: client, origins, Sluice, Squid and its helpers share the machine.`);
  lines.push(`Node ${meta.node}; ${meta.squid}; ${meta.krb5}; ${meta.cpu}; ${meta.kernel}; load average before ${meta.loadBefore}, after ${meta.loadAfter}; Sluice built by ${meta.build}.`);
  for (const [kind, title, what] of [
    ['tunnel', 'Tunnel setup', 'connect to the proxy → `CONNECT origin.test:<echo>` → 200 → 32 B sent → first echoed byte'],
    ['http', 'Forwarded plain HTTP', 'one keep-alive client connection, sequential `GET http://origin.test:<port>/` → complete 200 (3 B body)'],
  ]) {
    const none = summary.none[kind];
    lines.push('', `### ${title}: ${what}`, '');
    lines.push('| case | ops | errors | p50 | p99 | round p50 min–max | p50 / none | p99 / none | Sluice CPU µs/op (min–max) | CPU / none | Squid + helpers CPU µs/op |');
    lines.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
    for (const c of cases) {
      const s = summary[c.name][kind];
      const cpu = s.cpuUsPerOp === undefined ? '–' : `${s.cpuUsPerOp.toFixed(0)} (${s.cpuUsPerOpMin.toFixed(0)}–${s.cpuUsPerOpMax.toFixed(0)})`;
      lines.push(
        `| ${c.label} | ${s.ops} | ${s.errors} | ${us(s.p50)} | ${us(s.p99)} | ${us(s.roundP50Min)}–${us(s.roundP50Max)} | ${c.name === 'squid-direct' ? '–' : x(s.p50, none.p50)} | ${c.name === 'squid-direct' ? '–' : x(s.p99, none.p99)} | ${cpu} | ${s.cpuUsPerOp === undefined ? '–' : x(s.cpuUsPerOp, none.cpuUsPerOp)} | ${s.squidCpuUsPerOp.toFixed(0)} |`,
      );
    }
  }
  lines.push('', '### What the upstream saw (Squid access log, whole run including warm-up)', '');
  lines.push('| mechanism | requests by method and status | authenticated user |');
  lines.push('|---|---|---|');
  for (const m of Object.keys(squidSeen)) {
    const by = Object.entries(squidSeen[m].byKey).sort().map(([k, v]) => `${k}: ${v}`).join(', ');
    lines.push(`| ${m} | ${by} | ${squidSeen[m].users.join(', ') || '–'} |`);
  }
  lines.push('', '### Sluice audit (whole run) and warn+ log lines', '');
  for (const m of Object.keys(audit)) {
    lines.push(`- ${m}: ${Object.entries(audit[m]).sort().map(([k, v]) => `${k}: ${v}`).join(', ')}; warn or above: ${warnLines[m]}`);
  }
  lines.push('', `### Errors: ${errors.length === 0 ? 'none' : errors.length}`);
  if (errors.length > 0) {
    const counts = {};
    for (const e of errors) counts[e] = (counts[e] ?? 0) + 1;
    lines.push('', ...Object.entries(counts).map(([e, n]) => `- ${n} × ${e}`));
  }
  return `${lines.join('\n')}\n`;
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
