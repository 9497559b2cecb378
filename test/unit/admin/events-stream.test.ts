// Specifies GET /v1/events (issue 27 item 2) at the admin layer: the query and Last-Event-ID parsing, the
// SSE framing, resume without loss or duplicates, the `gap` a reader gets when the ring no longer holds what
// it missed or when it stopped reading (bounded queue, never a wait in the publish path), the keep-alive,
// and through the admin server: authentication, 405/400/404, a `grant` event per issue, revoke, forget,
// rotate and generation revoke that never carries the token, and a close that does not wait on a stream.
import { EventEmitter } from 'node:events';
import fs from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { adminTokenSha256, startAdminServer, type AdminServer } from '../../../src/admin/index.js';
import { EVENT_STREAM_LIMITS, EventStream, parseEventsRequest, type EventStreamLimits, type EventsRequest } from '../../../src/admin/events-stream.js';
import { isUnixSocketAlive } from '../../../src/egress/index.js';
import { DEFAULT_EVENT_RING_CAPACITY, EventRing } from '../../../src/telemetry/index.js';
import { readDoc } from '../../architecture/markdown.js';
import { openSse, openStream, type SseEvent, type SseStream } from '../../support/sse-client.js';
import { waitUntil } from '../../support/wait.js';
import { FakeControl, call, captureLog, type Target } from './fake-control.js';

const A = { grant: 'a', generation: 'run-1' } as const;
const B = { grant: 'b', generation: null } as const;

const query = (q: string): URLSearchParams => new URLSearchParams(q);

describe('parseEventsRequest', () => {
  it.each([
    ['', undefined, { filter: {}, lastEventId: null }],
    ['grant=sandbox-a', undefined, { filter: { grant: 'sandbox-a' }, lastEventId: null }],
    ['generation=run-7&grant=g-1', '42', { filter: { grant: 'g-1', generation: 'run-7' }, lastEventId: 42 }],
    ['kind=decision,ask', '0', { filter: { kinds: new Set(['decision', 'ask']) }, lastEventId: 0 }],
    ['kind=grant&kind=ask_answered', undefined, { filter: { kinds: new Set(['grant', 'ask_answered']) }, lastEventId: null }],
    ['other=ignored', ' 7 ', { filter: {}, lastEventId: 7 }],
  ])('?%s with Last-Event-ID %j → %j', (q, header, expected) => {
    expect(parseEventsRequest(query(q), header)).toEqual({ ok: true, value: expected });
  });

  it.each([
    ['kind=decision,nonsense', undefined, 'kind_invalid', 'kind'],
    ['kind=', undefined, 'kind_invalid', 'kind'],
    // A gap is not asked for: every reader gets its gaps.
    ['kind=gap', undefined, 'kind_invalid', 'kind'],
    ['grant=', undefined, 'grant_id_invalid', 'grant'],
    ['grant=a/b', undefined, 'grant_id_invalid', 'grant'],
    ['grant=a&grant=b', undefined, 'grant_id_invalid', 'grant'],
    [`generation=${'x'.repeat(129)}`, undefined, 'generation_invalid', 'generation'],
    ['generation=a%20b', undefined, 'generation_invalid', 'generation'],
    ['', 'abc', 'last_event_id_invalid', 'Last-Event-ID'],
    ['', '-1', 'last_event_id_invalid', 'Last-Event-ID'],
    ['', '1.5', 'last_event_id_invalid', 'Last-Event-ID'],
    ['', '', 'last_event_id_invalid', 'Last-Event-ID'],
    ['', '01', 'last_event_id_invalid', 'Last-Event-ID'],
    ['', '1, 2', 'last_event_id_invalid', 'Last-Event-ID'],
    ['', '9'.repeat(16), 'last_event_id_invalid', 'Last-Event-ID'],
  ])('?%s with Last-Event-ID %j → %s at %s', (q, header, error, at) => {
    const parsed = parseEventsRequest(query(q), header);
    expect(parsed).toMatchObject({ ok: false, error, issues: [{ path: at }] });
  });
});

