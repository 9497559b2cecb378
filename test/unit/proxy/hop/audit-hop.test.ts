// Writing a hop's two audit records (src/proxy/hop/audit-hop.ts). Threat: a record that is not the decision
// that was answered (a copy that drifted, or the file sink's bytes drifting from the record a capture
// sink sees), metrics that count something other than the record, and a token reaching the audit log
// through the request target or the connection's credentials.
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CLOSE_FIELDS, createFileSink, formatRecord, type AuditRecordV1, type AuditSink } from '../../../../src/audit/index.js';
import { canonicalize } from '../../../../src/authority/index.js';
import type { PinnedAddress } from '../../../../src/core/index.js';
import { closeRecordOf, recordClose, recordDecision } from '../../../../src/proxy/hop/audit-hop.js';
import { ConnectionContext } from '../../../../src/proxy/hop/connection-context.js';
import { decisionOf } from '../../../../src/proxy/hop/decision.js';
import { Hop } from '../../../../src/proxy/hop/hop.js';
import type { RuntimeGrant } from '../../../../src/grant/index.js';
import { EventRing, NoopMetrics } from '../../../../src/telemetry/index.js';

const TOKEN = 'tok-audit-hop-SECRET-0123';

function sink(): AuditSink & { records: AuditRecordV1[] } {
  const records: AuditRecordV1[] = [];
  return { records, write: (r) => void records.push(r), flush: () => Promise.resolve() };
}
function metrics(): NoopMetrics {
  const m = new NoopMetrics();
  for (const name of ['decision', 'authorizeSeconds', 'dialSeconds', 'bytes', 'closed'] as const) vi.spyOn(m, name);
  return m;
}
const sockets: net.Socket[] = [];
function context(): ConnectionContext {
  const socket = new net.Socket();
  sockets.push(socket);
  const ctx = new ConnectionContext(socket, 'shared', { boundGrant: null });
  ctx.principal = { grantId: 'sandbox-a', via: 'token' };
  ctx.verifiedAuthorization = `Bearer ${TOKEN}`;
  return ctx;
}
afterEach(() => {
  for (const s of sockets.splice(0)) s.destroy();
  vi.restoreAllMocks();
});

function allowedHop(target = 'api.example.test:443'): Hop {
  const hop = new Hop(4, 'connect', 'CONNECT', target);
  const dest = canonicalize('api.example.test:443');
  if (!dest.ok) throw new Error('bad authority');
  hop.canonical = dest.value;
  hop.principal = { grantId: 'sandbox-a', via: 'token' };
  hop.authorizeUs = 2_000;
  hop.resolveUs = 3_000;
  hop.dialUs = 7_000;
  hop.dialed = { address: '127.0.0.9', family: 4, port: 443, class: 'loopback' } as PinnedAddress;
  hop.firstByteUs = 9_000;
  return hop;
}

describe('recordDecision', () => {
  it('a sink without the fast path gets the Decision value itself, once, and the hop keeps it', () => {
    const s = sink();
    const ctx = context();
    const hop = allowedHop();
    hop.decidedAtMs = Date.UTC(2026, 10, 30, 5, 36, 31, 813);
    recordDecision(s, ctx, hop, new NoopMetrics());
    expect(s.records).toHaveLength(1);
    expect(s.records[0]).toBe(hop.decision);
    expect(hop.decision).toEqual(decisionOf(hop, ctx, hop.decidedAtMs));
    expect(hop.decision?.ts).toBe('2026-11-30T05:36:31.813Z');
  });

  it('a sink with the fast path gets the hop and its place, and no Decision value is built', () => {
    const s = sink();
    const seen: unknown[][] = [];
    const fast: AuditSink = { ...s, writeDecision: (...args) => void seen.push(args) };
    const ctx = context();
    const hop = allowedHop();
    hop.decidedAtMs = 1234;
    recordDecision(fast, ctx, hop, new NoopMetrics());
    expect(seen).toEqual([[hop, ctx, 1234]]);
    expect(seen[0]?.[0]).toBe(hop);
    expect(s.records).toEqual([]);
    expect(hop.decision).toBeNull();
  });

  it('feeds the metrics from the hop: the decision by reason and kind, authorize time, and dial time net of resolution', () => {
    for (const audit of [sink(), { ...sink(), writeDecision: () => undefined }]) {
      const m = metrics();
      recordDecision(audit, context(), allowedHop(), m);
      expect(m.decision).toHaveBeenCalledExactlyOnceWith('granted', 'connect');
      expect(m.authorizeSeconds).toHaveBeenCalledExactlyOnceWith(0.002);
      expect(m.dialSeconds).toHaveBeenCalledExactlyOnceWith(0.004);
    }
  });

  it('the record is written before the metrics', () => {
    const order: string[] = [];
    const m = new NoopMetrics();
    vi.spyOn(m, 'decision').mockImplementation(() => void order.push('metric'));
    recordDecision({ write: () => void order.push('write'), flush: () => Promise.resolve() }, context(), allowedHop(), m);
    recordDecision({ write: () => undefined, writeDecision: () => void order.push('writeDecision'), flush: () => Promise.resolve() }, context(), allowedHop(), m);
    expect(order).toEqual(['write', 'metric', 'writeDecision', 'metric']);
  });

  it('a hop that never reached authorization or dialing feeds no timing', () => {
    const m = metrics();
    const hop = new Hop(1, 'forward', 'GET', 'http://a.test/');
    hop.fail('token_missing');
    recordDecision(sink(), context(), hop, m);
    expect(m.decision).toHaveBeenCalledExactlyOnceWith('token_missing', 'forward');
    expect(m.authorizeSeconds).not.toHaveBeenCalled();
    expect(m.dialSeconds).not.toHaveBeenCalled();
  });

  it('dial time without a resolution (an IP literal) is counted from the head', () => {
    const m = metrics();
    const hop = allowedHop();
    hop.resolveUs = null;
    recordDecision(sink(), context(), hop, m);
    expect(m.dialSeconds).toHaveBeenCalledExactlyOnceWith(0.007);
  });
});

