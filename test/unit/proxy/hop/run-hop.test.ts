// runHop, HopRun and refuseHop (src/proxy/hop/run-hop.ts): the one place a hop is decided and its records
// written. Threat: a hop that leaves no decision record (hidden from the audit), one with two (confusing
// attribution), a close record without or before its decision, and a fault in a stage, or in the answer,
// that takes down more than its own connection. Real ConnectionContexts over real loopback sockets; the
// runtime is only the audit sink, metrics and log runHop touches.
import net from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { AuditRecordV1, CloseRecordV1, DecisionRecordV1 } from '../../../../src/audit/index.js';
import { ConnectionContext } from '../../../../src/proxy/hop/connection-context.js';
import { decisionOf, type Decision } from '../../../../src/proxy/hop/decision.js';
import { Hop } from '../../../../src/proxy/hop/hop.js';
import { writeSocketDenial } from '../../../../src/proxy/ingress/respond.js';
import { HopRun, refuseHop, runHop, type Answer } from '../../../../src/proxy/hop/run-hop.js';
import type { ProxyRuntime } from '../../../../src/proxy/hop/runtime.js';
import { EventRing, NoopMetrics } from '../../../../src/telemetry/index.js';
import { waitFor } from '../../../support/wait.js';

interface FakeRuntime {
  readonly rt: ProxyRuntime;
  readonly records: AuditRecordV1[];
  readonly errors: { obj: object; msg: string }[];
  readonly metrics: NoopMetrics;
  readonly events: EventRing;
}
function runtime(): FakeRuntime {
  const records: AuditRecordV1[] = [];
  const errors: { obj: object; msg: string }[] = [];
  const metrics = new NoopMetrics();
  const events = new EventRing(64);
  const rt = {
    audit: { write: (r: AuditRecordV1) => void records.push(r), flush: () => Promise.resolve() },
    metrics,
    events,
    log: { info: () => undefined, warn: () => undefined, error: (obj: object, msg: string) => void errors.push({ obj, msg }) },
  };
  return { rt: rt as unknown as ProxyRuntime, records, errors, metrics, events };
}
const decisions = (records: AuditRecordV1[]): DecisionRecordV1[] => records.filter((r): r is DecisionRecordV1 => r.kind === 'decision');
const closes = (records: AuditRecordV1[]): CloseRecordV1[] => records.filter((r): r is CloseRecordV1 => r.kind === 'close');

/** A loopback connection: `server` is Sluice's side (the context's socket), `client` the peer. */
interface Pair {
  readonly server: net.Socket;
  readonly client: net.Socket;
  readonly ctx: ConnectionContext;
}
let listener: net.Server;
const accepted: net.Socket[] = [];
const opened: net.Socket[] = [];
beforeAll(async () => {
  listener = net.createServer({ allowHalfOpen: true }, (s) => {
    s.on('error', () => undefined);
    accepted.push(s);
  });
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
});
afterEach(() => {
  for (const s of [...accepted.splice(0), ...opened.splice(0)]) s.destroy();
});
afterAll(async () => {
  await new Promise<void>((resolve) => listener.close(() => resolve()));
});
async function pair(): Promise<Pair> {
  const before = accepted.length;
  const client = net.connect((listener.address() as net.AddressInfo).port, '127.0.0.1');
  client.on('error', () => undefined);
  opened.push(client);
  await waitFor(client, 'connect');
  while (accepted.length === before) await waitFor(listener, 'connection');
  const server = accepted[accepted.length - 1] as net.Socket;
  return { server, client, ctx: new ConnectionContext(server, 'shared', { boundGrant: null }) };
}
/** Reads what the peer receives until the connection closes. */
function received(client: net.Socket): Promise<string> {
  const chunks: Buffer[] = [];
  client.on('data', (c: Buffer) => chunks.push(c));
  return waitFor(client, 'close').then(() => Buffer.concat(chunks).toString('latin1'));
}
function answers(): { answer: Answer; seen: Decision[] } {
  const seen: Decision[] = [];
  return { seen, answer: (d) => void seen.push(d) };
}

