// Tunnel setup over a TLS listener (issue 28), the `tls` part of `npm run bench`: one Sluice as users
// run it (audit on to a file) with three listeners, a plain TCP token listener, a TLS token listener and
// a TLS listener that identifies by client certificate, measured side by side in interleaved rounds by
// one Node client (bench/tls-client.mjs), so that the only difference between the rows is the TLS; and
// the same three over the TLS floor (bench/floor-tls.mjs: no checks, Node's own TLS), so that what TLS
// costs in Node can be told from what Sluice adds to it. The certificates (ECDSA P-256: two CAs, the
// server's certificate for IP 127.0.0.1, one client certificate) are made with the openssl CLI at the
// start, in a temporary directory. run.mjs passes its own child handling (launch, stop, CPU readings),
// so Sluice, the floor and the client are pinned, tracked and killed like every other target.
import { spawnSync } from 'node:child_process';
import { createHash, randomBytes, X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

const BENCH = path.dirname(fileURLToPath(import.meta.url));
const CLIENT = path.join(BENCH, 'tls-client.mjs');
const FLOOR = path.join(BENCH, 'floor-tls.mjs');

/**
 * The cases, in table order: the server and port each one uses, how its client identifies, and the
 * plain case of the same server that its TLS cost is measured against. The floor reads no credential;
 * its clients send the same bytes as Sluice's.
 */
export const TLS_CASES = {
  plain: { label: 'Sluice, plain TCP, token', server: 'sluice', port: 'plain', tls: false, token: true },
  'tls-token': { label: 'Sluice, TLS, token', server: 'sluice', port: 'tls-token', tls: true, token: true, base: 'plain', floor: 'floor-tls' },
  'tls-cert': { label: 'Sluice, TLS, client certificate', server: 'sluice', port: 'tls-cert', tls: true, cert: true, base: 'plain', floor: 'floor-cert' },
  'tls-token-resumed': { label: 'Sluice, TLS, token, session resumed', server: 'sluice', port: 'tls-token', tls: true, token: true, resume: true, base: 'plain' },
  'floor-plain': { label: 'TLS floor, plain TCP', server: 'floor', port: 'plain', tls: false, token: true },
  'floor-tls': { label: 'TLS floor, TLS', server: 'floor', port: 'tls', tls: true, token: true, base: 'floor-plain' },
  'floor-cert': { label: 'TLS floor, TLS, client certificate', server: 'floor', port: 'cert', tls: true, cert: true, base: 'floor-plain' },
};

/** Why the part cannot run here, or null. */
export function tlsSetupUnavailable() {
  const r = spawnSync('openssl', ['version'], { encoding: 'utf8', timeout: 10_000 });
  if (r.error) return `the openssl CLI was not found (${r.error.code}); Debian: sudo apt-get install -y openssl`;
  return r.status === 0 ? null : `openssl version exited ${r.status}`;
}

function openssl(args, dir) {
  const r = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8', timeout: 30_000 });
  if (r.status !== 0) throw new Error(`openssl ${args.slice(0, 2).join(' ')} failed: ${(r.stderr || r.error?.message || '').trim().slice(-300)}`);
}

/**
 * A P-256 key and a certificate signed by `ca` with extensions `ext` (or a self-signed CA when `ca` is
 * null), valid for 30 days: beyond Sluice's 14-day expiry warning, which would otherwise log at warn.
 */
function issue(dir, name, subject, ext, ca) {
  const key = `${name}.key`;
  const pem = `${name}.pem`;
  openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', key], dir);
  if (ca === null) {
    openssl(['req', '-x509', '-new', '-key', key, '-subj', subject, '-days', '30', '-sha256', '-out', pem,
      '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'], dir);
  } else {
    fs.writeFileSync(path.join(dir, `${name}.ext`), `${ext.join('\n')}\n`);
    openssl(['req', '-new', '-key', key, '-subj', subject, '-config', '/dev/null', '-out', `${name}.csr`], dir);
    openssl(['x509', '-req', '-in', `${name}.csr`, '-CA', `${ca}.pem`, '-CAkey', `${ca}.key`, '-set_serial', `0x${randomBytes(8).toString('hex')}`,
      '-days', '30', '-sha256', '-extfile', `${name}.ext`, '-out', pem], dir);
  }
  return { key: path.join(dir, key), cert: path.join(dir, pem) };
}

/**
 * Two CAs (one for the listener's certificate, one for client certificates, as a deployment keeps them
 * apart), the listener's certificate (SAN IP:127.0.0.1) and one client certificate (a URI SAN, mapped
 * by its SHA-256).
 */
export function makeBenchPki(dir) {
  const serverCa = issue(dir, 'server-ca', '/CN=sluice bench server CA', [], null);
  const server = issue(dir, 'server', '/CN=127.0.0.1', ['basicConstraints=critical,CA:FALSE', 'keyUsage=critical,digitalSignature', 'extendedKeyUsage=serverAuth', 'subjectAltName=IP:127.0.0.1'], 'server-ca');
  const clientCa = issue(dir, 'client-ca', '/CN=sluice bench client CA', [], null);
  const client = issue(dir, 'client', '/CN=bench agent', ['basicConstraints=critical,CA:FALSE', 'keyUsage=critical,digitalSignature', 'extendedKeyUsage=clientAuth', 'subjectAltName=URI:spiffe://bench.test/agent'], 'client-ca');
  const x509 = new X509Certificate(fs.readFileSync(client.cert));
  const serverX509 = new X509Certificate(fs.readFileSync(server.cert));
  return {
    serverCa: serverCa.cert,
    server,
    clientCa: clientCa.cert,
    client,
    clientSha256: x509.fingerprint256.replaceAll(':', '').toLowerCase(),
    serverKeyType: `${serverX509.publicKey.asymmetricKeyDetails?.namedCurve ?? serverX509.publicKey.asymmetricKeyType}`,
  };
}

/** Resolves true once the child's JSON log on stderr has said `listening` for every name, false on exit or after ms. */
function listening(child, names, ms) {
  const left = new Set(names);
  let buf = '';
  return new Promise((resolve) => {
    const finish = (ok) => {
      clearTimeout(timer);
      child.stderr.removeListener('data', onData);
      resolve(ok);
    };
    const onData = (d) => {
      buf += d;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        try {
          const l = JSON.parse(line);
          if (l.msg === 'listening') left.delete(l.listener);
        } catch {}
      }
      if (left.size === 0) finish(true);
    };
    const timer = setTimeout(() => finish(false), ms);
    child.stderr.on('data', onData);
    child.exited.then(() => finish(false));
  });
}

