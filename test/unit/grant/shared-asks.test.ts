// Asks across a fleet (issue 27): AskRegistry instances over one SharedAsks, here an in-memory store
// with the Redis scripts' semantics (ledger/redis-asks.ts). What a fleet must not let slip: two prompts
// for one destination because the hops landed on different instances; an answer on one instance that
// leaves another's hops waiting, times them out, or lets a second answer win there; a timeout and an
// answer that both win; an answer for one grant that releases another grant's hops; a store that fails
// and a hop that goes through anyway (fail closed); a standing answer kept once per instance.
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { AskPending } from '../../../src/core/index.js';
import {
  AskRegistry,
  JOIN_GRACE_MS,
  memoryStandingAnswers,
  type AnswerResult,
  type AskMessage,
  type AskOutcome,
  type FleetAnswer,
  type RuntimeGrant,
  type SharedAsks,
  type StandingAnswers,
} from '../../../src/grant/index.js';
import { EventRing } from '../../../src/telemetry/index.js';

/** Captured before any test fakes timers: a turn of the real event loop drains every pending promise. */
const realImmediate = setImmediate;
const DEST = 'https://pypi.org:443';

type Method = 'raise' | 'answer' | 'outcome' | 'list';
const copy = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;

/**
 * The fleet's store in memory, as the RAISE and ANSWER scripts keep it: one pending ask per (grant,
 * destination) for its timeout; the first answer wins and is remembered; a message goes to every other
 * subscriber, never back to its sender, after the call that sent it (Redis pub/sub). Messages can be
 * held back (delivered on release()) or dropped, and any method can be made to throw as an unreachable
 * store does.
 */
class FakeFleetStore {
  readonly pending = new Map<string, AskPending>();
  readonly pairs = new Map<string, { readonly id: string; readonly untilMs: number }>();
  readonly ended = new Map<string, FleetAnswer>();
  readonly failing = new Set<Method>();
  /** A message this returns true for is never delivered to `to`. */
  drop: (to: string, message: AskMessage) => boolean = () => false;
  /** While not null, deliveries wait here for release(). */
  held: (() => void)[] | null = null;
  private readonly subscribers = new Map<string, (message: AskMessage) => void>();

  handle(instance: string): SharedAsks {
    return {
      instance,
      raise: async (view, timeoutMs) => this.raise(instance, view, timeoutMs),
      answer: async (id, answer) => this.answer(instance, id, answer),
      outcome: async (id) => {
        this.check('outcome');
        return this.ended.has(id) ? copy(this.ended.get(id)!) : null;
      },
      list: async () => {
        this.check('list');
        return [...this.pending.values()].filter((v) => Date.parse(v.expiresAt) > Date.now()).map(copy);
      },
      subscribe: async (listener) => {
        this.subscribers.set(instance, listener);
      },
    };
  }

  release(): void {
    const held = this.held ?? [];
    this.held = null;
    for (const deliver of held) deliver();
  }

  private check(method: Method): void {
    if (this.failing.has(method)) throw new Error(`store away (${method})`);
  }

  private raise(instance: string, view: AskPending, timeoutMs: number): AskPending {
    this.check('raise');
    const key = `${view.grant} ${view.destination}`;
    const pair = this.pairs.get(key);
    const existing = pair !== undefined && pair.untilMs > Date.now() ? this.pending.get(pair.id) : undefined;
    if (existing !== undefined) return copy(existing);
    this.pairs.set(key, { id: view.ask, untilMs: Date.now() + Math.max(1, Math.ceil(timeoutMs)) });
    this.pending.set(view.ask, copy(view));
    this.publish({ kind: 'raised', from: instance, view: copy(view) });
    return copy(view);
  }

