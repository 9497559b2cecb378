// Threat: a principal downloads (or uploads) more than its grant's byte budget through absolute-form
// requests. Review 2026-12 finding 6: with `limits.maxBytes: 2000`, one GET through Sluice fetched a
// whole 1 MiB file and five parallel GETs fetched 5 MiB, because the budget was checked only before
// forwarding and charged only after the response. A forwarded request must count its bytes against the
// grant's budget while they stream, both directions and shared by every request of the grant, and end
// the response at the budget (close reason `byte_limit`), as a CONNECT tunnel does. The bound stated in
// docs/configuration.md: the bytes relayed never pass maxBytes, and the bytes counted pass it by at most
// the one refused chunk (one socket read, at most 64 KiB) of each request or tunnel in flight.
import type http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpOrigin, type Origin } from '../support/origins.js';
import { parseResponseHead, rawRequest, type RawResponse } from '../support/raw-client.js';
import { startRecorder, type Recorder } from '../support/recorder.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';
import { waitUntil } from '../support/wait.js';

const MIB = 1024 * 1024;
const MAX_BYTES = 2000;
/** One socket read: Node (libuv) reads at most 64 KiB at a time, so no relayed chunk is larger. */
const CHUNK = 64 * 1024;
const BIG = Buffer.alloc(MIB, 0x61);

const GRANTS = ['one', 'five', 'race', 'upload', 'free'] as const;
type GrantId = (typeof GRANTS)[number];
const token = (id: GrantId): string => `tok-budget-${id}`;
const auth = (id: GrantId): string => `Basic ${Buffer.from(`${id}:${token(id)}`).toString('base64')}`;

interface Download {
  readonly status: number;
  readonly head: string;
  readonly bodyBytes: number;
  readonly closed: boolean;
}

function download(response: RawResponse): Download {
  const head = parseResponseHead(response.data);
  return {
    status: head?.status ?? 0,
    head: head?.head ?? '',
    bodyBytes: head === null ? 0 : response.data.length - head.headLength,
    closed: response.closed,
  };
}

const dripping: http.ServerResponse[] = [];

/** Writes 512 bytes to each response in turn every millisecond until each is closed (or 1 MiB is sent). */
function drip(responses: readonly http.ServerResponse[]): void {
  const piece = BIG.subarray(0, 512);
  let sent = 0;
  const timer = setInterval(() => {
    for (const res of responses) if (!res.destroyed) res.write(piece);
    sent += piece.length;
    if (sent >= MIB || responses.every((res) => res.destroyed)) {
      clearInterval(timer);
      for (const res of responses) res.destroy();
    }
  }, 1);
}