describe('recordDecision: the decision event (GET /v1/events)', () => {
  function watchedRing(): { ring: EventRing; seen: unknown[] } {
    const ring = new EventRing(16);
    const seen: unknown[] = [];
    ring.subscribe((e) => void seen.push(e));
    return { ring, seen };
  }

  it('builds no event while nobody watches', () => {
    const ring = new EventRing(16);
    recordDecision(sink(), context(), allowedHop(), new NoopMetrics(), ring);
    expect(ring.lastId).toBe(0);
  });

  it('publishes an allowed CONNECT with its grant, generation and canonical destination as https://host:port', () => {
    const { ring, seen } = watchedRing();
    const ctx = context();
    const hop = allowedHop();
    hop.grant = { id: 'sandbox-a', generation: 'run-7' } as RuntimeGrant;
    hop.decidedAtMs = Date.UTC(2026, 11, 4, 10, 0, 0, 123);
    recordDecision(sink(), ctx, hop, new NoopMetrics(), ring);
    expect(seen).toEqual([
      {
        id: 1,
        kind: 'decision',
        grant: 'sandbox-a',
        generation: 'run-7',
        data: {
          ts: '2026-12-04T10:00:00.123Z',
          decision: 'allow',
          reason: 'granted',
          grant: 'sandbox-a',
          generation: 'run-7',
          destination: 'https://api.example.test:443',
          request: 'connect',
          listener: 'shared',
          connection: ctx.id,
          hop: 4,
          status: 200,
        },
      },
    ]);
  });

  it('publishes a denial with its reason and status; an absolute-form request keeps its own scheme', () => {
    const { ring } = watchedRing();
    const hop = new Hop(2, 'forward', 'GET', 'http://other.test/');
    const dest = canonicalize('other.test:80');
    if (!dest.ok) throw new Error('bad authority');
    hop.canonical = dest.value;
    hop.scheme = 'http';
    hop.principal = { grantId: 'sandbox-a', via: 'token' };
    hop.fail('destination_not_granted');
    recordDecision(sink(), context(), hop, new NoopMetrics(), ring);
    expect(ring.since(0).events[0]?.data).toMatchObject({ decision: 'deny', reason: 'destination_not_granted', status: 403, destination: 'http://other.test:80', request: 'forward', grant: 'sandbox-a', generation: null });
  });

  it('a hop refused before its principal or target was known has null grant and destination, and never the target or a token', () => {
    const { ring } = watchedRing();
    const hop = new Hop(1, 'forward', 'GET', `http://user:${TOKEN}@a.test/?key=${TOKEN}`);
    hop.fail('token_missing');
    recordDecision(sink(), context(), hop, new NoopMetrics(), ring);
    const event = ring.since(0).events[0];
    expect(event).toMatchObject({ grant: null, generation: null, data: { grant: null, destination: null, reason: 'token_missing', status: 407 } });
    expect(JSON.stringify(event)).not.toContain(TOKEN);
  });

  it('is published after the record is written', () => {
    const { ring } = watchedRing();
    const order: string[] = [];
    ring.subscribe(() => void order.push('event'));
    recordDecision({ write: () => void order.push('write'), flush: () => Promise.resolve() }, context(), allowedHop(), new NoopMetrics(), ring);
    expect(order).toEqual(['write', 'event']);
  });
});