  private answer(instance: string, id: string, answer: FleetAnswer): { result: AnswerResult; view: AskPending | null } {
    this.check('answer');
    if (this.ended.has(id)) return { result: 'already_answered', view: null };
    const view = this.pending.get(id);
    if (view === undefined) return { result: 'not_found', view: null };
    this.ended.set(id, copy(answer));
    this.pending.delete(id);
    const key = `${view.grant} ${view.destination}`;
    if (this.pairs.get(key)?.id === id) this.pairs.delete(key);
    this.publish({ kind: 'answered', from: instance, view: copy(view), answer: copy(answer) });
    return { result: 'answered', view: copy(view) };
  }

  private publish(message: AskMessage): void {
    for (const [to, listener] of this.subscribers) {
      if (to === message.from || this.drop(to, message)) continue;
      const deliver = (): void => listener(copy(message));
      if (this.held !== null) this.held.push(deliver);
      else queueMicrotask(deliver);
    }
  }
}

interface Instance {
  readonly name: string;
  readonly asks: AskRegistry;
  readonly events: { readonly kind: string; readonly data: Record<string, unknown> }[];
  /** Every StandingAnswers.keep call this instance made. */
  readonly kept: [string, string, string][];
  readonly storeErrors: unknown[];
  /** What this instance's StandingAnswers.keep does: keep (true), refuse (false) or throw. */
  keepBehaviour: 'keep' | 'refuse' | 'throw';
}

const instances: Instance[] = [];

async function fleetOf(store: FakeFleetStore, ...names: string[]): Promise<Instance[]> {
  const fleet: Instance[] = [];
  for (const name of names) {
    const ring = new EventRing(1000);
    const memory = memoryStandingAnswers();
    const instance: Instance = { name, asks: new AskRegistry({ events: ring, now: () => Date.now() }), events: [], kept: [], storeErrors: [], keepBehaviour: 'keep' };
    ring.subscribe((e) => instance.events.push({ kind: e.kind, data: { ...e.data } }));
    const standing: StandingAnswers = {
      get: (grantId, destination) => memory.get(grantId, destination),
      keep: async (grantId, destination, decision) => {
        instance.kept.push([grantId, destination, decision]);
        if (instance.keepBehaviour === 'throw') throw new Error('ledger store away');
        if (instance.keepBehaviour === 'refuse') return false;
        return memory.keep(grantId, destination, decision);
      },
      forget: (grantId) => memory.forget?.(grantId),
    };
    await instance.asks.useLedger(standing, store.handle(name), (error) => instance.storeErrors.push(error));
    fleet.push(instance);
    instances.push(instance);
  }
  return fleet;
}

function grant(id: string, askTimeoutMs = 60_000): RuntimeGrant {
  return { id, askTimeoutMs, generation: null } as unknown as RuntimeGrant;
}

/** A hop's outcome, readable before it settles (undefined while held). */
function track(outcome: Promise<AskOutcome>): { readonly promise: Promise<AskOutcome>; value: AskOutcome | undefined } {
  const tracked = { promise: outcome, value: undefined as AskOutcome | undefined };
  void outcome.then((v) => (tracked.value = v));
  return tracked;
}

/** Turns the real event loop until `condition` holds: every store call and message here is a promise or a microtask. */
async function until(condition: () => boolean, label: string): Promise<void> {
  for (let turn = 0; turn < 50; turn += 1) {
    if (condition()) return;
    await new Promise<void>((resolve) => realImmediate(resolve));
  }
  throw new Error(`not reached within 50 event-loop turns: ${label}`);
}

const onlyAskId = (store: FakeFleetStore): string => {
  expect(store.pending.size).toBe(1);
  return [...store.pending.keys()][0]!;
};
const count = (instance: Instance, kind: string, ask: string): number => instance.events.filter((e) => e.kind === kind && e.data['ask'] === ask).length;

afterEach(() => {
  for (const instance of instances.splice(0)) instance.asks.close();
  vi.useRealTimers();
});