describe('runHop', () => {
  it('decides an allowed hop once, however often a stage asks, and does not answer it as a denial', async () => {
    const f = runtime();
    const { ctx } = await pair();
    const hop = new Hop(ctx.nextHop(), 'connect', 'CONNECT', 'a.test:443');
    const a = answers();
    let first: Decision | null = null;
    await runHop(f.rt, ctx, hop, async (run) => {
      run.decide();
      run.decide();
      first = run.decision();
      run.decide();
      expect(run.decision()).toBe(first);
    }, a.answer);
    expect(decisions(f.records)).toHaveLength(1);
    expect(decisions(f.records)[0]).toBe(first);
    expect(hop.decision).toBe(first);
    expect(decisions(f.records)[0]).toMatchObject({ decision: 'allow', reason: 'granted', connection: ctx.id, hop: 1 });
    expect(a.seen).toEqual([]);
  });

  it('a denying stage: decided with its denial, answered exactly once with that decision', async () => {
    const f = runtime();
    const { ctx } = await pair();
    const hop = new Hop(ctx.nextHop(), 'forward', 'GET', 'http://b.test/');
    const a = answers();
    await runHop(f.rt, ctx, hop, async () => void hop.fail('destination_not_granted'), a.answer);
    expect(decisions(f.records)).toHaveLength(1);
    expect(a.seen).toHaveLength(1);
    expect(a.seen[0]).toBe(decisions(f.records)[0]);
    expect(a.seen[0]).toMatchObject({ decision: 'deny', reason: 'destination_not_granted', status: 403 });
  });

  it('a stage that returns without deciding an allowed hop fails closed: internal_error, answered once', async () => {
    const f = runtime();
    const { ctx } = await pair();
    const hop = new Hop(ctx.nextHop(), 'connect', 'CONNECT', 'a.test:443');
    const a = answers();
    await runHop(f.rt, ctx, hop, async () => undefined, a.answer);
    expect(decisions(f.records)).toHaveLength(1);
    expect(decisions(f.records)[0]).toMatchObject({ decision: 'deny', reason: 'internal_error', status: 500, detail: 'the hop ended undecided' });
    expect(a.seen).toHaveLength(1);
  });

  it('a throwing stage: internal_error (500), answered once, logged, and only that connection closed; the process keeps serving', async () => {
    const f = runtime();
    const faulty = await pair();
    const bystander = await pair();
    const hop = new Hop(faulty.ctx.nextHop(), 'connect', 'CONNECT', 'a.test:443');
    const reply = received(faulty.client);
    let answered = 0;
    await runHop(f.rt, faulty.ctx, hop, async () => {
      await Promise.resolve();
      throw new Error('stage exploded');
    }, (d) => {
      answered += 1;
      writeSocketDenial(faulty.server, d);
    });
    expect(answered).toBe(1);
    expect(decisions(f.records)).toHaveLength(1);
    expect(decisions(f.records)[0]).toMatchObject({ decision: 'deny', reason: 'internal_error', status: 500, connection: faulty.ctx.id });
    expect(f.errors).toHaveLength(1);
    expect(f.errors[0]?.obj).toMatchObject({ connection: faulty.ctx.id, hop: 1 });
    expect(await reply).toMatch(/^HTTP\/1\.1 500 /);
    // The other connection is untouched and still carries bytes both ways.
    expect(bystander.server.destroyed).toBe(false);
    const echoed = waitFor<Buffer>(bystander.server, 'data');
    bystander.client.write('still here');
    expect(String(await echoed)).toBe('still here');
    // And a next hop on a fresh connection is decided normally.
    const next = await pair();
    const nextHop = new Hop(next.ctx.nextHop(), 'connect', 'CONNECT', 'a.test:443');
    await runHop(f.rt, next.ctx, nextHop, async (run) => void run.decide(), () => undefined);
    expect(decisions(f.records).map((d) => d.reason)).toEqual(['internal_error', 'granted']);
  });

  it('a stage that throws something other than an Error is still an internal_error', async () => {
    const f = runtime();
    const { ctx } = await pair();
    const hop = new Hop(ctx.nextHop(), 'forward', 'GET', 'http://a.test/');
    const a = answers();
    await runHop(f.rt, ctx, hop, () => Promise.reject('a string'), a.answer);
    expect(a.seen.map((d) => d.reason)).toEqual(['internal_error']);
  });

  it('a throw after a denial keeps the first denial (the first denial is final), answered once', async () => {
    const f = runtime();
    const { ctx } = await pair();
    const hop = new Hop(ctx.nextHop(), 'forward', 'GET', 'http://a.test/');
    const a = answers();
    await runHop(f.rt, ctx, hop, async () => {
      hop.fail('token_invalid');
      throw new Error('after the denial');
    }, a.answer);
    expect(decisions(f.records)).toHaveLength(1);
    expect(a.seen.map((d) => d.reason)).toEqual(['token_invalid']);
  });

  it('a throw after an allow decision: a close record relay_failed after the decision, the socket destroyed, no second decision, no answer', async () => {
    const f = runtime();
    const { ctx, client } = await pair();
    const hop = new Hop(ctx.nextHop(), 'connect', 'CONNECT', 'a.test:443');
    const a = answers();
    const gone = waitFor(client, 'close');
    await runHop(f.rt, ctx, hop, async (run) => {
      run.decide();
      throw new Error('relay exploded');
    }, a.answer);
    expect(f.records.map((r) => r.kind)).toEqual(['decision', 'close']);
    expect(decisions(f.records)[0]).toMatchObject({ decision: 'allow', reason: 'granted' });
    expect(closes(f.records)[0]).toMatchObject({ closedBy: 'relay_failed', status: null, bytesUp: 0, bytesDown: 0, connection: ctx.id, hop: 1 });
    expect(a.seen).toEqual([]);
    expect(ctx.socket.destroyed).toBe(true);
    await gone;
  });

  it('a throw after the hop was allowed and closed writes no second close record', async () => {
    const f = runtime();
    const { ctx } = await pair();
    const hop = new Hop(ctx.nextHop(), 'forward', 'GET', 'http://a.test/');
    await runHop(f.rt, ctx, hop, async (run) => {
      run.decide();
      run.close({ closedBy: 'completed', status: 200, bytesUp: 1, bytesDown: 2 });
      throw new Error('after the close');
    }, () => undefined);
    expect(f.records.map((r) => r.kind)).toEqual(['decision', 'close']);
    expect(closes(f.records)[0]?.closedBy).toBe('completed');
  });

  it('an answer that throws is caught: logged, the connection destroyed, the hop still decided once', async () => {
    const f = runtime();
    const { ctx, client } = await pair();
    const hop = new Hop(ctx.nextHop(), 'forward', 'GET', 'http://a.test/');
    const gone = waitFor(client, 'close');
    let calls = 0;
    await expect(
      runHop(f.rt, ctx, hop, async () => void hop.fail('destination_not_granted'), () => {
        calls += 1;
        throw new Error('answer exploded');
      }),
    ).resolves.toBeUndefined();
    expect(calls).toBe(1);
    expect(decisions(f.records)).toHaveLength(1);
    expect(f.errors.map((e) => e.msg)).toEqual(['answering a denied hop failed']);
    expect(ctx.socket.destroyed).toBe(true);
    await gone;
  });

  it('the hops of one connection are recorded under their own index, one decision each', async () => {
    const f = runtime();
    const { ctx } = await pair();
    for (const reason of ['granted', 'destination_not_granted', 'granted'] as const) {
      const hop = new Hop(ctx.nextHop(), 'forward', 'GET', 'http://a.test/');
      await runHop(f.rt, ctx, hop, async (run) => {
        if (reason !== 'granted') return void hop.fail(reason);
        run.decide();
        run.close({ closedBy: 'completed', status: 200, bytesUp: 0, bytesDown: 0 });
      }, () => undefined);
    }
    expect(f.records.map((r) => `${r.kind}:${r.hop}`)).toEqual(['decision:1', 'close:1', 'decision:2', 'decision:3', 'close:3']);
  });
});