/** The child's first stdout line, or null on exit or after ms. */
function firstLine(child, ms) {
  const rl = readline.createInterface({ input: child.stdout });
  return new Promise((resolve) => {
    const finish = (v) => {
      clearTimeout(timer);
      rl.close();
      resolve(v);
    };
    const timer = setTimeout(() => finish(null), ms);
    rl.once('line', finish);
    child.exited.then(() => finish(null));
  });
}

/** Sends jobs to the client child, one at a time, and reads its answers. */
function clientDriver(child) {
  const rl = readline.createInterface({ input: child.stdout });
  const waiting = new Map();
  let nextId = 0;
  rl.on('line', (line) => {
    let a;
    try {
      a = JSON.parse(line);
    } catch {
      return;
    }
    const w = waiting.get(a.id);
    if (w) {
      waiting.delete(a.id);
      w(a);
    }
  });
  return (job, timeoutMs) =>
    new Promise((resolve, reject) => {
      const id = ++nextId;
      const timer = setTimeout(() => {
        waiting.delete(id);
        reject(new Error(`the TLS client did not answer job ${job.case} within ${timeoutMs} ms`));
      }, timeoutMs);
      waiting.set(id, (a) => {
        clearTimeout(timer);
        if (a.error) reject(new Error(`the TLS client failed: ${a.error}`));
        else resolve(a);
      });
      child.stdin.write(`${JSON.stringify({ ...job, id })}\n`);
    });
}

/**
 * Runs the part. `h` is run.mjs's child handling: launch(cmd, args, {cpu, cwd, name}) (a child with
 * `exited`), stop(child, graceMs), groupCpu(pgid), cpuStat() (busy seconds per CPU), pinned (Sluice on
 * CPU 0, the client on CPU 1), freePort(), tmpDir(prefix), log(msg). `origin.echo` is the
 * echo port of the run's origin. Settings: rounds, seqS (sequential batch), concS and concurrency (the
 * concurrent batch), warmS (per case, not recorded).
 */