describe('AskRegistry over a SharedAsks: one ask per grant and destination for the whole fleet', () => {
  it('raises ONE ask for hops on A and B (B joins A’s id); an answer on C, with no hop there, releases both alike', async () => {
    const store = new FakeFleetStore();
    const [a, b, c] = await fleetOf(store, 'A', 'B', 'C');
    const g = grant('g1');
    // B raises in the same turn as A, before A's ask could reach it as a message.
    const held = [a!.asks.raise(g, DEST), b!.asks.raise(g, DEST), a!.asks.raise(g, DEST), b!.asks.raise(g, DEST)].map(track);
    const id = onlyAskId(store);
    await until(() => b!.asks.list()[0]?.ask === id, 'B waits on A’s ask');
    expect(a!.asks.list()).toEqual([expect.objectContaining({ ask: id, grant: 'g1', destination: DEST, waiting: 2 })]);
    expect(b!.asks.list()).toEqual([expect.objectContaining({ ask: id, grant: 'g1', destination: DEST, waiting: 2 })]);
    expect((await c!.asks.listAll()).map((v) => v.ask)).toEqual([id]);
    expect(c!.asks.list()).toEqual([]);
    expect(held.every((h) => h.value === undefined)).toBe(true);

    expect(await c!.asks.answer(id, { decision: 'allow', scope: 'once' })).toMatchObject({ result: 'answered' });
    const outcomes = await Promise.all(held.map((h) => h.promise));
    expect(outcomes).toEqual(Array.from({ length: 4 }, () => ({ allowed: true, ask: id, scope: 'once' })));
    for (const instance of [a!, b!, c!]) {
      expect(instance.asks.list()).toEqual([]);
      expect(await instance.asks.listAll()).toEqual([]);
    }
  });

  it('lets the first answer win fleet-wide: a second answer on any instance is already_answered, an unknown id not_found', async () => {
    const store = new FakeFleetStore();
    const [a, b, c] = await fleetOf(store, 'A', 'B', 'C');
    const onA = a!.asks.raise(grant('g1'), DEST);
    const onB = b!.asks.raise(grant('g1'), DEST);
    const id = onlyAskId(store);
    expect(await b!.asks.answer(id, { decision: 'deny', scope: 'once' })).toMatchObject({ result: 'answered' });
    for (const instance of [a!, b!, c!]) {
      expect(await instance.asks.answer(id, { decision: 'allow', scope: 'grant' })).toEqual({ result: 'already_answered' });
      expect(await instance.asks.answer('ask-0000000000000000', { decision: 'allow', scope: 'once' })).toEqual({ result: 'not_found' });
    }
    expect(await onA).toEqual({ allowed: false, ask: id, reason: 'approval_denied' });
    expect(await onB).toEqual({ allowed: false, ask: id, reason: 'approval_denied' });
    // The ignored allow "for the grant's life" was kept nowhere.
    expect([a!, b!, c!].flatMap((i) => i.kept)).toEqual([]);
    expect(store.ended.get(id)).toEqual({ decision: 'deny', scope: 'once', answeredBy: 'admin' });
  });

  it('settles a joined hop whose “answered” message was lost with the admin’s answer, by expiresAt + JOIN_GRACE_MS, never as a timeout', async () => {
    vi.useFakeTimers();
    const store = new FakeFleetStore();
    const [a, b, c] = await fleetOf(store, 'A', 'B', 'C');
    store.drop = (_to, message) => message.kind === 'answered';
    const timeoutMs = 5000;
    const onA = track(a!.asks.raise(grant('g1', timeoutMs), DEST));
    const onB = track(b!.asks.raise(grant('g1', timeoutMs), DEST));
    const id = onlyAskId(store);
    await until(() => b!.asks.list()[0]?.ask === id, 'B waits on A’s ask');
    expect(await c!.asks.answer(id, { decision: 'deny', scope: 'once' })).toMatchObject({ result: 'answered' });

    await vi.advanceTimersByTimeAsync(timeoutMs - 1);
    expect([onA.value, onB.value]).toEqual([undefined, undefined]);
    // The raiser's deadline: its claim of a timeout loses, and it learns the admin's answer from the store.
    await vi.advanceTimersByTimeAsync(1);
    expect(onA.value).toEqual({ allowed: false, ask: id, reason: 'approval_denied' });
    expect(onB.value).toBeUndefined();
    await vi.advanceTimersByTimeAsync(JOIN_GRACE_MS - 1);
    expect(onB.value).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(onB.value).toEqual({ allowed: false, ask: id, reason: 'approval_denied' });
    expect(store.ended.get(id)).toEqual({ decision: 'deny', scope: 'once', answeredBy: 'admin' });
    for (const instance of [a!, b!]) {
      expect(instance.events.filter((e) => e.kind === 'ask_answered').map((e) => e.data)).toEqual([expect.objectContaining({ ask: id, decision: 'deny', answeredBy: 'admin' })]);
      expect(instance.storeErrors).toEqual([]);
    }
  });

  it('settles at once a hop that joined an ask which ended before the join took (its message came first)', async () => {
    const store = new FakeFleetStore();
    const [a, b, c] = await fleetOf(store, 'A', 'B', 'C');
    const onA = a!.asks.raise(grant('g1'), DEST);
    const id = onlyAskId(store);
    store.held = [];
    // The store gives B A's ask; before B's join takes, C's answer wins and its message reaches B.
    const onB = track(b!.asks.raise(grant('g1'), DEST));
    void c!.asks.answer(id, { decision: 'allow', scope: 'once' });
    store.release();
    expect(await onA).toEqual({ allowed: true, ask: id, scope: 'once' });
    await until(() => onB.value !== undefined, 'B settled from the store, long before the ask’s deadline');
    expect(onB.value).toEqual({ allowed: true, ask: id, scope: 'once' });
    expect(count(b!, 'ask_answered', id)).toBe(1);
  });

  // The raiser's timer and a supervisor race for the same ask. Whatever the order and whatever happens to
  // the messages, exactly one of them wins in the store, and every hop on every instance gets that one.
  it.each([
    { answerAtMs: 999, messages: 'prompt', winner: 'admin' },
    { answerAtMs: 999, messages: 'held', winner: 'admin' },
    { answerAtMs: 999, messages: 'lost', winner: 'admin' },
    { answerAtMs: 1000, messages: 'prompt', winner: 'timeout' },
    { answerAtMs: 1000, messages: 'held', winner: 'timeout' },
    { answerAtMs: 1000, messages: 'lost', winner: 'timeout' },
  ] as const)('raiser’s timeout vs an answer on C at $answerAtMs ms (messages $messages): $winner wins, every hop agrees', async ({ answerAtMs, messages, winner }) => {
    vi.useFakeTimers();
    const store = new FakeFleetStore();
    const [a, b, c] = await fleetOf(store, 'A', 'B', 'C');
    const g = grant('g1', 1000);
    const hops = [a!.asks.raise(g, DEST), b!.asks.raise(g, DEST), b!.asks.raise(g, DEST)].map(track);
    const id = onlyAskId(store);
    await until(() => b!.asks.list()[0]?.ask === id, 'B waits on A’s ask');
    if (messages === 'held') store.held = [];
    if (messages === 'lost') store.drop = () => true;

    await vi.advanceTimersByTimeAsync(answerAtMs);
    const answered = await c!.asks.answer(id, { decision: 'allow', scope: 'once' });
    await vi.advanceTimersByTimeAsync(1000 + JOIN_GRACE_MS);
    store.release();
    await until(() => hops.every((h) => h.value !== undefined), 'every hop settled');

    const expected: AskOutcome = winner === 'admin' ? { allowed: true, ask: id, scope: 'once' } : { allowed: false, ask: id, reason: 'approval_timeout' };
    expect(answered.result).toBe(winner === 'admin' ? 'answered' : 'already_answered');
    expect(hops.map((h) => h.value)).toEqual([expected, expected, expected]);
    expect(store.ended.get(id)?.answeredBy).toBe(winner);
    for (const instance of [a!, b!, c!]) {
      expect(instance.asks.list()).toEqual([]);
      expect(count(instance, 'ask_answered', id)).toBeLessThanOrEqual(1);
    }
  });

  it('never releases grant B’s hops on another instance with an answer for grant A', async () => {
    const store = new FakeFleetStore();
    const [a, b, c] = await fleetOf(store, 'A', 'B', 'C');
    const onA = track(a!.asks.raise(grant('gA'), DEST));
    const joined = track(b!.asks.raise(grant('gA'), DEST));
    const other = track(b!.asks.raise(grant('gB'), DEST));
    expect(store.pending.size).toBe(2);
    const idA = [...store.pending.values()].find((v) => v.grant === 'gA')!.ask;
    const idB = [...store.pending.values()].find((v) => v.grant === 'gB')!.ask;
    expect(await c!.asks.answer(idA, { decision: 'allow', scope: 'grant' })).toMatchObject({ result: 'answered', kept: true });
    await until(() => onA.value !== undefined && joined.value !== undefined, 'grant A’s hops settled');
    expect(onA.value).toMatchObject({ allowed: true, ask: idA });
    expect(joined.value).toMatchObject({ allowed: true, ask: idA });
    // Every message has been delivered by now; grant B's hop still waits, and its ask is still the fleet's.
    expect(other.value).toBeUndefined();
    expect(b!.asks.list()).toEqual([expect.objectContaining({ ask: idB, grant: 'gB' })]);
    expect((await a!.asks.listAll()).map((v) => v.ask)).toEqual([idB]);
    // The answer for A's life was kept for gA only.
    expect(c!.kept).toEqual([['gA', DEST, 'allow']]);
    expect(await c!.asks.answer(idB, { decision: 'deny', scope: 'once' })).toMatchObject({ result: 'answered' });
    expect(await other.promise).toEqual({ allowed: false, ask: idB, reason: 'approval_denied' });
  });
});