describe('the decision event of a watched runtime', () => {
  it('every hop publishes exactly one decision event, with its decision record, whatever path decided it', async () => {
    const f = runtime();
    f.events.subscribe(() => undefined);
    const { ctx } = await pair();
    const allowed = new Hop(ctx.nextHop(), 'connect', 'CONNECT', 'a.test:443');
    await runHop(f.rt, ctx, allowed, async (run) => {
      run.decide();
      run.decide();
    }, answers().answer);
    await runHop(f.rt, ctx, new Hop(ctx.nextHop(), 'forward', 'GET', 'http://b.test/'), async () => {
      throw new Error('stage fault');
    }, answers().answer);
    refuseHop(f.rt, ctx, new Hop(ctx.nextHop(), 'forward', 'GET', '/'), 'request_malformed', 'bad head', answers().answer);
    const published = f.events.since(0).events.map((e) => [e.kind, e.data['hop'], e.data['reason']]);
    expect(published).toEqual([
      ['decision', 1, 'granted'],
      ['decision', 2, 'internal_error'],
      ['decision', 3, 'request_malformed'],
    ]);
    expect(decisions(f.records).map((d) => [d.hop, d.reason])).toEqual(published.map(([, hop, reason]) => [hop, reason]));
  });
});

describe('refuseHop', () => {
  it('decides and answers once, with the reason and detail given', async () => {
    const f = runtime();
    const { ctx } = await pair();
    const a = answers();
    refuseHop(f.rt, ctx, new Hop(ctx.nextHop(), 'forward', '-', ''), 'request_timeout', 'no request head', a.answer);
    expect(decisions(f.records)).toHaveLength(1);
    expect(a.seen).toHaveLength(1);
    expect(a.seen[0]).toBe(decisions(f.records)[0]);
    expect(a.seen[0]).toMatchObject({ reason: 'request_timeout', status: 408, detail: 'no request head', decision: 'deny' });
  });

  it('an answer that throws is caught and closes the connection', async () => {
    const f = runtime();
    const { ctx } = await pair();
    expect(() => refuseHop(f.rt, ctx, new Hop(ctx.nextHop(), 'forward', '-', ''), 'request_malformed', 'x', () => {
      throw new Error('answer exploded');
    })).not.toThrow();
    expect(decisions(f.records)).toHaveLength(1);
    expect(ctx.socket.destroyed).toBe(true);
  });

  it('a hop that was already denied keeps its first denial', async () => {
    const f = runtime();
    const { ctx } = await pair();
    const hop = new Hop(ctx.nextHop(), 'forward', '-', '');
    hop.fail('token_missing');
    const a = answers();
    refuseHop(f.rt, ctx, hop, 'expectation_unsupported', '', a.answer);
    expect(a.seen.map((d) => d.reason)).toEqual(['token_missing']);
  });
});