/** What each child's stderr and stdout keep (run.mjs's collect). */
const LOG_LIMIT = 4 << 20;

export async function measureTlsSetup(h, { entry, origin, rounds, seqS, concS, concurrency, warmS }) {
  const dir = h.tmpDir('tls');
  const pki = makeBenchPki(dir);
  const token = randomBytes(18).toString('hex');
  const auth = Buffer.from(`bench:${token}`).toString('base64');
  const ports = { plain: await h.freePort(), 'tls-token': await h.freePort(), 'tls-cert': await h.freePort() };
  const target = `127.0.0.1:${origin.echo}`;
  const cfg = [
    '# generated by bench/tls-setup.mjs',
    'listeners:',
    '  - name: plain',
    `    listen: 127.0.0.1:${ports.plain}`,
    '    identify: token',
    '  - name: tls-token',
    `    listen: 127.0.0.1:${ports['tls-token']}`,
    '    identify: token',
    `    tls: { certFile: ${pki.server.cert}, keyFile: ${pki.server.key} }`,
    '  - name: tls-cert',
    `    listen: 127.0.0.1:${ports['tls-cert']}`,
    '    identify: certificate',
    `    tls: { certFile: ${pki.server.cert}, keyFile: ${pki.server.key}, clientCaFile: ${pki.clientCa} }`,
    `state: ${dir}/state`,
    'audit:',
    `  file: ${dir}/audit.jsonl`,
    'grants:',
    '  - id: bench',
    `    tokenSha256: ${createHash('sha256').update(token).digest('hex')}`,
    `    clientCertificate: { sha256: ${pki.clientSha256} }`,
    `    destinations: ["tcp://${target}"]`,
    '    allowAddressClasses: [loopback]',
    '',
  ].join('\n');
  const cfgFile = path.join(dir, 'sluice.yaml');
  fs.writeFileSync(cfgFile, cfg);
  const sluice = h.launch(process.execPath, [entry, 'start', '--config', cfgFile], { cpu: 0, cwd: dir, name: 'sluice-tls' });
  const sluiceLog = h.collect(sluice.stderr, LOG_LIMIT);
  h.collect(sluice.stdout, LOG_LIMIT);
  sluice.stdin.end();
  const floor = h.launch(process.execPath, [FLOOR, JSON.stringify({ certFile: pki.server.cert, keyFile: pki.server.key, clientCaFile: pki.clientCa })], { cpu: 0, cwd: dir, name: 'floor-tls' });
  const floorLog = h.collect(floor.stderr, LOG_LIMIT);
  floor.stdin.end();
  let client = null;
  const result = { settings: { rounds, seqS, concS, concurrency, warmS, target, pinned: Boolean(h.pinned) }, cases: {}, pki: { key: pki.serverKeyType, files: 'ECDSA P-256, openssl CLI, made at the start' } };
  try {
    // ready once its log names every listener: a probe connection would leave an audit record of its own
    if (!(await listening(sluice, Object.keys(ports), 15_000))) throw new Error(`Sluice did not log every listener: ${sluiceLog().trim().split('\n').slice(-5).join(' | ')}`);
    const floorPorts = await firstLine(floor, 15_000);
    if (!floorPorts) throw new Error(`the TLS floor did not start: ${floorLog().trim().slice(-300)}`);
    const servers = { sluice: { child: sluice, ports }, floor: { child: floor, ports: JSON.parse(floorPorts) } };
    const cases = {};
    for (const [name, c] of Object.entries(TLS_CASES)) cases[name] = { port: servers[c.server].ports[c.port], tls: c.tls, token: c.token ? auth : undefined, cert: Boolean(c.cert), resume: Boolean(c.resume) };
    client = h.launch(process.execPath, [CLIENT, JSON.stringify({ cases, connect: target, ca: pki.serverCa, certFile: pki.client.cert, keyFile: pki.client.key })], { cpu: 1, name: 'tls-client' });
    const clientLog = h.collect(client.stderr, LOG_LIMIT);
    const run = clientDriver(client);
    const job = async (name, durationS, conc) => {
      const server = servers[TLS_CASES[name].server].child;
      const cpu0 = h.pinned ? h.cpuStat()['0'] : undefined;
      const c0 = h.groupCpu(server.pid);
      const a = await run({ case: name, durationMs: Math.round(durationS * 1000), concurrency: conc, maxTunnels: 200_000 }, durationS * 1000 + 30_000).catch((e) => {
        throw new Error(`${e.message}${clientLog() ? `: ${clientLog().trim().slice(-300)}` : ''}`);
      });
      const serverS = h.groupCpu(server.pid) - c0;
      const cpu1 = h.pinned ? h.cpuStat()['0'] : undefined;
      // what else ran on the server's core (other processes, kernel work) and hypervisor steal: a noisy batch shows here
      const othersPct = cpu0 && cpu1 ? Math.max(0, (100 * (cpu1.busy - cpu0.busy - serverS)) / a.wallS) : null;
      const stealPct = cpu0 && cpu1 ? (100 * (cpu1.steal - cpu0.steal)) / a.wallS : null;
      return { ...a, othersPct, stealPct, serverUsPerTunnel: a.done > 0 ? (1e6 * serverS) / a.done : null, serverPct: (100 * serverS) / a.wallS, clientPct: (100 * (a.cpuUserS + a.cpuSysS)) / a.wallS };
    };
    const names = Object.keys(TLS_CASES);
    // warm-up (JIT, both ends): not recorded; every case must complete a tunnel before anything is measured
    for (const name of names) {
      const w = await job(name, warmS, concurrency);
      if (w.done === 0) throw new Error(`${name}: no tunnel completed in the warm-up: ${JSON.stringify(w.errors)}; ${TLS_CASES[name].server === 'sluice' ? `Sluice: ${sluiceLog().trim().split('\n').slice(-3).join(' | ')}` : `floor: ${floorLog().trim().slice(-300)}`}`);
      result.cases[name] = { label: TLS_CASES[name].label, protocol: w.protocol, cipher: w.cipher, rounds: [] };
    }
    for (let round = 1; round <= rounds; round++) {
      const order = names.map((_, i) => names[(i + round - 1) % names.length]);
      for (const name of order) {
        const seq = await job(name, seqS, 1);
        const conc = await job(name, concS, concurrency);
        result.cases[name].rounds.push({ round, seq: slim(seq), conc: slim(conc) });
        h.log(`tls round ${round} ${name}: p50 ${fmt(quantile(sorted(seq.samplesUs), 0.5))} µs, ${Math.round(conc.done / conc.wallS)} tunnels/s ×${concurrency}, ${fmt(conc.serverUsPerTunnel)} µs server CPU per tunnel`);
      }
    }
  } finally {
    if (client) {
      client.stdin.end();
      await h.stop(client, 2000);
    }
    await h.stop(floor, 2000);
    await h.stop(sluice, 8000);
  }
  result.audit = readAudit(path.join(dir, 'audit.jsonl'), sluiceLog(), token);
  result.summary = summarizeTlsSetup(result);
  // the pooled quantiles are in the summary; each batch keeps its own instead of every sample (a full
  // run times over 100,000 tunnels, and the result file is committed)
  for (const c of Object.values(result.cases)) {
    for (const r of c.rounds) {
      for (const b of [r.seq, r.conc]) {
        const v = sorted(b.samplesUs);
        b.latencyUs = { p50: quantile(v, 0.5), p90: quantile(v, 0.9), p99: quantile(v, 0.99), max: v.at(-1) ?? null };
        delete b.samplesUs;
      }
    }
  }
  return result;
}