describe('recordClose', () => {
  it('writes every close field, in order, from the connection, the hop and the facts', () => {
    const s = sink();
    const m = metrics();
    const ctx = context();
    const hop = allowedHop();
    recordClose(s, ctx, hop, { closedBy: 'client_closed', status: 200, bytesUp: 91, bytesDown: 128 }, m);
    expect(s.records).toHaveLength(1);
    const r = s.records[0];
    expect(Object.keys(r ?? {})).toEqual([...CLOSE_FIELDS]);
    expect(r).toMatchObject({
      v: 1,
      kind: 'close',
      ts: expect.stringMatching(/Z$/) as unknown as string,
      connection: ctx.id,
      hop: 4,
      listener: 'shared',
      principal: 'sandbox-a',
      request: 'connect',
      canonical: 'api.example.test:443',
      pinned: '127.0.0.9',
      closedBy: 'client_closed',
      status: 200,
      bytesUp: 91,
      bytesDown: 128,
      durationMs: expect.any(Number) as unknown as number,
      firstByteUs: 9_000,
    });
    expect(r?.kind === 'close' && r.durationMs).toBeGreaterThanOrEqual(0);
    expect(m.bytes).toHaveBeenCalledExactlyOnceWith(91, 128);
    expect(m.closed).toHaveBeenCalledExactlyOnceWith('client_closed');
  });

  it('pinned is null when nothing was dialed by Sluice (an upstream proxy given the name)', () => {
    const s = sink();
    const hop = allowedHop();
    hop.dialed = null;
    recordClose(s, context(), hop, { closedBy: 'origin_closed', status: 200, bytesUp: 0, bytesDown: 0 }, new NoopMetrics());
    expect(s.records[0]).toMatchObject({ pinned: null, closedBy: 'origin_closed' });
  });
});

describe('no token in any record', () => {
  it('holds even when the target carried credentials and the connection verified a token', () => {
    const s = sink();
    const ctx = context();
    for (const target of [`http://sandbox-a:${TOKEN}@api.example.test/v1?token=${TOKEN}`, `sandbox-a:${TOKEN}@api.example.test:443`, `http://api.example.test/#${TOKEN}`]) {
      const hop = allowedHop(target);
      recordDecision(s, ctx, hop, new NoopMetrics());
      recordClose(s, ctx, hop, { closedBy: 'completed', status: 200, bytesUp: 1, bytesDown: 1 }, new NoopMetrics());
      const denied = new Hop(5, 'forward', 'GET', target);
      denied.fail('token_invalid');
      recordDecision(s, ctx, denied, new NoopMetrics());
    }
    expect(s.records).toHaveLength(9);
    for (const r of s.records) expect(JSON.stringify(r)).not.toContain(TOKEN);
  });
});

describe('the file sink (the fast path)', () => {
  async function fileSink(): Promise<{ sink: AuditSink; lines: () => Promise<string[]> }> {
    const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'sluice-audit-hop-'));
    const file = path.join(dir, 'audit.jsonl');
    const s = createFileSink(file, { onError: (e) => { throw e; }, onWarning: () => undefined }, { minBytes: 1 << 16, flushEveryMs: 60_000 });
    return {
      sink: s,
      lines: async () => {
        await s.flush();
        const text = await fs.promises.readFile(file, 'utf8');
        await fs.promises.rm(dir, { recursive: true, force: true });
        return text.split(/(?<=\n)/);
      },
    };
  }

  it('writes the same lines, byte for byte, as the records a capture sink gets, and no token', async () => {
    const f = await fileSink();
    const ctx = context();
    const expected: string[] = [];
    const now = Date.UTC(2026, 10, 30, 5, 36, 31, 813);
    vi.spyOn(Date, 'now').mockReturnValue(now);
    for (const target of [`http://sandbox-a:${TOKEN}@api.example.test/v1?token=${TOKEN}`, 'api.example.test:443', 'a"b\\c\u0001é:443']) {
      const hop = allowedHop(target);
      hop.decidedAtMs = now - 5;
      recordDecision(f.sink, ctx, hop, new NoopMetrics());
      expect(hop.decision).toBeNull();
      expected.push(formatRecord(decisionOf(hop, ctx, now - 5)));
      const facts = { closedBy: 'client_closed', status: 200, bytesUp: 91, bytesDown: 128 } as const;
      recordClose(f.sink, ctx, hop, facts, new NoopMetrics());
      expected.push(formatRecord(closeRecordOf(hop, ctx, facts, now)));
      const denied = new Hop(5, 'forward', 'GET', target);
      denied.fail('token_invalid', 'a "detail"');
      recordDecision(f.sink, ctx, denied, new NoopMetrics());
      expected.push(formatRecord(decisionOf(denied, ctx, denied.decidedAtMs)));
    }
    const lines = await f.lines();
    expect(lines).toEqual(expected);
    for (const line of lines) expect(line).not.toContain(TOKEN);
  });
});
