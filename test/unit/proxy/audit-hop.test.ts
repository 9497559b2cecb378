// Writing a hop's two audit records (src/proxy/audit-hop.ts). Threat: a record that is not the decision
// that was answered (a copy that drifted), metrics that count something other than the record, and a
// token reaching the audit log through the request target or the connection's credentials.
import net from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CLOSE_FIELDS, type AuditRecordV1, type AuditSink } from '../../../src/audit/index.js';
import { canonicalize } from '../../../src/authority/index.js';
import type { PinnedAddress } from '../../../src/core/index.js';
import { recordClose, recordDecision } from '../../../src/proxy/audit-hop.js';
import { ConnectionContext } from '../../../src/proxy/connection-context.js';
import { decisionOf } from '../../../src/proxy/decision.js';
import { Hop } from '../../../src/proxy/hop.js';
import { NoopMetrics } from '../../../src/telemetry/index.js';

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
  it('writes the Decision value itself, not a copy, once', () => {
    const s = sink();
    const d = decisionOf(allowedHop(), context());
    recordDecision(s, d, new NoopMetrics());
    expect(s.records).toHaveLength(1);
    expect(s.records[0]).toBe(d);
  });

  it('feeds the metrics from that value: the decision by reason and kind, authorize time, and dial time net of resolution', () => {
    const m = metrics();
    recordDecision(sink(), decisionOf(allowedHop(), context()), m);
    expect(m.decision).toHaveBeenCalledExactlyOnceWith('granted', 'connect');
    expect(m.authorizeSeconds).toHaveBeenCalledExactlyOnceWith(0.002);
    expect(m.dialSeconds).toHaveBeenCalledExactlyOnceWith(0.004);
  });

  it('a hop that never reached authorization or dialing feeds no timing', () => {
    const m = metrics();
    const hop = new Hop(1, 'forward', 'GET', 'http://a.test/');
    hop.fail('token_missing');
    recordDecision(sink(), decisionOf(hop, context()), m);
    expect(m.decision).toHaveBeenCalledExactlyOnceWith('token_missing', 'forward');
    expect(m.authorizeSeconds).not.toHaveBeenCalled();
    expect(m.dialSeconds).not.toHaveBeenCalled();
  });

  it('dial time without a resolution (an IP literal) is counted from the head', () => {
    const m = metrics();
    const hop = allowedHop();
    hop.resolveUs = null;
    recordDecision(sink(), decisionOf(hop, context()), m);
    expect(m.dialSeconds).toHaveBeenCalledExactlyOnceWith(0.007);
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
      recordDecision(s, decisionOf(hop, ctx), new NoopMetrics());
      recordClose(s, ctx, hop, { closedBy: 'completed', status: 200, bytesUp: 1, bytesDown: 1 }, new NoopMetrics());
      const denied = new Hop(5, 'forward', 'GET', target);
      denied.fail('token_invalid');
      recordDecision(s, decisionOf(denied, ctx), new NoopMetrics());
    }
    expect(s.records).toHaveLength(9);
    for (const r of s.records) expect(JSON.stringify(r)).not.toContain(TOKEN);
  });
});
