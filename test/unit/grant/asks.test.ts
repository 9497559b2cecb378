// Asks (issue 27) from the held principal's side and the supervisor's: one ask however many hops wait
// on a destination, a deadline that fails closed, the first answer wins, an answer for one grant never
// releases another grant's hop, and a revoked grant's held hops are refused at once.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { AskRegistry, MAX_PENDING_ASKS, MAX_PENDING_ASKS_PER_GRANT, type RuntimeGrant } from '../../../src/grant/index.js';
import { EventRing } from '../../../src/telemetry/index.js';

function grant(id: string, askTimeoutMs: number | null = 1000, generation: string | null = null): RuntimeGrant {
  return { id, askTimeoutMs, generation } as unknown as RuntimeGrant;
}

function setUp(): { asks: AskRegistry; events: EventRing; seen: { kind: string; data: Record<string, unknown> }[] } {
  const events = new EventRing(100);
  const seen: { kind: string; data: Record<string, unknown> }[] = [];
  events.subscribe((e) => seen.push({ kind: e.kind, data: { ...e.data } }));
  return { asks: new AskRegistry({ events, now: Date.now }), events, seen };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('AskRegistry', () => {
  it('raises one ask for 100 concurrent hops to one destination, and one answer releases them all', async () => {
    const { asks, seen } = setUp();
    const g = grant('g1');
    const held = Array.from({ length: 100 }, () => asks.raise(g, 'https://pypi.org:443'));
    expect(asks.list()).toHaveLength(1);
    expect(asks.list()[0]).toMatchObject({ grant: 'g1', destination: 'https://pypi.org:443', waiting: 100 });
    expect(seen.filter((e) => e.kind === 'ask')).toHaveLength(1);
    const id = asks.list()[0]!.ask;
    expect((await asks.answer(id, { decision: 'allow', scope: 'once' })).result).toBe('answered');
    const outcomes = await Promise.all(held);
    expect(outcomes.every((o) => o.allowed && o.ask === id)).toBe(true);
    expect(asks.list()).toEqual([]);
    expect(seen.filter((e) => e.kind === 'ask_answered')).toEqual([{ kind: 'ask_answered', data: expect.objectContaining({ ask: id, decision: 'allow', scope: 'once', answeredBy: 'admin', waiting: 100 }) }]);
  });

  it('keeps asks apart per grant and per destination: an answer for grant A never releases grant B', async () => {
    const { asks } = setUp();
    const a = asks.raise(grant('A'), 'https://x.test:443');
    const b = asks.raise(grant('B'), 'https://x.test:443');
    const other = asks.raise(grant('A'), 'https://x.test:8443');
    expect(asks.list()).toHaveLength(3);
    const idA = asks.list().find((v) => v.grant === 'A' && v.destination === 'https://x.test:443')!.ask;
    await asks.answer(idA, { decision: 'allow', scope: 'once' });
    expect(await a).toMatchObject({ allowed: true });
    let settled = false;
    void b.then(() => (settled = true));
    void other.then(() => (settled = true));
    await Promise.resolve();
    expect(settled).toBe(false);
    expect(asks.list().map((v) => `${v.grant} ${v.destination}`).sort()).toEqual(['A https://x.test:8443', 'B https://x.test:443']);
    asks.close();
  });

  it('refuses with approval_timeout when nobody answers within the grant’s timeoutMs, and a late answer is 409', async () => {
    vi.useFakeTimers();
    const { asks, seen } = setUp();
    const held = asks.raise(grant('g', 250), 'http://late.test:80');
    const id = asks.list()[0]!.ask;
    vi.advanceTimersByTime(249);
    expect(asks.list()).toHaveLength(1);
    vi.advanceTimersByTime(1);
    expect(await held).toEqual({ allowed: false, ask: id, reason: 'approval_timeout' });
    expect((await asks.answer(id, { decision: 'allow', scope: 'once' })).result).toBe('already_answered');
    expect(seen.find((e) => e.kind === 'ask_answered')?.data).toMatchObject({ decision: 'timeout', answeredBy: 'timeout', scope: null });
  });

  it('lets the first answer win: a deny after an allow is already_answered, and an unknown id not_found', async () => {
    const { asks } = setUp();
    const held = asks.raise(grant('g'), 'https://a.test:443');
    const id = asks.list()[0]!.ask;
    expect((await asks.answer(id, { decision: 'deny', scope: 'once' })).result).toBe('answered');
    expect((await asks.answer(id, { decision: 'allow', scope: 'grant' })).result).toBe('already_answered');
    expect(await held).toEqual({ allowed: false, ask: id, reason: 'approval_denied' });
    expect((await asks.answer('ask-never', { decision: 'allow', scope: 'once' })).result).toBe('not_found');
    // The ignored allow for the grant's life did not stick.
    expect(asks.standingAnswer('g', 'https://a.test:443')).toBeUndefined();
  });

  it('keeps an answer for the grant’s life per grant and destination, and forgets it when the grant ends', async () => {
    const { asks } = setUp();
    const held = asks.raise(grant('g'), 'https://a.test:443');
    await asks.answer(asks.list()[0]!.ask, { decision: 'allow', scope: 'grant' });
    await held;
    expect(asks.standingAnswer('g', 'https://a.test:443')).toBe('allow');
    expect(asks.standingAnswer('g', 'https://a.test:444')).toBeUndefined();
    expect(asks.standingAnswer('other', 'https://a.test:443')).toBeUndefined();
    asks.endGrant('g');
    expect(asks.standingAnswer('g', 'https://a.test:443')).toBeUndefined();
  });

  it('refuses the hops held on a revoked grant’s asks at once (grant_revoked), and only that grant’s', async () => {
    const { asks } = setUp();
    const revoked = asks.raise(grant('gone'), 'https://a.test:443');
    const kept = asks.raise(grant('kept'), 'https://a.test:443');
    asks.endGrant('gone');
    expect(await revoked).toMatchObject({ allowed: false, reason: 'grant_revoked' });
    expect(asks.list().map((v) => v.grant)).toEqual(['kept']);
    asks.close();
    expect(await kept).toMatchObject({ allowed: false, reason: 'approval_timeout' });
  });

  it('bounds one grant’s pending asks, so a sandbox probing many destinations never starves another grant’s asks', async () => {
    const { asks } = setUp();
    const flood = grant('flood', 60_000);
    const held = Array.from({ length: MAX_PENDING_ASKS_PER_GRANT }, (_, i) => asks.raise(flood, `https://h${i}.test:443`));
    expect(await asks.raise(flood, 'https://one-more.test:443')).toMatchObject({ allowed: false, reason: 'approval_timeout' });
    const other = asks.raise(grant('other', 60_000), 'https://h0.test:443');
    expect(asks.list().filter((v) => v.grant === 'other')).toHaveLength(1);
    // A settled ask gives its slot back.
    await asks.answer(asks.list()[0]!.ask, { decision: 'deny', scope: 'once' });
    void asks.raise(flood, 'https://after.test:443');
    expect(asks.list().filter((v) => v.grant === 'flood')).toHaveLength(MAX_PENDING_ASKS_PER_GRANT);
    asks.close();
    expect((await Promise.all([...held, other])).every((o) => !o.allowed)).toBe(true);
  });

  it('bounds the asks pending at once, all grants together', async () => {
    const { asks } = setUp();
    const grants = Array.from({ length: Math.ceil(MAX_PENDING_ASKS / MAX_PENDING_ASKS_PER_GRANT) }, (_, i) => grant(`g${i}`, 60_000));
    const held = Array.from({ length: MAX_PENDING_ASKS }, (_, i) => asks.raise(grants[Math.floor(i / MAX_PENDING_ASKS_PER_GRANT)]!, `https://h${i}.test:443`));
    expect(asks.list()).toHaveLength(MAX_PENDING_ASKS);
    expect(await asks.raise(grant('late', 60_000), 'https://one-more.test:443')).toMatchObject({ allowed: false, reason: 'approval_timeout' });
    asks.close();
    expect((await Promise.all(held)).every((o) => !o.allowed)).toBe(true);
    expect(asks.list()).toEqual([]);
  });

  it('shows the ask with its deadline and generation, and gives unguessable ids', () => {
    const { asks } = setUp();
    const before = Date.now();
    void asks.raise(grant('g', 5000, 'run-7'), 'https://a.test:443');
    void asks.raise(grant('g', 5000, 'run-7'), 'https://b.test:443');
    const [first, second] = asks.list();
    expect(first).toMatchObject({ generation: 'run-7', waiting: 1 });
    expect(Date.parse(first!.expiresAt) - Date.parse(first!.raisedAt)).toBe(5000);
    expect(Date.parse(first!.raisedAt)).toBeGreaterThanOrEqual(before);
    expect(first!.ask).toMatch(/^ask-[0-9a-f]{16}$/);
    expect(first!.ask).not.toBe(second!.ask);
    asks.close();
  });
});

describe('AskRegistry.endGrant on expiry', () => {
  it('refuses the held hops grant_expired (not revoked), and keeps the grant’s standing answers', async () => {
    const { asks } = setUp();
    const g = grant('g-exp');
    const first = asks.raise(g, 'https://one.test:443');
    await asks.answer(asks.list()[0]!.ask, { decision: 'allow', scope: 'grant' });
    expect((await first).allowed).toBe(true);
    const held = asks.raise(g, 'https://two.test:443');
    asks.endGrant('g-exp', 'grant_expired');
    expect(await held).toMatchObject({ allowed: false, reason: 'grant_expired' });
    expect(asks.list()).toEqual([]);
    expect(asks.standingAnswer('g-exp', 'https://one.test:443')).toBe('allow');
  });
});