/** A batch as measured: every sample (until the summary is made), counts and CPU. */
function slim(a) {
  return {
    done: a.done,
    wallS: a.wallS,
    samplesUs: a.samplesUs.map((x) => Math.round(x)),
    errors: a.errors,
    resumed: a.resumed,
    lingering: a.lingering,
    serverUsPerTunnel: a.serverUsPerTunnel,
    serverPct: a.serverPct,
    clientPct: a.clientPct,
    othersPct: a.othersPct,
    stealPct: a.stealPct,
  };
}

/** Audit records by listener: decisions (request, via, reason) and closes; and any secret where it must not be. */
function readAudit(file, log, token) {
  const out = { records: 0, byListener: {}, leaks: [], warnLines: 0, warnSamples: [] };
  let text = '';
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch {
    out.leaks.push('no audit file was written');
  }
  if (text.includes(token)) out.leaks.push('the client token is in the audit file');
  if (log.includes(token)) out.leaks.push('the client token is in the operational log');
  for (const l of log.split('\n')) {
    if (!/"level":(?:"(?:warn|error|fatal)"|[4-6]\d)/.test(l)) continue;
    out.warnLines++;
    if (out.warnSamples.length < 3) out.warnSamples.push(l.slice(0, 300));
  }
  for (const line of text.split('\n')) {
    if (!line) continue;
    out.records++;
    let r;
    try {
      r = JSON.parse(line);
    } catch {
      continue;
    }
    const l = (out.byListener[r.listener ?? '-'] ??= { decisions: {}, closes: {} });
    if (r.kind === 'decision') {
      // a refusal names its detail (an OpenSSL code for tls_handshake_failed), never a credential
      const k = `${r.request} ${r.via ?? '-'} ${r.reason}${r.decision === 'deny' && r.detail ? ` (${r.detail})` : ''}`;
      l.decisions[k] = (l.decisions[k] ?? 0) + 1;
    } else if (r.kind === 'close') {
      const k = `${r.request} ${r.closedBy}`;
      l.closes[k] = (l.closes[k] ?? 0) + 1;
    }
  }
  return out;
}

