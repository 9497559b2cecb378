// Every byte of a CONNECT tunnel arrives, once, in order, both ways at once (ADR 0022). Threat: the
// dialed socket reads into reused buffers; a buffer read into again while a view of it is still queued
// for writing (a slow client, a budget that waits) would silently replace bytes not yet sent. Random data
// of 32-64 MiB each way, random write sizes, each side a slow reader for part of the time, SHA-256
// compared at both ends; with a byte budget, with bytes sent before the 200 is read, and with each side
// half-closing first. The close record must count every byte.
import { createHash, randomBytes } from 'node:crypto';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';
import { waitFor, waitUntil, withTimeout } from '../support/wait.js';
import { seededRandom } from '../support/seeded-random.js';

const TOKEN = 'tok-integrity';
const MiB = 1024 * 1024;
const MAX_WRITE = 300_000;
const SLOW_PHASES = 3;
const SLOW_EVERY = 5 * MiB;
const SLOW_MS = 100;
const TEST_TIMEOUT_MS = 90_000;


const sha = (data: Buffer): string => createHash('sha256').update(data).digest('hex');

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * Writes `data` in random sizes, waiting for 'drain' when asked to, then ends (FIN). A loop turn between
 * writes, so Sluice reads chunks of about the write's size (many below its write high-water mark: a partial
 * write of one then leaves the read buffer's view queued while reading goes on).
 */
async function pump(socket: net.Socket, data: Buffer, next: () => number): Promise<void> {
  let offset = 0;
  while (offset < data.length) {
    const size = 1 + Math.floor(next() * MAX_WRITE);
    const more = socket.write(data.subarray(offset, offset + size));
    offset += size;
    if (!more) await waitFor(socket, 'drain', 30_000);
    else await turn();
  }
  socket.end();
}

/**
 * Hashes what `socket` delivers (after `skip` bytes of response head are taken off by `head`), pausing
 * for SLOW_MS every SLOW_EVERY bytes, SLOW_PHASES times: a slow reader for part of the transfer.
 */
class Reader {
  private readonly hash = createHash('sha256');
  bytes = 0;
  private slowAt = SLOW_EVERY;
  private slowLeft = SLOW_PHASES;
  readonly ended: Promise<void>;

  constructor(private readonly socket: net.Socket) {
    this.ended = new Promise((resolve) => socket.once('end', () => resolve()));
  }

  take(chunk: Buffer): void {
    this.hash.update(chunk);
    this.bytes += chunk.length;
    if (this.slowLeft > 0 && this.bytes >= this.slowAt) {
      this.slowLeft -= 1;
      this.slowAt += SLOW_EVERY;
      this.socket.pause();
      setTimeout(() => this.socket.resume(), SLOW_MS);
    }
  }

  digest(): string {
    return this.hash.digest('hex');
  }
}

type Mode = 'both' | 'early' | 'client-first' | 'origin-first';

interface Exchange {
  readonly up: Buffer;
  readonly down: Buffer;
  readonly mode: Mode;
  readonly seed: number;
}

/** What the origin received, once it saw the client's FIN. */
interface OriginSide {
  readonly received: Promise<{ bytes: number; sha: string }>;
}