describe('HopRun.close', () => {
  const facts = { closedBy: 'completed', status: 200, bytesUp: 3, bytesDown: 4 } as const;

  it('is a no-op before the decision: no close record can come first', async () => {
    const f = runtime();
    const { ctx } = await pair();
    const run = new HopRun(f.rt, ctx, new Hop(ctx.nextHop(), 'forward', 'GET', 'http://a.test/'));
    run.close(facts);
    expect(f.records).toEqual([]);
    expect(run.isClosed).toBe(false);
  });

  it('is a no-op for a denied hop', async () => {
    const f = runtime();
    const { ctx } = await pair();
    const hop = new Hop(ctx.nextHop(), 'forward', 'GET', 'http://a.test/');
    hop.fail('destination_not_granted');
    const run = new HopRun(f.rt, ctx, hop);
    run.decide();
    run.close(facts);
    expect(f.records.map((r) => r.kind)).toEqual(['decision']);
    expect(run.isClosed).toBe(false);
  });

  it('writes once for an allowed hop: the second time is a no-op', async () => {
    const f = runtime();
    const { ctx } = await pair();
    const run = new HopRun(f.rt, ctx, new Hop(ctx.nextHop(), 'forward', 'GET', 'http://a.test/'));
    run.decide();
    run.close(facts);
    run.close({ ...facts, closedBy: 'client_closed' });
    expect(f.records.map((r) => r.kind)).toEqual(['decision', 'close']);
    expect(closes(f.records)[0]?.closedBy).toBe('completed');
    expect(run.isClosed).toBe(true);
  });

  it('decide after a decision writes nothing more, and the decision is the same value', async () => {
    const f = runtime();
    const { ctx } = await pair();
    const run = new HopRun(f.rt, ctx, new Hop(ctx.nextHop(), 'forward', 'GET', 'http://a.test/'));
    run.decide();
    const d = run.decision();
    const again = new HopRun(f.rt, ctx, run.hop);
    again.decide();
    expect(again.decision()).toBe(d);
    expect(decisions(f.records)).toHaveLength(1);
    expect(decisions(f.records)[0]).toBe(d);
  });

  it('decision() of an undecided hop decides it first: one record, the value answered', async () => {
    const f = runtime();
    const { ctx } = await pair();
    const hop = new Hop(ctx.nextHop(), 'forward', 'GET', 'http://a.test/');
    hop.fail('destination_not_granted');
    const d = new HopRun(f.rt, ctx, hop).decision();
    expect(hop.isDecided).toBe(true);
    expect(decisions(f.records)).toEqual([d]);
  });
});

