#!/usr/bin/env node
// The client of the TLS tunnel-setup part (bench/tls-setup.mjs), a child process of its own so that it
// can be pinned beside the origin, away from Sluice's core. One job per stdin line, one JSON answer per
// stdout line. A tunnel: a new TCP connection, the TLS handshake on a TLS case (the server certificate
// verified against the bench CA; on the certificate case the client certificate presented), `CONNECT`
// (with `Proxy-Authorization` on the token cases), the `200`, 32 B written and the 32 B echo read; the
// time is taken from before the connect to the last echoed byte, then the client ends the connection
// (close_notify and FIN) and starts the next one. Every socket operation has a timeout, a batch stops
// at its deadline or after 20 errors, and the process exits when stdin closes.
//
// argv[2]: JSON { cases: { name: { port, tls, token?, cert?, resume? } }, connect, ca, certFile, keyFile }
// job:     { id, case, durationMs, concurrency, maxTunnels }
// answer:  { id, done, wallS, samplesUs, errors (by code; a non-200 answer is status_N), resumed,
//           lingering, protocol, cipher, cpuUserS, cpuSysS }
import fs from 'node:fs';
import net from 'node:net';
import readline from 'node:readline';
import tls from 'node:tls';

const cfg = JSON.parse(process.argv[2]);
const PAYLOAD = Buffer.alloc(32, 0x61);
const TUNNEL_TIMEOUT_MS = 5000;
const MAX_ERRORS = 20;

const ca = fs.readFileSync(cfg.ca);
// One secure context per case, built once: a long-lived client (undici, a pooled agent) does not parse
// its PEM files per connection, and parsing them is not part of the handshake being measured.
const contexts = {};
for (const [name, c] of Object.entries(cfg.cases)) {
  if (!c.tls) continue;
  contexts[name] = tls.createSecureContext({
    ca,
    ...(c.cert ? { cert: fs.readFileSync(cfg.certFile), key: fs.readFileSync(cfg.keyFile) } : {}),
  });
}
const heads = {};
for (const [name, c] of Object.entries(cfg.cases)) {
  heads[name] = Buffer.from(
    `CONNECT ${cfg.connect} HTTP/1.1\r\nHost: ${cfg.connect}\r\n${c.token ? `Proxy-Authorization: Basic ${c.token}\r\n` : ''}\r\n`,
  );
}

/** Sockets ended by the client and not yet closed: a batch waits for them (bounded) before it answers. */
const closing = new Set();
let onClosed = null;

/** One tunnel; resolves { us, resumed } or rejects with an Error whose `code` names the failure. */
function tunnel(name, worker) {
  const c = cfg.cases[name];
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    let settled = false;
    let head = null;
    let headDone = false;
    let echoed = 0;
    const sock = c.tls
      ? tls.connect({
          host: '127.0.0.1',
          port: c.port,
          secureContext: contexts[name],
          rejectUnauthorized: true,
          // a session is offered on the resumed row only: each sandbox connection is a new client with none
          ...(c.resume && worker.session ? { session: worker.session } : {}),
        })
      : net.connect({ host: '127.0.0.1', port: c.port });
    // as Sluice does on its side: the CONNECT written after the client's Finished must not wait for an ACK
    sock.setNoDelay(true);
    if (c.tls && c.resume) sock.on('session', (s) => (worker.session = s));
    const fail = (code, detail) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock.destroy();
      const e = new Error(detail ?? code);
      e.code = code;
      reject(e);
    };
    const timer = setTimeout(() => fail('timeout'), TUNNEL_TIMEOUT_MS);
    sock.on('error', (e) => fail(e.code ?? 'error', e.message));
    sock.on('close', () => {
      if (closing.delete(sock) && closing.size === 0) onClosed?.();
      fail('closed');
    });
    sock.once(c.tls ? 'secureConnect' : 'connect', () => sock.write(heads[name]));
    sock.on('data', (chunk) => {
      if (settled) return;
      let rest = chunk;
      if (!headDone) {
        head = head === null ? chunk : Buffer.concat([head, chunk]);
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) {
          if (head.length > 8192) fail('bad_response');
          return;
        }
        const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head.subarray(0, 16).toString('latin1'))?.[1] ?? 0);
        if (status !== 200) return fail(`status_${status}`);
        headDone = true;
        rest = head.subarray(end + 4);
        sock.write(PAYLOAD);
      }
      echoed += rest.length;
      if (echoed >= PAYLOAD.length) {
        const us = Number(process.hrtime.bigint() - t0) / 1000;
        settled = true;
        clearTimeout(timer);
        const resumed = c.tls ? sock.isSessionReused() : false;
        if (c.tls && !worker.protocol) worker.protocol = { protocol: sock.getProtocol(), cipher: sock.getCipher()?.name };
        closing.add(sock);
        sock.end();
        resolve({ us, resumed });
      }
    });
  });
}

async function runJob(job) {
  const deadline = performance.now() + job.durationMs;
  const samples = [];
  const errors = {};
  let nErrors = 0;
  let resumed = 0;
  let protocol = null;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const worker = async () => {
    const w = {};
    while (performance.now() < deadline && samples.length < job.maxTunnels && nErrors < MAX_ERRORS) {
      try {
        const r = await tunnel(job.case, w);
        samples.push(r.us);
        if (r.resumed) resumed++;
      } catch (e) {
        nErrors++;
        errors[e.code] = (errors[e.code] ?? 0) + 1;
      }
    }
    protocol ??= w.protocol ?? null;
  };
  await Promise.all(Array.from({ length: job.concurrency }, worker));
  const wallS = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  // the tunnels ended last close before the next batch starts (Sluice writes their close records)
  if (closing.size > 0) {
    await new Promise((resolve) => {
      const bound = setTimeout(resolve, 5000);
      onClosed = () => {
        clearTimeout(bound);
        resolve();
      };
    });
    onClosed = null;
  }
  const lingering = closing.size;
  for (const s of closing) s.destroy();
  closing.clear();
  return {
    id: job.id,
    done: samples.length,
    wallS,
    samplesUs: samples,
    errors,
    resumed,
    lingering,
    protocol: protocol?.protocol ?? null,
    cipher: protocol?.cipher ?? null,
    cpuUserS: cpu.user / 1e6,
    cpuSysS: cpu.system / 1e6,
  };
}

const rl = readline.createInterface({ input: process.stdin });
const queue = [];
let busy = false;
let inputClosed = false;
async function pump() {
  if (busy) return;
  busy = true;
  while (queue.length) {
    const job = queue.shift();
    let answer;
    try {
      answer = await runJob(job);
    } catch (e) {
      answer = { id: job.id, error: e.message };
    }
    process.stdout.write(`${JSON.stringify(answer)}\n`);
  }
  busy = false;
  if (inputClosed) process.exit(0);
}
rl.on('line', (line) => {
  if (!line.trim()) return;
  queue.push(JSON.parse(line));
  void pump();
});
rl.on('close', () => {
  inputClosed = true;
  if (!busy) process.exit(0);
});