/** A ServerResponse whose socket takes a write only while `accepting`: every chunk is recorded as written. */
class FakeResponse extends EventEmitter {
  readonly chunks: string[] = [];
  accepting = true;
  isEnded = false;
  isDestroyed = false;
  status = 0;
  writeHead(status: number): this {
    this.status = status;
    return this;
  }
  flushHeaders(): void {}
  write(chunk: string): boolean {
    this.chunks.push(chunk);
    return this.accepting;
  }
  end(): void {
    this.isEnded = true;
    this.emit('close');
  }
  destroy(): void {
    this.isDestroyed = true;
    this.emit('close');
  }
  /** The ids and names of what was written, in order (gaps with their data). */
  written(): string[] {
    return this.chunks.map((c) => {
      const id = /^id: (\d+)/.exec(c)?.[1];
      const event = /\nevent: (\w+)/.exec(c)?.[1];
      return event === 'gap' ? `gap ${id} ${/\ndata: (.*)/.exec(c)?.[1]}` : `${event} ${id}`;
    });
  }
}

function fakeStream(ring: EventRing, request: EventsRequest, limits: Partial<EventStreamLimits> = {}): { res: FakeResponse; stream: EventStream } {
  const res = new FakeResponse();
  const stream = new EventStream(ring, res as unknown as http.ServerResponse, request, { ...EVENT_STREAM_LIMITS, ...limits });
  return { res, stream };
}

const LIVE: EventsRequest = { filter: {}, lastEventId: null };