describe('with a sink that writes from the hop (the file sink\'s fast path)', () => {
  interface FastRuntime extends FakeRuntime {
    readonly written: { kind: string; hop: Hop; place: unknown; nowMs: number }[];
  }
  function fastRuntime(): FastRuntime {
    const f = runtime();
    const written: FastRuntime['written'] = [];
    const audit = f.rt.audit as { writeDecision?: unknown; writeClose?: unknown };
    audit.writeDecision = (hop: Hop, place: unknown, nowMs: number) => void written.push({ kind: 'decision', hop, place, nowMs });
    audit.writeClose = (hop: Hop, place: unknown, _outcome: unknown, nowMs: number) => void written.push({ kind: 'close', hop, place, nowMs });
    return { ...f, written };
  }

  it('an allowed hop is decided, recorded once and closed with no Decision value built', async () => {
    const f = fastRuntime();
    const { ctx } = await pair();
    const hop = new Hop(ctx.nextHop(), 'connect', 'CONNECT', 'a.test:443');
    const a = answers();
    const before = Date.now();
    await runHop(f.rt, ctx, hop, async (run) => {
      run.decide();
      run.decide();
      run.close({ closedBy: 'client_closed', status: 200, bytesUp: 1, bytesDown: 2 });
    }, a.answer);
    expect(f.written.map((w) => w.kind)).toEqual(['decision', 'close']);
    expect(f.written[0]).toMatchObject({ hop, place: ctx, nowMs: hop.decidedAtMs });
    expect(hop.decidedAtMs).toBeGreaterThanOrEqual(before);
    expect(f.records).toEqual([]);
    expect(hop.decision).toBeNull();
    expect(a.seen).toEqual([]);
  });

  it('asked for later, the Decision value is the one recorded: same fields, same ts', async () => {
    const f = fastRuntime();
    const { ctx } = await pair();
    const run = new HopRun(f.rt, ctx, new Hop(ctx.nextHop(), 'connect', 'CONNECT', 'a.test:443'));
    run.decide();
    const d = run.decision();
    expect(d).toEqual(decisionOf(run.hop, ctx, run.hop.decidedAtMs));
    expect(run.decision()).toBe(d);
    expect(f.written).toHaveLength(1);
  });

  it('a denied hop is recorded once from the hop, and answered once with its Decision value', async () => {
    const f = fastRuntime();
    const { ctx } = await pair();
    const hop = new Hop(ctx.nextHop(), 'forward', 'GET', 'http://b.test/');
    const a = answers();
    await runHop(f.rt, ctx, hop, async () => void hop.fail('destination_not_granted'), a.answer);
    expect(f.written.map((w) => w.kind)).toEqual(['decision']);
    expect(a.seen).toHaveLength(1);
    expect(a.seen[0]).toBe(hop.decision);
    expect(a.seen[0]).toMatchObject({ decision: 'deny', reason: 'destination_not_granted', status: 403 });
  });

  it('a fault after the allow: relay_failed close, no second decision; a fault before it: internal_error', async () => {
    const f = fastRuntime();
    const { ctx } = await pair();
    const allowed = new Hop(ctx.nextHop(), 'connect', 'CONNECT', 'a.test:443');
    await runHop(f.rt, ctx, allowed, async (run) => {
      run.decide();
      throw new Error('relay exploded');
    }, () => undefined);
    const other = await pair();
    const denied = new Hop(other.ctx.nextHop(), 'connect', 'CONNECT', 'a.test:443');
    const a = answers();
    await runHop(f.rt, other.ctx, denied, async () => {
      throw new Error('stage exploded');
    }, a.answer);
    expect(f.written.map((w) => `${w.kind}:${w.hop === allowed ? 'allowed' : 'denied'}`)).toEqual(['decision:allowed', 'close:allowed', 'decision:denied']);
    expect(denied.reason).toBe('internal_error');
    expect(a.seen.map((d) => d.reason)).toEqual(['internal_error']);
  });

  it('a sink whose fast path throws: the hop is still decided (never twice), the fault logged', async () => {
    const f = runtime();
    (f.rt.audit as { writeDecision?: unknown }).writeDecision = () => {
      throw new Error('disk exploded');
    };
    const { ctx } = await pair();
    const hop = new Hop(ctx.nextHop(), 'connect', 'CONNECT', 'a.test:443');
    const a = answers();
    await runHop(f.rt, ctx, hop, async (run) => {
      run.decide();
      run.decide();
    }, a.answer);
    expect(hop.isDecided).toBe(true);
    expect(hop.isAllowed).toBe(true);
    expect(f.errors.map((e) => e.msg)).toEqual(['recording a decision failed']);
    expect(a.seen).toEqual([]);
  });
});

