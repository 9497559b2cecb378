// A raw-socket fuzzer against a running Sluice (issue #5, item 5): seeded mutations of valid CONNECT and
// absolute-form heads (byte flips; CR, LF, NUL, space, colon and high bytes; truncation; duplicated and
// giant lines; random methods and versions) go over fresh sockets for a bounded time. The proxy must stay
// up (control requests keep working), every response must be well-formed HTTP/1.1, every response Sluice
// writes must carry Proxy-Status with a known reason code whose status it uses (RFC 9209;
// docs/reason-codes.md), no 5xx other than 502/504, and no response may echo Proxy-Authorization or
// the token. The seed is printed; rerun one with SLUICE_FUZZ_SEED=<seed>.
import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Reasons, isReasonCode } from '../../src/core/reason.js';
import { startHttpOrigin, startTcpEchoServer, type EchoServer, type Origin } from '../support/origins.js';
import { silentLog, startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';
import { waitUntil, withTimeout } from '../support/wait.js';
import { expectResourcesSettle, resourceCounts } from '../faults/leak-check.js';
import { seededRandom } from '../support/seeded-random.js';

const SEED = Number(process.env['SLUICE_FUZZ_SEED'] ?? (Date.now() ^ (process.pid << 8)) >>> 0);
const MAX_ITERATIONS = Number(process.env['SLUICE_FUZZ_ITERATIONS'] ?? 1500);
const MAX_MS = Number(process.env['SLUICE_FUZZ_MS'] ?? 8000);
const CONCURRENCY = 24;
const PER_REQUEST_MS = 3000;
const IDLE_AFTER_DATA_MS = 300;
const CONTROL_EVERY = 150;

const GRANT = 'fuzz';
const TOKEN = 'tok-fuzz-Zq8v3xK1';
const BASIC = Buffer.from(`${GRANT}:${TOKEN}`).toString('base64');
const CONTROL_SOURCE = '127.0.0.2';


class Mutator {
  constructor(private readonly rand: () => number) {}
  int(n: number): number {
    return Math.floor(this.rand() * n);
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)] as T;
  }
  chance(p: number): boolean {
    return this.rand() < p;
  }

  mutate(input: Buffer): Buffer {
    let buf = input;
    const rounds = 1 + this.int(3);
    for (let i = 0; i < rounds; i += 1) buf = this.once(buf);
    return buf.length > 200_000 ? buf.subarray(0, 200_000) : buf;
  }

  private at(buf: Buffer): number {
    return this.int(buf.length + 1);
  }

  private once(buf: Buffer): Buffer {
    switch (this.int(12)) {
      case 0: { // flip one bit
        if (buf.length === 0) return buf;
        const out = Buffer.from(buf);
        const i = this.int(out.length);
        out[i] = (out[i] ?? 0) ^ (1 << this.int(8));
        return out;
      }
      case 1: { // insert a delimiter, control or high byte
        const ins = this.pick(['\r', '\n', '\0', ' ', ':', '\r\n', '\t', '\x7f', '\r\n\r\n', '\n\n', ' :', '%00', '@', '[', ']']);
        const bytes = this.chance(0.25) ? Buffer.from([0x80 + this.int(128)]) : Buffer.from(ins, 'latin1');
        const i = this.at(buf);
        return Buffer.concat([buf.subarray(0, i), bytes, buf.subarray(i)]);
      }
      case 2: // truncate
        return buf.subarray(0, this.at(buf));
      case 3: { // delete a range
        const i = this.at(buf);
        return Buffer.concat([buf.subarray(0, i), buf.subarray(Math.min(buf.length, i + 1 + this.int(12)))]);
      }
      case 4: { // duplicate a line somewhere
        const lines = buf.toString('latin1').split('\r\n');
        const line = this.pick(lines);
        lines.splice(this.int(lines.length + 1), 0, line);
        return Buffer.from(lines.join('\r\n'), 'latin1');
      }
      case 5: { // a giant header value or line
        const size = this.pick([1024, 8000, 16_500, 40_000, 70_000]);
        const fill = this.pick(['a', 'é', '\t', 'x'.repeat(7) + ',']).repeat(Math.ceil(size / 8)).slice(0, size);
        return this.replaceHeadLine(buf, 1 + this.int(3), `X-Giant: ${fill}`);
      }
      case 6: { // random method
        const method = this.pick(['GET', 'CONNECT', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'TRACE', 'PATCH', 'HEAD', 'PRI', 'get', 'connect', 'M-SEARCH', 'PROPFIND', 'X'.repeat(300), '', 'G\0T', 'CONNECT CONNECT']);
        const text = buf.toString('latin1');
        const space = text.indexOf(' ');
        return Buffer.from(space < 0 ? `${method} ${text}` : `${method}${text.slice(space)}`, 'latin1');
      }
      case 7: { // random HTTP version
        const version = this.pick(['HTTP/1.0', 'HTTP/1.1', 'HTTP/2.0', 'HTTP/0.9', 'HTTP/1.1x', 'HTTP/1', 'HTTP/9.9', 'http/1.1', 'HTTP/1.1 extra', '']);
        return Buffer.from(buf.toString('latin1').replace(/HTTP\/1\.1(?=\r\n)/, version), 'latin1');
      }
      case 8: { // a hostile header
        const header = this.pick([
          'Content-Length: 5', 'Content-Length: 5\r\nContent-Length: 6', 'Transfer-Encoding: chunked', 'Transfer-Encoding: chunked\r\nContent-Length: 3',
          'Transfer-Encoding: xchunked', 'Connection: Upgrade\r\nUpgrade: websocket', 'Upgrade: h2c', 'Expect: 100-continue', 'Expect: nonsense',
          ' obs-fold: continued', 'Host: other.test', 'Host:', 'Proxy-Authorization: Basic !!!', `Proxy-Authorization: Bearer ${TOKEN}x`,
          'Proxy-Authorization: Basic ' + Buffer.from('other:guess').toString('base64'), 'Proxy-Authorization: Bearer', 'Proxy-Connection: keep-alive',
          'Connection: close', 'Connection: keep-alive, Proxy-Authorization', 'X-Null: a\0b', 'Bad Name: v', ': empty-name',
        ]);
        return this.replaceHeadLine(buf, 1 + this.int(3), header, true);
      }
      case 9: { // many header fields
        const count = this.pick([50, 101, 150, 400]);
        const lines = Array.from({ length: count }, (_, i) => `X-H${i}: ${i}`).join('\r\n');
        return this.replaceHeadLine(buf, 1, lines, true);
      }
      case 10: { // replace the request target
        const target = this.pick([
          'echo.test:0', 'echo.test:65536', 'echo.test:443abc', '[::1]:80', '[::ffff:127.0.0.1]:1', '127.0.0.1:1', 'user@echo.test:1',
          'http://origin.test:1/', 'https://origin.test/', 'ftp://x/', '*', '/', '', 'http://[fe80::1%25eth0]/', 'http://0x7f.1/',
          '%65cho.test:1', 'echo.test.:1', 'ECHO.TEST:1', 'http://origin.test:1@evil.test/', 'http:///', 'ws://origin.test:1/',
        ]);
        const text = buf.toString('latin1');
        return Buffer.from(text.replace(/^(\S*) \S*/, `$1 ${target}`), 'latin1');
      }
      default: { // overwrite a few random bytes
        if (buf.length === 0) return buf;
        const out = Buffer.from(buf);
        for (let n = 1 + this.int(4); n > 0; n -= 1) out[this.int(out.length)] = this.int(256);
        return out;
      }
    }
  }

  /** Inserts `line` after header line `index` (or replaces it), keeping the rest of the head. */
  private replaceHeadLine(buf: Buffer, index: number, line: string, insert = false): Buffer {
    const lines = buf.toString('latin1').split('\r\n');
    const i = Math.min(index, Math.max(0, lines.length - 1));
    lines.splice(i, insert ? 0 : 1, line);
    return Buffer.from(lines.join('\r\n'), 'latin1');
  }
}