describe('AskRegistry over a SharedAsks that fails', () => {
  it('refuses the hop with ledger_unavailable when the store cannot take the ask (fail closed), and holds nothing', async () => {
    const store = new FakeFleetStore();
    const [a, b] = await fleetOf(store, 'A', 'B');
    store.failing.add('raise');
    const hops = [a!.asks.raise(grant('g1'), DEST), a!.asks.raise(grant('g1'), DEST)];
    expect(await Promise.all(hops)).toEqual([expect.objectContaining({ allowed: false, reason: 'ledger_unavailable' }), expect.objectContaining({ allowed: false, reason: 'ledger_unavailable' })]);
    expect(a!.storeErrors).toHaveLength(1);
    expect(a!.asks.list()).toEqual([]);
    expect(store.pending.size).toBe(0);
    // Back: the next hop raises an ask again (the failed one left no stale entry behind).
    store.failing.delete('raise');
    const next = a!.asks.raise(grant('g1'), DEST);
    const id = onlyAskId(store);
    await b!.asks.answer(id, { decision: 'allow', scope: 'once' });
    expect(await next).toEqual({ allowed: true, ask: id, scope: 'once' });
  });

  it('rejects an answer the store could not take, and the hops stay held until an answer is taken', async () => {
    const store = new FakeFleetStore();
    const [a, c] = await fleetOf(store, 'A', 'C');
    const held = track(a!.asks.raise(grant('g1'), DEST));
    const id = onlyAskId(store);
    store.failing.add('answer');
    await expect(c!.asks.answer(id, { decision: 'allow', scope: 'grant' })).rejects.toThrow('store away');
    await expect(a!.asks.answer(id, { decision: 'allow', scope: 'once' })).rejects.toThrow('store away');
    await until(() => store.pending.size === 1, 'the ask is still pending');
    expect(held.value).toBeUndefined();
    expect([...a!.kept, ...c!.kept]).toEqual([]);
    store.failing.delete('answer');
    expect(await c!.asks.answer(id, { decision: 'deny', scope: 'once' })).toMatchObject({ result: 'answered' });
    expect(await held.promise).toEqual({ allowed: false, ask: id, reason: 'approval_denied' });
  });
});