describe('EventStream framing, resume and gaps (a response whose socket is scripted)', () => {
  it('writes each event as id, event and one line of JSON data, and starts at the newest event without Last-Event-ID', () => {
    const ring = new EventRing(10);
    ring.publish('grant', A, { action: 'issue' });
    const { res, stream } = fakeStream(ring, LIVE);
    expect(res.status).toBe(200);
    expect(res.chunks).toEqual([]);
    ring.publish('decision', A, { reason: 'granted', note: 'two\nlines' });
    expect(res.chunks).toEqual(['id: 2\nevent: decision\ndata: {"reason":"granted","note":"two\\nlines"}\n\n']);
    stream.end();
  });

  it('resumes after Last-Event-ID: the backlog, then live events, each exactly once, filtered alike', () => {
    const ring = new EventRing(10);
    for (let i = 0; i < 4; i++) ring.publish('decision', i % 2 === 0 ? A : B, {});
    const { res, stream } = fakeStream(ring, { filter: { grant: 'a' }, lastEventId: 0 });
    ring.publish('decision', A, {});
    ring.publish('decision', B, {});
    ring.publish('grant', A, {});
    expect(res.written()).toEqual(['decision 1', 'decision 3', 'decision 5', 'grant 7']);
    stream.end();
  });

  it('opens with a ring gap (id = the last id lost) when the ring no longer holds what the reader missed', () => {
    const ring = new EventRing(3);
    for (let i = 0; i < 8; i++) ring.publish('decision', A, {});
    const { res, stream } = fakeStream(ring, { filter: { kinds: new Set(['decision']) }, lastEventId: 2 });
    expect(res.written()).toEqual(['gap 5 {"from":3,"to":5,"reason":"ring"}', 'decision 6', 'decision 7', 'decision 8']);
    stream.end();
  });

  it('answers an id this process never wrote (an earlier Sluice) with a restart gap at id 0, then all the ring holds', () => {
    const ring = new EventRing(5);
    for (let i = 0; i < 3; i++) ring.publish('decision', A, {});
    const { res, stream } = fakeStream(ring, { filter: {}, lastEventId: 5000 });
    ring.publish('decision', A, {});
    expect(res.written()).toEqual(['gap 0 {"from":null,"to":null,"reason":"restart"}', 'decision 1', 'decision 2', 'decision 3', 'decision 4']);
    stream.end();
  });

  it('queues at most maxQueuedEvents while the socket is full, drops the rest, and after the drain writes the queue, one gap, then live', () => {
    const ring = new EventRing(1000);
    const { res, stream } = fakeStream(ring, LIVE, { maxQueuedEvents: 3 });
    res.accepting = false;
    for (let i = 0; i < 10; i++) ring.publish('decision', A, { i });
    // Event 1 was taken (the socket said "no more" after it); 2-4 queued; 5-10 dropped.
    expect(res.written()).toEqual(['decision 1']);
    res.accepting = true;
    res.emit('drain');
    ring.publish('decision', A, {});
    expect(res.written()).toEqual(['decision 1', 'decision 2', 'decision 3', 'decision 4', 'gap 10 {"from":5,"to":10,"reason":"slow_reader"}', 'decision 11']);
    stream.end();
  });

  it('bounds the queue in bytes too (maxQueuedBytes)', () => {
    const ring = new EventRing(1000);
    const payload = { pad: 'x'.repeat(200) };
    const one = Buffer.byteLength(`id: 2\nevent: decision\ndata: ${JSON.stringify(payload)}\n\n`);
    const { res, stream } = fakeStream(ring, LIVE, { maxQueuedEvents: 1000, maxQueuedBytes: one * 2 });
    res.accepting = false;
    for (let i = 0; i < 6; i++) ring.publish('decision', A, payload);
    res.accepting = true;
    res.emit('drain');
    expect(res.written()).toEqual(['decision 1', 'decision 2', 'decision 3', 'gap 6 {"from":4,"to":6,"reason":"slow_reader"}']);
    stream.end();
  });

  it('keeps dropping until the gap is written, so the gap sits exactly where the dropped ids were', () => {
    const ring = new EventRing(1000);
    const { res, stream } = fakeStream(ring, LIVE, { maxQueuedEvents: 2 });
    res.accepting = false;
    for (let i = 0; i < 5; i++) ring.publish('decision', A, {}); // 1 written; 2, 3 queued; 4, 5 dropped
    // The drain empties the queue but the socket fills again on its last write: the gap waits.
    let budget = 2;
    res.write = (chunk: string): boolean => {
      res.chunks.push(chunk);
      budget -= 1;
      return budget > 0;
    };
    res.emit('drain');
    ring.publish('decision', A, {}); // 6: dropped, with room in the queue, because a gap is owed before it
    res.write = (chunk: string): boolean => (res.chunks.push(chunk), true);
    res.emit('drain');
    ring.publish('decision', A, {});
    expect(res.written()).toEqual(['decision 1', 'decision 2', 'decision 3', 'gap 6 {"from":4,"to":6,"reason":"slow_reader"}', 'decision 7']);
    stream.end();
  });

  it('ends a reader that stopped reading by destroying its response, and a live one by ending it; both unsubscribe', () => {
    const ring = new EventRing(10);
    const live = fakeStream(ring, LIVE);
    const stalled = fakeStream(ring, LIVE);
    stalled.res.accepting = false;
    ring.publish('decision', A, {});
    expect(ring.subscriberCount).toBe(2);
    let closed = 0;
    live.stream.onClose(() => (closed += 1));
    live.stream.end();
    stalled.stream.end();
    expect([live.res.isEnded, live.res.isDestroyed, stalled.res.isEnded, stalled.res.isDestroyed]).toEqual([true, false, false, true]);
    expect(ring.subscriberCount).toBe(0);
    expect(closed).toBe(1);
    live.stream.onClose(() => (closed += 1));
    expect(closed).toBe(2);
  });
});