describe('CONNECT tunnel integrity: random data both ways through reused read buffers', () => {
  let origin: net.Server;
  let originPort = 0;
  let onOrigin: (socket: net.Socket) => void = (socket) => socket.destroy();
  let sluice: TestSluice;
  let budgeted: TestSluice;

  beforeAll(async () => {
    origin = net.createServer({ allowHalfOpen: true }, (socket) => onOrigin(socket));
    await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
    originPort = (origin.address() as net.AddressInfo).port;
    const grant = { tokenSha256: tokenHash(TOKEN), destinations: [`tcp://origin.test:${originPort}`], allowAddressClasses: ['loopback'] };
    const lookup = tableLookup({ 'origin.test': ['127.0.0.1'] });
    sluice = await startSluice({ grants: [{ id: 'plain', ...grant }] }, { lookup });
    // Large enough for every test: the budget path (take per chunk) runs without ending the tunnel.
    budgeted = await startSluice({ grants: [{ id: 'budget', ...grant, limits: { maxBytes: 4 * 1024 * MiB } }] }, { lookup });
  });
  afterAll(async () => {
    await sluice?.close();
    await budgeted?.close();
    await new Promise<void>((resolve) => (origin ? origin.close(() => resolve()) : resolve()));
  });

  /** Plays the origin for one exchange: sends `down` (after the client's FIN in client-first), hashes what comes up. */
  function playOrigin(x: Exchange): OriginSide {
    let resolve: (value: { bytes: number; sha: string }) => void = () => undefined;
    const received = new Promise<{ bytes: number; sha: string }>((r) => (resolve = r));
    onOrigin = (socket) => {
      socket.on('error', () => undefined);
      const reader = new Reader(socket);
      socket.on('data', (chunk: Buffer) => reader.take(chunk));
      const next = seededRandom(x.seed + 1);
      void reader.ended.then(() => resolve({ bytes: reader.bytes, sha: reader.digest() }));
      if (x.mode === 'client-first') void reader.ended.then(() => pump(socket, x.down, next));
      else void pump(socket, x.down, next);
    };
    return { received };
  }

  async function exchange(target: TestSluice, mode: Mode): Promise<void> {
    const seed = Math.floor(Math.random() * 2 ** 31);
    const size = (): number => 32 * MiB + Math.floor(Math.random() * 32 * MiB);
    const x: Exchange = { up: randomBytes(size()), down: randomBytes(size()), mode, seed };
    const closesBefore = target.closes().length;
    const originSide = playOrigin(x);
    const client = net.connect({ port: target.port, host: '127.0.0.1', allowHalfOpen: true });
    client.on('error', () => undefined);
    await waitFor(client, 'connect', 5000);
    const next = seededRandom(seed);
    const reader = new Reader(client);
    let head: Buffer | null = Buffer.alloc(0);
    let established: () => void = () => undefined;
    const answered = new Promise<void>((resolve) => (established = resolve));
    client.on('data', (chunk: Buffer) => {
      if (head === null) return reader.take(chunk);
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      expect(head.subarray(0, end).toString('latin1')).toMatch(/^HTTP\/1\.1 200 /);
      const rest = head.subarray(end + 4);
      head = null;
      established();
      if (rest.length > 0) reader.take(rest);
    });
    const connectHead = `CONNECT origin.test:${originPort} HTTP/1.1\r\nHost: origin.test:${originPort}\r\nProxy-Authorization: Bearer ${TOKEN}\r\n\r\n`;
    let upload: Promise<void>;
    if (mode === 'early') {
      // The head and the first bytes in one write, and the rest pumped at once: none waits for the 200.
      const first = 1 + Math.floor(next() * MAX_WRITE);
      client.write(Buffer.concat([Buffer.from(connectHead, 'latin1'), x.up.subarray(0, first)]));
      upload = pump(client, x.up.subarray(first), next);
      await answered;
    } else {
      client.write(connectHead);
      await answered;
      upload = mode === 'origin-first' ? reader.ended.then(() => pump(client, x.up, next)) : pump(client, x.up, next);
    }
    const [down, up] = await withTimeout(Promise.all([reader.ended.then(() => ({ bytes: reader.bytes, sha: reader.digest() })), originSide.received, upload]), TEST_TIMEOUT_MS - 5000, `${mode} exchange (seed ${seed})`);
    expect({ bytes: up.bytes, sha: up.sha }, `upload, seed ${seed}`).toEqual({ bytes: x.up.length, sha: sha(x.up) });
    expect({ bytes: down.bytes, sha: down.sha }, `download, seed ${seed}`).toEqual({ bytes: x.down.length, sha: sha(x.down) });
    client.end();
    await waitUntil(() => target.closes().length > closesBefore, { timeoutMs: 10_000, label: 'the close record' });
    const record = target.closes()[closesBefore];
    expect({ bytesUp: record?.bytesUp, bytesDown: record?.bytesDown }).toEqual({ bytesUp: x.up.length, bytesDown: x.down.length });
  }

  it('relays both directions at once, each reader slow for a while', async () => {
    await exchange(sluice, 'both');
  }, TEST_TIMEOUT_MS);

  it('relays both directions at once through a grant with a byte budget (maxBytes)', async () => {
    await exchange(budgeted, 'both');
  }, TEST_TIMEOUT_MS);

  it('relays bytes the client sent right after its CONNECT, before it read the 200', async () => {
    await exchange(sluice, 'early');
  }, TEST_TIMEOUT_MS);

  it('relays the download after the client half-closed its upload', async () => {
    await exchange(sluice, 'client-first');
  }, TEST_TIMEOUT_MS);

  it('relays the upload after the origin half-closed its download', async () => {
    await exchange(budgeted, 'origin-first');
  }, TEST_TIMEOUT_MS);
});