describe('AskRegistry.endGrant in a fleet', () => {
  it('on the raiser: refuses its hops grant_revoked at once, and the fleet sees the ask ended', async () => {
    const store = new FakeFleetStore();
    const [a, b, c] = await fleetOf(store, 'A', 'B', 'C');
    const onA = a!.asks.raise(grant('g1'), DEST);
    const onB = track(b!.asks.raise(grant('g1'), DEST));
    const kept = b!.asks.raise(grant('g2'), DEST);
    const id = [...store.pending.values()].find((v) => v.grant === 'g1')!.ask;
    await until(() => b!.asks.list().some((v) => v.ask === id), 'B waits on A’s ask');
    a!.asks.endGrant('g1');
    expect(await onA).toEqual({ allowed: false, ask: id, reason: 'grant_revoked' });
    await until(() => onB.value !== undefined, 'B learns the ask ended');
    expect(onB.value).toEqual({ allowed: false, ask: id, reason: 'grant_revoked' });
    expect(store.ended.get(id)).toEqual({ decision: 'revoked', scope: null, answeredBy: 'revoked' });
    expect((await c!.asks.listAll()).map((v) => v.grant)).toEqual(['g2']);
    expect(c!.events.filter((e) => e.kind === 'ask_answered').map((e) => e.data)).toEqual([expect.objectContaining({ ask: id, decision: 'deny', answeredBy: 'revoked' })]);
    expect(await c!.asks.answer(id, { decision: 'allow', scope: 'once' })).toEqual({ result: 'already_answered' });
    b!.asks.endGrant('g2');
    expect(await kept).toMatchObject({ allowed: false, reason: 'grant_revoked' });
  });

  it('on an instance that joined: refuses its own hops; the raiser’s ask stays the fleet’s until its own ledger revokes the grant', async () => {
    const store = new FakeFleetStore();
    const [a, b] = await fleetOf(store, 'A', 'B');
    const onA = track(a!.asks.raise(grant('g1'), DEST));
    const onB = b!.asks.raise(grant('g1'), DEST);
    const id = onlyAskId(store);
    await until(() => b!.asks.list()[0]?.ask === id, 'B waits on A’s ask');
    b!.asks.endGrant('g1');
    expect(await onB).toEqual({ allowed: false, ask: id, reason: 'grant_revoked' });
    await until(() => store.pending.size === 1, 'the ask is still pending');
    expect(onA.value).toBeUndefined();
    a!.asks.endGrant('g1');
    expect(await onA.promise).toEqual({ allowed: false, ask: id, reason: 'grant_revoked' });
  });
});