describe('review 2026-12 finding 6: limits.maxBytes bounds forwarded requests', () => {
  let origin: Origin;
  let recorder: Recorder;
  let sluice: TestSluice;

  beforeAll(async () => {
    origin = await startHttpOrigin({
      handler: (req, res) => {
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': BIG.length });
        if (req.url !== '/drip.bin') return void res.end(BIG);
        // Heads first; bodies only once five requests are in flight, then in small interleaved pieces,
        // so all five are mid-body at once and take from the budget in turn.
        res.flushHeaders();
        dripping.push(res);
        if (dripping.length === 5) drip(dripping.splice(0));
      },
    });
    // The upload grant reaches the origin through a recorder, which counts what the origin is sent.
    recorder = await startRecorder(origin.port);
    const grant = (id: GrantId, port: number, maxBytes?: number): Record<string, unknown> => ({
      id,
      tokenSha256: tokenHash(token(id)),
      destinations: [`http://web.test:${port}`],
      allowAddressClasses: ['loopback'],
      limits: maxBytes === undefined ? {} : { maxBytes },
    });
    sluice = await startSluice(
      {
        grants: [grant('one', origin.port, MAX_BYTES), grant('five', origin.port, MAX_BYTES), grant('race', origin.port, MAX_BYTES), grant('upload', recorder.port, MAX_BYTES), grant('free', origin.port)],
      },
      { lookup: tableLookup({ 'web.test': ['127.0.0.1'] }) },
    );
  });
  afterAll(async () => {
    await sluice?.close();
    await recorder?.close();
    await origin?.close();
  });

  const get = (id: GrantId, path = '/big.bin'): Promise<RawResponse> =>
    rawRequest(sluice.port, `GET http://web.test:${origin.port}${path} HTTP/1.1\r\nHost: web.test:${origin.port}\r\nProxy-Authorization: ${auth(id)}\r\n\r\n`, { timeoutMs: 10_000 });
  const counted = (id: GrantId): number => sluice.app.runtime.registry.usageOf(id).bytes;
  const closesOf = (id: GrantId): number => sluice.closes().filter((r) => r.principal === id).length;

  it('one request with maxBytes 2000 downloads at most 2000 bytes (and a chunk), and the connection ends mid-body', async () => {
    const got = download(await get('one'));
    expect(got.status).toBe(200);
    expect(got.closed).toBe(true);
    expect(got.bodyBytes).toBeLessThanOrEqual(MAX_BYTES);
    expect(got.bodyBytes).toBeLessThanOrEqual(MAX_BYTES + CHUNK);
    expect(counted('one')).toBeLessThanOrEqual(MAX_BYTES + CHUNK);
  });

  it('records the close of that request as byte_limit', async () => {
    await waitUntil(() => closesOf('one') >= 1, { timeoutMs: 3000, label: 'a close record for grant one' });
    const close = sluice.closes().find((r) => r.principal === 'one');
    expect(close).toMatchObject({ closedBy: 'byte_limit', status: 200 });
    expect((close?.bytesUp ?? 0) + (close?.bytesDown ?? 0)).toBe(counted('one'));
  });

  it('answers a later request of the grant 429 byte_limit_reached, before anything is forwarded', async () => {
    const before = origin.requests.length;
    const got = await get('one');
    const head = parseResponseHead(got.data);
    expect(head?.status).toBe(429);
    expect(head?.headers['proxy-status']).toContain('details="byte_limit_reached"');
    expect(origin.requests.length).toBe(before);
  });

  it('five parallel requests mid-body at once share one budget: together at most 2000 bytes (and five chunks)', async () => {
    const results = (await Promise.all([1, 2, 3, 4, 5].map(() => get('five', '/drip.bin')))).map(download);
    let total = 0;
    for (const got of results) {
      // Every head was relayed before any body byte was counted; every body was then cut off.
      expect(got).toMatchObject({ status: 200, closed: true });
      total += got.bodyBytes;
    }
    expect(total).toBeLessThanOrEqual(MAX_BYTES);
    expect(total).toBeLessThanOrEqual(MAX_BYTES + 5 * CHUNK);
    expect(counted('five')).toBeLessThanOrEqual(MAX_BYTES + 5 * CHUNK);
    await waitUntil(() => closesOf('five') >= 5, { timeoutMs: 3000, label: 'a close record per request' });
    expect(sluice.closes().filter((r) => r.principal === 'five').map((r) => r.closedBy)).toEqual(Array(5).fill('byte_limit'));
    expect(download(await get('five')).status).toBe(429);
  });

  it('five parallel requests racing the budget: those whose head comes after it is spent get 429, not the response', async () => {
    const results = (await Promise.all([1, 2, 3, 4, 5].map(() => get('race')))).map(download);
    let total = 0;
    for (const got of results) {
      expect([200, 429]).toContain(got.status);
      if (got.status === 200) {
        expect(got.closed).toBe(true);
        total += got.bodyBytes;
      }
    }
    expect(total).toBeLessThanOrEqual(MAX_BYTES + 5 * CHUNK);
    expect(counted('race')).toBeLessThanOrEqual(MAX_BYTES + 5 * CHUNK);
    const forwarded = results.filter((r) => r.status === 200).length;
    await waitUntil(() => closesOf('race') >= forwarded, { timeoutMs: 3000, label: 'a close record per forwarded request' });
    for (const close of sluice.closes().filter((r) => r.principal === 'race')) expect(close.closedBy).toBe('byte_limit');
    const refused = sluice.decisions().filter((r) => r.principal === 'race' && r.reason === 'byte_limit_reached').length;
    expect(refused).toBe(5 - forwarded);
  });

  it('counts the request body too: an upload stops at the budget and is answered 429 byte_limit_reached', async () => {
    const head = `POST http://web.test:${recorder.port}/upload HTTP/1.1\r\nHost: web.test:${recorder.port}\r\nProxy-Authorization: ${auth('upload')}\r\nContent-Length: ${BIG.length}\r\n\r\n`;
    const got = await rawRequest(sluice.port, Buffer.concat([Buffer.from(head), BIG]), { timeoutMs: 10_000 });
    // The client may see the 429, or a reset if the close beat its unread upload; never the origin's 200.
    const answer = parseResponseHead(got.data);
    if (got.data.length > 0) {
      expect(answer?.status).toBe(429);
      expect(answer?.headers['proxy-status']).toContain('details="byte_limit_reached"');
    }
    await waitUntil(() => sluice.decisions().some((r) => r.principal === 'upload' && r.reason === 'byte_limit_reached'), { timeoutMs: 3000, label: 'the upload refused with byte_limit_reached' });
    // What the origin was sent: the request head (well under 1 KiB) and at most the budget of body.
    expect(recorder.received().length).toBeLessThanOrEqual(1024 + MAX_BYTES);
    expect(counted('upload')).toBeLessThanOrEqual(MAX_BYTES + CHUNK);
  });

  it('leaves a grant without maxBytes unaffected: the whole 1 MiB arrives, every time', async () => {
    for (let i = 0; i < 2; i += 1) expect(download(await get('free'))).toMatchObject({ status: 200, bodyBytes: MIB, closed: false });
    await waitUntil(() => closesOf('free') >= 2, { timeoutMs: 3000, label: 'close records for grant free' });
    expect(sluice.closes().filter((r) => r.principal === 'free').map((r) => r.closedBy)).toEqual(['completed', 'completed']);
    expect(counted('free')).toBe(2 * MIB);
  });
});