const sorted = (a) => [...a].sort((x, y) => x - y);
function quantile(s, q) {
  if (s.length === 0) return null;
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))];
}
function median(values) {
  const v = sorted(values.filter((x) => typeof x === 'number' && Number.isFinite(x)));
  if (v.length === 0) return null;
  const m = Math.floor(v.length / 2);
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}
function range(values) {
  const v = values.filter((x) => typeof x === 'number' && Number.isFinite(x));
  return v.length ? { min: Math.min(...v), max: Math.max(...v) } : null;
}

/**
 * Made once, while every sample is at hand. Per case: p50/p90/p99 over every sequential sample of
 * every round, the min–max of the per-round p50, tunnels/s and the server's CPU per tunnel (medians
 * over rounds) for both batch kinds. Then what TLS adds: each TLS case minus the plain case of the same
 * server, at p50 and p99 of the pooled samples, as the median of the per-round p50 differences (each
 * round's cases ran back to back), and in CPU per tunnel; and for Sluice's full handshakes, how much of
 * that the floor also pays (Node's own TLS).
 */
export function summarizeTlsSetup(result) {
  const s = {};
  for (const [name, c] of Object.entries(result.cases)) {
    const all = sorted(c.rounds.flatMap((r) => r.seq.samplesUs));
    const roundP50 = c.rounds.map((r) => quantile(sorted(r.seq.samplesUs), 0.5));
    const errors = {};
    for (const r of c.rounds) for (const b of [r.seq, r.conc]) for (const [k, n] of Object.entries(b.errors ?? {})) errors[k] = (errors[k] ?? 0) + n;
    const batches = c.rounds.flatMap((r) => [r.seq, r.conc]);
    s[name] = {
      label: c.label,
      server: TLS_CASES[name]?.server ?? 'sluice',
      resume: Boolean(TLS_CASES[name]?.resume),
      protocol: c.protocol,
      cipher: c.cipher,
      samples: all.length,
      p50: quantile(all, 0.5),
      p90: quantile(all, 0.9),
      p99: quantile(all, 0.99),
      roundP50,
      roundP50Range: range(roundP50),
      seqRate: median(c.rounds.map((r) => r.seq.done / r.seq.wallS)),
      seqCpuUs: median(c.rounds.map((r) => r.seq.serverUsPerTunnel)),
      concRate: median(c.rounds.map((r) => r.conc.done / r.conc.wallS)),
      concRateRange: range(c.rounds.map((r) => r.conc.done / r.conc.wallS)),
      concCpuUs: median(c.rounds.map((r) => r.conc.serverUsPerTunnel)),
      concCpuUsRange: range(c.rounds.map((r) => r.conc.serverUsPerTunnel)),
      concServerPct: median(c.rounds.map((r) => r.conc.serverPct)),
      concClientPct: median(c.rounds.map((r) => r.conc.clientPct)),
      othersPct: median(batches.map((b) => b.othersPct)),
      othersPctMax: range(batches.map((b) => b.othersPct))?.max ?? null,
      stealPct: median(batches.map((b) => b.stealPct)),
      tunnels: batches.reduce((n, b) => n + b.done, 0),
      resumed: batches.reduce((n, b) => n + b.resumed, 0),
      errors,
    };
  }
  const added = {};
  for (const name of Object.keys(s)) {
    const base = TLS_CASES[name]?.base;
    if (!base || !s[base]) continue;
    const t = s[name];
    const b = s[base];
    const perRound = result.cases[name].rounds.map((r, i) => {
      const p = result.cases[base].rounds[i];
      return p ? quantile(sorted(r.seq.samplesUs), 0.5) - quantile(sorted(p.seq.samplesUs), 0.5) : null;
    });
    added[name] = {
      base,
      p50Us: t.p50 - b.p50,
      p99Us: t.p99 - b.p99,
      p50Ratio: t.p50 / b.p50,
      p99Ratio: t.p99 / b.p99,
      roundP50DiffUs: median(perRound),
      roundP50DiffRange: range(perRound),
      cpuUs: t.concCpuUs !== null && b.concCpuUs !== null ? t.concCpuUs - b.concCpuUs : null,
    };
  }
  // Sluice's TLS cost beyond Node's: its added time and CPU minus the floor's for the same handshake
  const beyondFloor = {};
  for (const [name, a] of Object.entries(added)) {
    const f = added[TLS_CASES[name]?.floor];
    if (!f) continue;
    beyondFloor[name] = { floor: TLS_CASES[name].floor, p50Us: a.p50Us - f.p50Us, p99Us: a.p99Us - f.p99Us, cpuUs: a.cpuUs !== null && f.cpuUs !== null ? a.cpuUs - f.cpuUs : null };
  }
  return { cases: s, added, beyondFloor };
}