describe('answers for the grant’s life in a fleet', () => {
  it('keeps an answer with scope grant once, on the answering instance, with (grant, destination, decision), and reports kept', async () => {
    const store = new FakeFleetStore();
    const [a, b, c] = await fleetOf(store, 'A', 'B', 'C');
    const held = [a!.asks.raise(grant('g1'), DEST), b!.asks.raise(grant('g1'), DEST)];
    const id = onlyAskId(store);
    expect(await c!.asks.answer(id, { decision: 'allow', scope: 'grant' })).toMatchObject({ result: 'answered', kept: true });
    expect(await Promise.all(held)).toEqual([
      { allowed: true, ask: id, scope: 'grant' },
      { allowed: true, ask: id, scope: 'grant' },
    ]);
    expect([a!, b!, c!].flatMap((i) => i.kept)).toEqual([['g1', DEST, 'allow']]);
    expect(c!.asks.standingAnswer('g1', DEST)).toBe('allow');
  });

  it.each([
    { on: 'the raiser', behaviour: 'refuse' },
    { on: 'the raiser', behaviour: 'throw' },
    { on: 'a bystander', behaviour: 'refuse' },
    { on: 'a bystander', behaviour: 'throw' },
  ] as const)('on $on, a ledger that does not keep it ($behaviour): kept false, and the held hops still get the answer', async ({ on, behaviour }) => {
    const store = new FakeFleetStore();
    const [a, c] = await fleetOf(store, 'A', 'C');
    const answering = on === 'the raiser' ? a! : c!;
    answering.keepBehaviour = behaviour;
    const held = a!.asks.raise(grant('g1'), DEST);
    const id = onlyAskId(store);
    expect(await answering.asks.answer(id, { decision: 'deny', scope: 'grant' })).toMatchObject({ result: 'answered', kept: false });
    expect(await held).toEqual({ allowed: false, ask: id, reason: 'approval_denied' });
    expect(answering.kept).toEqual([['g1', DEST, 'deny']]);
    expect(answering.storeErrors).toHaveLength(behaviour === 'throw' ? 1 : 0);
  });
});