describe('a fault in the metrics of the decision (inside the record functions themselves)', () => {
  // recordDecision feeds the metrics before it writes the record: a metrics sink that throws must not
  // cost the hop its decision record (reported: today it does, see the two cases below).
  function failingMetrics(f: FakeRuntime): void {
    f.metrics.decision = () => {
      throw new Error('metrics exploded');
    };
  }

  it('an allowed hop still has its decision record, and no close record without one before it', async () => {
    const f = runtime();
    failingMetrics(f);
    const { ctx } = await pair();
    const hop = new Hop(ctx.nextHop(), 'connect', 'CONNECT', 'a.test:443');
    await runHop(f.rt, ctx, hop, async (run) => {
      run.decide();
      run.close({ closedBy: 'client_closed', status: 200, bytesUp: 1, bytesDown: 1 });
    }, () => undefined).catch(() => undefined);
    expect(f.records.map((r) => r.kind)).toEqual(['decision', 'close']);
  });

  it('a denied hop still has its decision record, is answered, and runHop does not reject', async () => {
    const f = runtime();
    failingMetrics(f);
    const { ctx } = await pair();
    const hop = new Hop(ctx.nextHop(), 'forward', 'GET', 'http://b.test/');
    const a = answers();
    const outcome = await runHop(f.rt, ctx, hop, async () => void hop.fail('destination_not_granted'), a.answer).then(() => 'resolved', () => 'rejected');
    expect({ outcome, kinds: f.records.map((r) => r.kind), answered: a.seen.length }).toEqual({ outcome: 'resolved', kinds: ['decision'], answered: 1 });
  });
});