function fmt(x) {
  if (x === null || x === undefined || !Number.isFinite(x)) return '-';
  return Math.round(x).toLocaleString('en-US');
}
const signed = (x) => (x === null || x === undefined || !Number.isFinite(x) ? '-' : `${x >= 0 ? '+' : '−'}${fmt(Math.abs(x))}`);
const rng = (r) => (r ? `${fmt(r.min)}–${fmt(r.max)}` : '-');

/** The markdown of the part, for the run's table and docs/benchmarks.md. */
export function renderTlsSetup(t) {
  const s = t.summary;
  const st = t.settings;
  const k = st.concurrency;
  const lines = [];
  lines.push(`Tunnel setup over a TLS listener (issue 28). One Sluice as users run it (audit on to a file) with three listeners: plain TCP with a token, TLS with a token, and TLS identifying by client certificate. Beside it the TLS floor (\`bench/floor-tls.mjs\`: the net floor's CONNECT handling behind \`net.createServer\` and \`tls.createServer\`, no checks), for what TLS costs in Node itself. Certificates: ${t.pki?.files ?? 'ECDSA P-256'}; the client verifies the server's certificate, and the certificate rows' server verifies the client's against its CA. One Node client (\`bench/tls-client.mjs\`) on the load generator's CPU drives every row, in ${st.rounds} interleaved round(s). A tunnel: a new TCP connection, the TLS handshake (full, no session offered, unless the row says resumed), \`CONNECT ${st.target}\` (\`Proxy-Authorization: Basic\` on the token rows, no credential on the certificate rows), the 200, 32 B echoed; timed from the connect to the last echoed byte. Latency: the sequential batches (${st.seqS} s per row and round, one tunnel at a time), pooled over rounds. Tunnels/s and the server's CPU per tunnel (its user + system time over the tunnels completed): the sequential batch, and a batch of ${k} concurrent clients (${st.concS} s); medians over rounds. The plain rows here come from the Node client: compare them with this table's TLS rows, not with the load generator's rows above.`);
  lines.push('');
  lines.push(`| row | protocol | tunnels | p50 µs | p90 µs | p99 µs | per-round p50 µs | tunnels/s, sequential | tunnels/s, ${k} concurrent | server CPU µs per tunnel, sequential | server CPU µs per tunnel, ${k} concurrent | server / client CPU %, ${k} concurrent |${st.pinned ? " other work on the server's core %, median (max) |" : ''}`);
  lines.push(`|---|---|---|---|---|---|---|---|---|---|---|---|${st.pinned ? '---|' : ''}`);
  for (const c of Object.values(s.cases)) {
    const proto = c.protocol ? `${c.protocol}${c.cipher ? ` ${c.cipher}` : ''}` : 'TCP';
    const resumed = c.resume ? ` (${Math.round((100 * c.resumed) / Math.max(1, c.tunnels))}% resumed)` : '';
    lines.push(`| ${c.label}${resumed} | ${proto} | ${fmt(c.samples)} | ${fmt(c.p50)} | ${fmt(c.p90)} | ${fmt(c.p99)} | ${rng(c.roundP50Range)} | ${fmt(c.seqRate)} | ${fmt(c.concRate)} (${rng(c.concRateRange)}) | ${fmt(c.seqCpuUs)} | ${fmt(c.concCpuUs)} (${rng(c.concCpuUsRange)}) | ${fmt(c.concServerPct)} / ${fmt(c.concClientPct)} |${st.pinned ? ` ${fmt(c.othersPct)} (${fmt(c.othersPctMax)})${c.stealPct > 1 ? ` [steal ${fmt(c.stealPct)}]` : ''} |` : ''}`);
  }
  lines.push('');
  lines.push(`What TLS adds to tunnel setup: each TLS row minus the plain row of the same server, at the pooled p50 and p99, as the median (min–max) of the per-round p50 differences, and in the server's CPU per tunnel (${k} concurrent).`);
  lines.push('');
  lines.push('| row | added p50 µs | added p99 µs | p50 / p99 ratio to plain | per-round p50 difference µs | added server CPU µs per tunnel |');
  lines.push('|---|---|---|---|---|---|');
  for (const [name, a] of Object.entries(s.added)) {
    lines.push(`| ${s.cases[name].label} | ${signed(a.p50Us)} | ${signed(a.p99Us)} | ${a.p50Ratio.toFixed(2)}× / ${a.p99Ratio.toFixed(2)}× | ${signed(a.roundP50DiffUs)} (${a.roundP50DiffRange ? `${signed(a.roundP50DiffRange.min)} to ${signed(a.roundP50DiffRange.max)}` : '-'}) | ${signed(a.cpuUs)} |`);
  }
  const beyond = Object.entries(s.beyondFloor ?? {});
  if (beyond.length) {
    lines.push('');
    lines.push(`Sluice's TLS cost beyond Node's own (its added time and CPU minus the floor's for the same handshake): ${beyond.map(([name, b]) => `${s.cases[name].label.replace(/^Sluice, /, '')}: p50 ${signed(b.p50Us)} µs, p99 ${signed(b.p99Us)} µs, CPU ${signed(b.cpuUs)} µs per tunnel`).join('; ')}.`);
  }
  const errs = Object.values(s.cases).filter((c) => Object.keys(c.errors).length);
  lines.push('');
  lines.push(errs.length ? `Client errors: ${errs.map((c) => `${c.label} ${JSON.stringify(c.errors)}`).join('; ')}.` : 'No client errors.');
  if (t.audit) {
    const per = Object.entries(t.audit.byListener).map(([l, v]) => `${l}: decisions ${JSON.stringify(v.decisions)}, closes ${JSON.stringify(v.closes)}`);
    lines.push(`Sluice audit (warm-up included): ${fmt(t.audit.records)} records; ${per.join('; ')}; operational log lines at warn or above: ${t.audit.warnLines}${t.audit.warnSamples?.length ? ` (${t.audit.warnSamples.map((l) => `\`${l.replace(/\|/g, '\\|')}\``).join(', ')})` : ''}.${t.audit.leaks.length ? ` **${t.audit.leaks.join('; ')}**.` : ''}`);
  }
  return lines.join('\n');
}