describe('events in a fleet', () => {
  it.each(['prompt', 'held'] as const)('each instance publishes ask once and ask_answered once per ask (messages %s)', async (messages) => {
    const store = new FakeFleetStore();
    const [a, b, c] = await fleetOf(store, 'A', 'B', 'C');
    if (messages === 'held') store.held = [];
    const held = [a!.asks.raise(grant('g1'), DEST), b!.asks.raise(grant('g1'), DEST), b!.asks.raise(grant('g1'), DEST)];
    const id = onlyAskId(store);
    await until(() => b!.asks.list()[0]?.ask === id, 'B waits on A’s ask');
    expect(await c!.asks.answer(id, { decision: 'allow', scope: 'once' })).toMatchObject({ result: 'answered' });
    store.release();
    await Promise.all(held);
    await until(() => [a!, b!, c!].every((i) => count(i, 'ask_answered', id) > 0), 'every instance announced the answer');
    // Answers that lose, and more turns of the loop, announce nothing more.
    for (const instance of [a!, b!, c!]) expect((await instance.asks.answer(id, { decision: 'deny', scope: 'once' })).result).toBe('already_answered');
    await new Promise<void>((resolve) => realImmediate(resolve));
    for (const instance of [a!, b!, c!]) {
      expect({ instance: instance.name, ask: count(instance, 'ask', id), answered: count(instance, 'ask_answered', id) }).toEqual({ instance: instance.name, ask: 1, answered: 1 });
      expect(instance.events.find((e) => e.kind === 'ask')?.data).toMatchObject({ ask: id, grant: 'g1', destination: DEST });
      expect(instance.events.find((e) => e.kind === 'ask_answered')?.data).toMatchObject({ ask: id, grant: 'g1', destination: DEST, decision: 'allow', scope: 'once', answeredBy: 'admin' });
    }
  });
});

describe('memoryStandingAnswers', () => {
  it('keeps an answer per grant and destination; a later answer replaces it; forget drops only that grant', async () => {
    const answers = memoryStandingAnswers();
    expect(answers.get('g1', 'https://a.test:443')).toBeUndefined();
    expect(await answers.keep('g1', 'https://a.test:443', 'allow')).toBe(true);
    await answers.keep('g2', 'https://a.test:443', 'deny');
    expect(answers.get('g1', 'https://a.test:443')).toBe('allow');
    expect(answers.get('g1', 'https://a.test:8443')).toBeUndefined();
    expect(answers.get('g2', 'https://a.test:443')).toBe('deny');
    await answers.keep('g1', 'https://a.test:443', 'deny');
    expect(answers.get('g1', 'https://a.test:443')).toBe('deny');
    answers.forget?.('g1');
    expect(answers.get('g1', 'https://a.test:443')).toBeUndefined();
    expect(answers.get('g2', 'https://a.test:443')).toBe('deny');
  });
});