interface Exchange {
  readonly sent: Buffer;
  readonly data: Buffer;
  /** closed: the server closed; error: reset/EPIPE; timeout: we gave up (per-request bound). */
  readonly ending: 'closed' | 'error' | 'timeout' | 'idle';
}

function exchange(port: number, data: Buffer, localAddress: string, m: Mutator): Promise<Exchange> {
  const halfClose = m.chance(0.7);
  const split = m.chance(0.2) ? 1 + m.int(Math.max(1, data.length)) : -1;
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let settled = false;
    let idle: NodeJS.Timeout | undefined;
    const socket = net.connect({ port, host: '127.0.0.1', localAddress });
    const finish = (ending: Exchange['ending']): void => {
      if (settled) return;
      settled = true;
      clearTimeout(overall);
      clearTimeout(idle);
      clearTimeout(later);
      socket.destroy();
      resolve({ sent: data, data: Buffer.concat(chunks), ending });
    };
    const overall = setTimeout(() => finish('timeout'), PER_REQUEST_MS);
    let later: NodeJS.Timeout | undefined;
    socket.on('connect', () => {
      if (split < 0 || split >= data.length) {
        socket.write(data);
        if (halfClose) socket.end();
        return;
      }
      socket.write(data.subarray(0, split));
      later = setTimeout(() => {
        if (settled || socket.destroyed) return;
        socket.write(data.subarray(split));
        if (halfClose) socket.end();
      }, 20);
    });
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      clearTimeout(idle);
      idle = setTimeout(() => finish('idle'), IDLE_AFTER_DATA_MS);
    });
    socket.on('error', () => finish('error'));
    socket.on('close', () => finish('closed'));
  });
}