describe('EventStream over a real socket', () => {
  let dir: string;
  let server: http.Server;
  const ring = new EventRing(100_000);
  let limits: EventStreamLimits = EVENT_STREAM_LIMITS;
  const open: EventStream[] = [];
  let target: Target;

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'sluice-sse-'));
    server = http.createServer((req, res) => {
      const parsed = parseEventsRequest(new URL(req.url ?? '/', 'http://t').searchParams, req.headers['last-event-id']);
      if (!parsed.ok) return void res.writeHead(400).end();
      open.push(new EventStream(ring, res, parsed.value, limits));
    });
    const socketPath = path.join(dir, 'sse.sock');
    await new Promise<void>((resolve) => server.listen(socketPath, resolve));
    target = { socketPath };
  });
  afterEach(() => {
    for (const stream of open.splice(0)) stream.end();
    limits = EVENT_STREAM_LIMITS;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('sends the SSE headers and a keep-alive comment while quiet', async () => {
    limits = { ...EVENT_STREAM_LIMITS, keepAliveMs: 20 };
    const stream = await openStream(target, '/');
    expect(stream.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(stream.headers['cache-control']).toBe('no-store');
    await stream.until((s) => s.comments.length >= 2, 3000, 'two keep-alive comments');
    expect(stream.comments[0]).toBe('keep-alive');
    expect(stream.events).toEqual([]);
    await stream.close();
  });

  it('unsubscribes when the reader goes', async () => {
    const before = ring.subscriberCount;
    const stream = await openStream(target, '/');
    await waitUntil(() => ring.subscriberCount === before + 1, { timeoutMs: 2000, label: 'subscribed' });
    await stream.close();
    await waitUntil(() => ring.subscriberCount === before, { timeoutMs: 2000, label: 'unsubscribed after the reader left' });
  });

  it('a reader that stops reading costs the publisher nothing: it gets what fit, one gap naming every id it lost, then live events', async () => {
    limits = { ...EVENT_STREAM_LIMITS, maxQueuedEvents: 50 };
    const stream = await openStream(target, '/');
    await waitUntil(() => open.length === 1, { timeoutMs: 2000, label: 'the server stream' });
    stream.pause();
    const first = ring.lastId + 1;
    const pad = 'p'.repeat(1000);
    const started = performance.now();
    for (let i = 0; i < 20_000; i++) ring.publish('decision', A, { i, pad });
    const publishMs = performance.now() - started;
    const last = ring.lastId;
    stream.resume();
    await stream.until((s) => s.events.some((e) => e.event === 'gap'), 10_000, 'the slow_reader gap');
    ring.publish('grant', B, { after: true });
    await stream.until((s) => s.events.at(-1)?.event === 'grant', 5000, 'the live event after the gap');
    const ids = stream.events.map((e: SseEvent) => Number(e.id));
    const gapAt = stream.events.findIndex((e) => e.event === 'gap');
    const gap = JSON.parse(stream.events[gapAt]!.data) as { from: number; to: number; reason: string };
    const before = ids.slice(0, gapAt);
    // Every id is either received, in order and once, or inside the one gap: none lost silently.
    expect(before).toEqual(Array.from({ length: before.length }, (_, k) => first + k));
    expect(gap).toEqual({ from: first + before.length, to: last, reason: 'slow_reader' });
    expect(ids[gapAt]).toBe(last);
    expect(ids.slice(gapAt + 1)).toEqual([last + 1]);
    expect(before.length).toBeLessThan(20_000);
    // 20 MB published to a stalled reader in one synchronous loop: bounded by the queue, not by the reader.
    expect(publishMs).toBeLessThan(5000);
    await stream.close();
  });
});

describe('GET /v1/events on the admin server', () => {
  let dir: string;
  let server: AdminServer;
  let unix: Target;
  const ring = new EventRing(1000);
  const control = new FakeControl();
  const capture = captureLog();

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'sluice-admin-events-'));
    const socketPath = path.join(dir, 'admin.sock');
    server = await startAdminServer({ listen: `unix:${socketPath}`, control, adminTokenSha256: null, log: capture.log, isUnixSocketAlive, events: ring });
    unix = { socketPath };
  });
  afterAll(async () => {
    await server.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  const post = (p: string, body: unknown): ReturnType<typeof call> => call(unix, 'POST', p, { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });

  it('is documented in docs/admin-api.md with its own section and example', () => {
    const doc = readDoc('docs/admin-api.md');
    expect(doc).toMatch(/^### `GET \/v1\/events`/m);
    expect(doc).toContain('curl -N --unix-socket');
    // The numbers the section promises are the ones the code holds.
    const section = doc.slice(doc.indexOf('### `GET /v1/events`'));
    expect(section).toContain(`the newest ${DEFAULT_EVENT_RING_CAPACITY.toLocaleString('en-US')} events`);
    expect(section).toContain(`at most ${EVENT_STREAM_LIMITS.maxQueuedEvents.toLocaleString('en-US')} of them or ${EVENT_STREAM_LIMITS.maxQueuedBytes / 1024 / 1024} MiB`);
    expect(section).toContain(`every ${EVENT_STREAM_LIMITS.keepAliveMs / 1000} seconds`);
  });

  it('answers 405 with Allow: GET to another method, and 400 for a bad filter or Last-Event-ID, as JSON', async () => {
    const posted = await call(unix, 'POST', '/v1/events');
    expect(posted).toMatchObject({ status: 405, json: { error: 'method_not_allowed' } });
    expect(posted.headers['allow']).toBe('GET');
    expect(await call(unix, 'GET', '/v1/events?kind=decision,bogus')).toMatchObject({ status: 400, json: { error: 'kind_invalid', issues: [{ path: 'kind' }] } });
    expect(await call(unix, 'GET', '/v1/events?grant=a%2Fb')).toMatchObject({ status: 400, json: { error: 'grant_id_invalid' } });
    expect(await call(unix, 'GET', '/v1/events?generation=%20')).toMatchObject({ status: 400, json: { error: 'generation_invalid' } });
    expect(await call(unix, 'GET', '/v1/events', { headers: { 'last-event-id': 'latest' } })).toMatchObject({ status: 400, json: { error: 'last_event_id_invalid' } });
    expect(capture.lines.filter((l) => (l.obj as { route?: string }).route === '/v1/events').map((l) => (l.obj as { status: number }).status)).toEqual([405, 400, 400, 400, 400]);
  });

  it('publishes a grant event for issue, rotate, revoke, forget and each grant of a generation revoke, never with a token', async () => {
    const stream = await openStream(unix, '/v1/events?kind=grant');
    const issued = (await post('/v1/grants', { destinations: ['https://a.example'], generation: 'gen-e' })).json as { id: string; token: string };
    const second = (await post('/v1/grants', { destinations: ['https://b.example'], generation: 'gen-e' })).json as { id: string };
    const third = (await post('/v1/grants', { destinations: ['https://c.example'] })).json as { id: string };
    const rotated = (await post(`/v1/grants/${issued.id}/rotate`, {})).json as { token: string };
    expect((await call(unix, 'DELETE', `/v1/grants/${third.id}`)).status).toBe(200);
    expect((await call(unix, 'POST', `/v1/grants/${third.id}/forget`)).status).toBe(200);
    expect((await call(unix, 'POST', '/v1/generations/gen-e/revoke')).status).toBe(200);
    // A refused change publishes nothing.
    expect((await call(unix, 'DELETE', '/v1/grants/g-none')).status).toBe(404);
    await stream.until((s) => s.events.length === 8, 5000, 'eight grant events');
    expect(stream.events.map((e) => e.event)).toEqual(Array(8).fill('grant'));
    const data = stream.data('grant').map(({ ts, ...rest }) => {
      expect(String(ts)).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      return rest;
    });
    expect(data).toEqual([
      { action: 'issue', grant: issued.id, generation: 'gen-e' },
      { action: 'issue', grant: second.id, generation: 'gen-e' },
      { action: 'issue', grant: third.id, generation: null },
      { action: 'rotate', grant: issued.id, generation: 'gen-e' },
      { action: 'revoke', grant: third.id, generation: null },
      { action: 'forget', grant: third.id, generation: null },
      { action: 'revoke', grant: issued.id, generation: 'gen-e' },
      { action: 'revoke', grant: second.id, generation: 'gen-e' },
    ]);
    for (const token of [issued.token, rotated.token, ...control.issuedTokens]) expect(stream.raw).not.toContain(token);
    await stream.close();
  });

  it('filters by grant and generation', async () => {
    const byGrant = await openStream(unix, '/v1/events?grant=g-x');
    const byGeneration = await openStream(unix, '/v1/events?generation=run-1');
    ring.publish('decision', { grant: 'g-x', generation: null }, { n: 1 });
    ring.publish('decision', A, { n: 2 });
    ring.publish('decision', B, { n: 3 });
    await byGrant.until((s) => s.events.length >= 1, 3000, 'the g-x event');
    await byGeneration.until((s) => s.events.length >= 1, 3000, 'the run-1 event');
    ring.publish('ask', { grant: 'g-x', generation: 'run-1' }, { n: 4 });
    await byGrant.until((s) => s.events.length >= 2, 3000, 'the second g-x event');
    await byGeneration.until((s) => s.events.length >= 2, 3000, 'the second run-1 event');
    expect(byGrant.data('decision').concat(byGrant.data('ask'))).toEqual([{ n: 1 }, { n: 4 }]);
    expect(byGeneration.events.map((e) => JSON.parse(e.data) as unknown)).toEqual([{ n: 2 }, { n: 4 }]);
    await byGrant.close();
    await byGeneration.close();
  });

  it('resumes with Last-Event-ID on a new connection: what was missed, then live, each once', async () => {
    const first = await openStream(unix, '/v1/events?kind=decision');
    ring.publish('decision', A, { n: 'one' });
    await first.until((s) => s.events.length === 1, 3000, 'the first event');
    const seen = first.events[0]!.id!;
    await first.close();
    ring.publish('decision', A, { n: 'two' });
    ring.publish('grant', A, { n: 'not a decision' });
    ring.publish('decision', A, { n: 'three' });
    const again = await openStream(unix, '/v1/events?kind=decision', { 'last-event-id': seen });
    ring.publish('decision', A, { n: 'four' });
    await again.until((s) => s.events.length >= 3, 3000, 'three events after the resume');
    expect(again.data('decision')).toEqual([{ n: 'two' }, { n: 'three' }, { n: 'four' }]);
    await again.close();
  });

  it('closes promptly with streams open, a stalled one included (no wait for CLOSE_GRACE_MS)', async () => {
    const socketPath = path.join(dir, 'closing.sock');
    const closing = await startAdminServer({ listen: `unix:${socketPath}`, control, adminTokenSha256: null, log: captureLog().log, isUnixSocketAlive, events: ring });
    const reading = await openStream({ socketPath }, '/v1/events');
    const stalled = await openStream({ socketPath }, '/v1/events');
    stalled.pause();
    for (let i = 0; i < 5000; i++) ring.publish('decision', A, { pad: 'q'.repeat(500) });
    const started = performance.now();
    await closing.close();
    expect(performance.now() - started).toBeLessThan(1000);
    await reading.until((s) => s.isEnded, 2000, 'the reading stream ended');
    await stalled.close();
  });

  it('without a ring the route answers 404', async () => {
    const socketPath = path.join(dir, 'no-ring.sock');
    const bare = await startAdminServer({ listen: `unix:${socketPath}`, control, adminTokenSha256: null, log: captureLog().log, isUnixSocketAlive });
    expect(await call({ socketPath }, 'GET', '/v1/events')).toMatchObject({ status: 404, json: { error: 'not_found' } });
    await bare.close();
  });

  it('requires the admin bearer token when one is configured, and never shows it in the stream or the log', async () => {
    const token = 'admin-events-secret-81d2';
    const log = captureLog();
    const tcp = await startAdminServer({ listen: '127.0.0.1:0', control, adminTokenSha256: adminTokenSha256(token), log: log.log, isUnixSocketAlive, events: ring });
    const port = Number(tcp.address.slice(tcp.address.lastIndexOf(':') + 1));
    const target = { host: '127.0.0.1', port };
    const refused = await openSse(target, '/v1/events');
    expect(refused).toMatchObject({ kind: 'refused', status: 401 });
    const wrong = await openSse(target, '/v1/events', { authorization: 'Bearer nope' });
    expect(wrong).toMatchObject({ kind: 'refused', status: 401 });
    const stream: SseStream = await openStream(target, '/v1/events', { authorization: `Bearer ${token}` });
    ring.publish('grant', A, { action: 'issue', grant: 'a', generation: 'run-1' });
    await stream.until((s) => s.events.length === 1, 3000, 'the event');
    expect(stream.raw).not.toContain(token);
    await stream.close();
    await tcp.close();
    for (const line of log.lines) expect(JSON.stringify(line)).not.toContain(token);
  });
});