const STATUS_LINE = /^HTTP\/1\.1 (\d{3}) [\x20-\x7e]*$/;
const HEADER_LINE = /^([!#$%&'*+\-.^_`|~0-9A-Za-z]+):[ \t]*([\x20-\x7e\t\x80-\xff]*)$/;

interface ResponseSummary {
  readonly status: number;
  readonly reason: string | null;
}

/** Splits the server's bytes into responses and checks each one; returns the problems found. */
function validate(ex: Exchange, seen: ResponseSummary[]): string[] {
  const problems: string[] = [];
  const buf = ex.data;
  const mayBeHead = /HEAD/i.test(ex.sent.toString('latin1'));
  const truncatedOk = ex.ending !== 'closed';
  let offset = 0;
  while (offset < buf.length) {
    const end = buf.indexOf('\r\n\r\n', offset);
    if (end < 0) {
      if (!truncatedOk) problems.push(`incomplete response head before close: ${JSON.stringify(buf.subarray(offset, offset + 200).toString('latin1'))}`);
      break;
    }
    const head = buf.subarray(offset, end).toString('latin1');
    const [statusLine = '', ...lines] = head.split('\r\n');
    const statusMatch = STATUS_LINE.exec(statusLine);
    if (statusMatch === null) {
      problems.push(`bad status line ${JSON.stringify(statusLine.slice(0, 200))}`);
      break;
    }
    const status = Number(statusMatch[1]);
    const headers = new Map<string, string[]>();
    for (const line of lines) {
      const h = HEADER_LINE.exec(line);
      if (h === null) {
        problems.push(`bad header line ${JSON.stringify(line.slice(0, 200))}`);
        continue;
      }
      const name = (h[1] ?? '').toLowerCase();
      headers.set(name, [...(headers.get(name) ?? []), (h[2] ?? '').trim()]);
    }
    const one = (name: string): string | undefined => headers.get(name)?.[0];
    if (headers.has('proxy-authorization')) problems.push(`response carries Proxy-Authorization (status ${status})`);
    if (head.includes(TOKEN) || head.includes(BASIC)) problems.push(`response head carries the token (status ${status})`);
    if (status >= 500 && status !== 502 && status !== 504) problems.push(`5xx other than 502/504: ${status}`);
    let bodyStart = end + 4;
    if (status >= 100 && status < 200) {
      if (status !== 100) problems.push(`unexpected interim response ${status}`);
      offset = bodyStart;
      continue;
    }
    const proxyStatus = one('proxy-status');
    let reason: string | null = null;
    if (proxyStatus !== undefined) {
      reason = /(?:^|;)\s*details="([a-z_]+)"/.exec(proxyStatus)?.[1] ?? null;
      if (reason === null || !isReasonCode(reason)) problems.push(`Proxy-Status without a known reason code: ${proxyStatus}`);
      else if (Reasons[reason].status !== status) problems.push(`status ${status} does not match ${reason} (${Reasons[reason].status})`);
      if (!/^sluice(;|$)/.test(proxyStatus)) problems.push(`Proxy-Status names another proxy: ${proxyStatus}`);
      seen.push({ status, reason });
      if (reason === 'granted' && status === 200) return problems; // tunnel bytes follow: not HTTP any more
    } else if (!(one('via') ?? '').includes('sluice')) {
      // Not relayed from the origin (no Via) and no Proxy-Status: Sluice (or Node on its behalf) wrote it.
      problems.push(`response without Proxy-Status that was not relayed: ${JSON.stringify(head.slice(0, 300))}`);
      seen.push({ status, reason: null });
    } else {
      seen.push({ status, reason: 'relayed' });
    }
    const length = one('content-length');
    const chunked = /\bchunked\b/i.test(one('transfer-encoding') ?? '');
    if ((headers.get('content-length')?.length ?? 0) > 1) problems.push(`duplicate Content-Length (status ${status})`);
    if (reason !== null && reason !== 'relayed' && length === undefined) problems.push(`Sluice response without Content-Length (${reason})`);
    if (mayBeHead) return problems; // a HEAD response has no body despite its Content-Length (RFC 9110 §9.3.2)
    if (length !== undefined) {
      if (!/^\d+$/.test(length)) {
        problems.push(`bad Content-Length ${length}`);
        break;
      }
      const bodyEnd = bodyStart + Number(length);
      if (bodyEnd > buf.length) {
        if (!truncatedOk) problems.push(`body shorter than Content-Length ${length} before close (status ${status})`);
        break;
      }
      const body = buf.subarray(bodyStart, bodyEnd).toString('latin1');
      if (body.includes(TOKEN) || body.includes(BASIC)) problems.push(`response body carries the token (status ${status})`);
      if (proxyStatus !== undefined && reason !== null && !body.startsWith(`sluice: ${status} ${reason}: `)) problems.push(`denial body does not name ${reason}: ${JSON.stringify(body.slice(0, 120))}`);
      offset = bodyEnd;
    } else if (chunked) {
      let at = bodyStart;
      for (;;) {
        const lineEnd = buf.indexOf('\r\n', at);
        if (lineEnd < 0) {
          if (!truncatedOk) problems.push('chunked body cut before close');
          return problems;
        }
        const size = Number.parseInt(buf.subarray(at, lineEnd).toString('latin1'), 16);
        if (Number.isNaN(size)) {
          problems.push('bad chunk size');
          return problems;
        }
        at = lineEnd + 2 + size + 2;
        if (size === 0) break;
      }
      offset = at;
    } else {
      bodyStart = buf.length; // delimited by close
      offset = bodyStart;
    }
  }
  return problems;
}

function heads(originPort: number, echoPort: number, sluicePort: number): Buffer[] {
  const auth = `Proxy-Authorization: Basic ${BASIC}\r\n`;
  const o = `origin.test:${originPort}`;
  const e = `echo.test:${echoPort}`;
  return [
    `CONNECT ${e} HTTP/1.1\r\nHost: ${e}\r\n${auth}\r\nping`,
    `CONNECT ${e} HTTP/1.1\r\nHost: ${e}\r\nProxy-Authorization: Bearer ${TOKEN}\r\n\r\n`,
    `GET http://${o}/path?q=1 HTTP/1.1\r\nHost: ${o}\r\n${auth}User-Agent: fuzz\r\nAccept: */*\r\n\r\n`,
    `POST http://${o}/submit HTTP/1.1\r\nHost: ${o}\r\n${auth}Content-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello`,
    `POST http://${o}/chunked HTTP/1.1\r\nHost: ${o}\r\n${auth}Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n`,
    `GET http://${o}/a HTTP/1.1\r\nHost: ${o}\r\n${auth}\r\nGET http://${o}/b HTTP/1.1\r\nHost: ${o}\r\n\r\n`,
    `CONNECT example.org:443 HTTP/1.1\r\nHost: example.org:443\r\n${auth}\r\n`,
    `GET http://example.org/ HTTP/1.1\r\nHost: example.org\r\n${auth}\r\n`,
    `GET https://${o}/ HTTP/1.1\r\nHost: ${o}\r\n${auth}\r\n`,
    `CONNECT ${e} HTTP/1.1\r\nHost: ${e}\r\n\r\n`,
    `GET ws://${o}/ws HTTP/1.1\r\nHost: ${o}\r\n${auth}Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n`,
    `CONNECT 127.0.0.1:${sluicePort} HTTP/1.1\r\nHost: 127.0.0.1:${sluicePort}\r\n${auth}\r\n`,
    `POST http://${o}/expect HTTP/1.1\r\nHost: ${o}\r\n${auth}Expect: 100-continue\r\nContent-Length: 2\r\n\r\nok`,
    `GET /origin-form HTTP/1.1\r\nHost: ${o}\r\n${auth}\r\n`,
  ].map((s) => Buffer.from(s, 'latin1'));
}

describe('raw-socket fuzzer', () => {
  let origin: Origin;
  let echo: EchoServer;
  let sluice: TestSluice;
  const logErrors: unknown[][] = [];

  beforeAll(async () => {
    vi.spyOn(silentLog, 'error').mockImplementation((...args: unknown[]) => void logErrors.push(args));
    origin = await startHttpOrigin();
    echo = await startTcpEchoServer();
    sluice = await startSluice(
      {
        grants: [{ id: GRANT, tokenSha256: tokenHash(TOKEN), destinations: [`http://origin.test:${origin.port}`, `ws://origin.test:${origin.port}`, `https://echo.test:${echo.port}`], allowAddressClasses: ['loopback'] }],
        timeouts: { headersMs: 1000, originResponseMs: 2000, dialMs: 1000 },
      },
      { lookup: tableLookup({ 'origin.test': ['127.0.0.1'], 'echo.test': ['127.0.0.1'] }) },
    );
  });
  afterAll(async () => {
    await sluice?.close();
    await origin?.close();
    await echo?.close();
    vi.restoreAllMocks();
  });

  /** A valid GET and a valid CONNECT round trip from a source address the fuzzer never uses. */
  async function control(label: string): Promise<void> {
    const body = await withTimeout(
      new Promise<string>((resolve, reject) => {
        const req = http.request({
          host: '127.0.0.1', port: sluice.port, localAddress: CONTROL_SOURCE, agent: false, method: 'GET',
          path: `http://origin.test:${origin.port}/control`, headers: { host: `origin.test:${origin.port}`, 'proxy-authorization': `Basic ${BASIC}` },
        });
        req.on('response', (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          res.on('end', () => resolve(`${res.statusCode} ${text}`));
        });
        req.on('error', reject);
        req.end();
      }),
      5000,
      `control GET (${label})`,
    );
    expect(body, `control GET (${label})`).toBe('200 origin:GET:/control');
    const echoed = await withTimeout(
      new Promise<string>((resolve, reject) => {
        const req = http.request({
          host: '127.0.0.1', port: sluice.port, localAddress: CONTROL_SOURCE, agent: false, method: 'CONNECT',
          path: `echo.test:${echo.port}`, headers: { 'proxy-authorization': `Basic ${BASIC}` },
        });
        req.on('connect', (res, socket) => {
          if (res.statusCode !== 200) {
            socket.destroy();
            reject(new Error(`CONNECT answered ${res.statusCode}`));
            return;
          }
          socket.once('data', (c: Buffer) => {
            socket.destroy();
            resolve(c.toString());
          });
          socket.write('control-ping');
        });
        req.on('error', reject);
        req.end();
      }),
      5000,
      `control CONNECT (${label})`,
    );
    expect(echoed, `control CONNECT (${label})`).toBe('control-ping');
  }

  it(`survives mutated request heads (≤${MAX_ITERATIONS} requests or ≤${MAX_MS} ms) and answers each with well-formed HTTP/1.1`, async () => {
    console.log(`[fuzz/raw-socket] seed=${SEED} (rerun with SLUICE_FUZZ_SEED=${SEED})`);
    const m = new Mutator(seededRandom(SEED));
    const templates = heads(origin.port, echo.port, sluice.port);
    const seen: ResponseSummary[] = [];
    const failures: string[] = [];
    const endings = { closed: 0, error: 0, timeout: 0, idle: 0 };
    const deadline = Date.now() + MAX_MS;
    let issued = 0;
    let controls = 0;
    const baseline = resourceCounts();
    await control('start');

    // Inputs are drawn in iteration order from the one PRNG, so a seed replays the same inputs.
    const nextInput = (): { data: Buffer; source: string; rand: Mutator } => {
      const base = m.pick(templates);
      const data = m.chance(0.08) ? base : m.mutate(base);
      return { data, source: `127.0.1.${1 + m.int(200)}`, rand: new Mutator(seededRandom(m.int(2 ** 31))) };
    };
    const worker = async (): Promise<void> => {
      while (issued < MAX_ITERATIONS && Date.now() < deadline) {
        issued += 1;
        const n = issued;
        const input = nextInput();
        if (n % CONTROL_EVERY === 0) {
          controls += 1;
          await control(`after ${n} requests`);
        }
        const ex = await exchange(sluice.port, input.data, input.source, input.rand);
        endings[ex.ending] += 1;
        const problems = validate(ex, seen);
        for (const p of problems) {
          if (failures.length < 20) failures.push(`#${n} ${p}\n    sent ${JSON.stringify(input.data.subarray(0, 300).toString('latin1'))}`);
        }
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    await control('end');
    controls += 2;

    const byReason = new Map<string, number>();
    for (const s of seen) byReason.set(`${s.status} ${s.reason ?? '-'}`, (byReason.get(`${s.status} ${s.reason ?? '-'}`) ?? 0) + 1);
    console.log(
      `[fuzz/raw-socket] seed=${SEED} requests=${issued} responses=${seen.length} controls=${controls} endings=${JSON.stringify(endings)}\n` +
        [...byReason].sort((a, b) => b[1] - a[1]).map(([k, v]) => `  ${k}: ${v}`).join('\n'),
    );

    // Every connection ends: Sluice holds no client socket once the fuzzer's sockets are gone.
    await waitUntil(() => sluice.app.listeners.every((l) => l.sockets.size === 0), { timeoutMs: 8000, label: 'Sluice client sockets drained' });
    // Origin keep-alive sockets of the forward relay close within their 4 s idle timeout.
    await expectResourcesSettle(baseline, { label: 'after fuzzing', timeoutMs: 10_000 });
    for (const record of sluice.decisions()) expect(isReasonCode(record.reason), record.reason).toBe(true);
    expect(logErrors, 'Sluice logged a fault while fuzzed').toEqual([]);
    expect(failures, `seed ${SEED}`).toEqual([]);
    expect(seen.length).toBeGreaterThan(100);
  }, MAX_MS + 40_000);

  // Found by the fuzzer: Node's default 'checkExpectation' behaviour writes a 417 for Sluice, before any
  // principal is identified, without Proxy-Status and without a decision record.
  it('answers a request with an unsupported Expect itself, with Proxy-Status and a decision record', async () => {
    const before = sluice.decisions().length;
    const ex = await exchange(
      sluice.port,
      Buffer.from(`GET http://origin.test:${origin.port}/expect HTTP/1.1\r\nHost: origin.test:${origin.port}\r\nProxy-Authorization: Basic ${BASIC}\r\nExpect: nonsense\r\n\r\n`),
      '127.0.0.3',
      new Mutator(() => 0),
    );
    const head = ex.data.toString('latin1').split('\r\n\r\n')[0] ?? '';
    expect(head, 'a response Sluice writes carries Proxy-Status').toMatch(/\r\nProxy-Status: sluice; [^\r\n]*details="[a-z_]+"/i);
    expect(sluice.decisions().length, 'the hop is audited').toBeGreaterThan(before);
  });
});
