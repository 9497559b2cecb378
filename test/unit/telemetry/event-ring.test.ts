// Specifies the supervisor's event ring (issue 27 item 2): ids increase from 1, the ring keeps the newest
// `capacity` events, since(afterId) returns what a reconnecting reader missed and names the ids it can no
// longer have, filters match by kind, grant and generation (a gap always passes), and listeners are called
// synchronously in the publish path until they unsubscribe.
import { describe, expect, it } from 'vitest';
import { DEFAULT_EVENT_RING_CAPACITY, EVENT_KINDS, EventRing, matchesFilter, type SluiceEvent } from '../../../src/telemetry/index.js';

const SCOPE_A = { grant: 'a', generation: 'run-1' } as const;
const SCOPE_B = { grant: 'b', generation: null } as const;

function fill(ring: EventRing, count: number): void {
  for (let i = 0; i < count; i++) ring.publish('decision', SCOPE_A, { n: i + 1 });
}

const ids = (events: readonly SluiceEvent[]): number[] => events.map((e) => e.id);

describe('EventRing', () => {
  it('numbers events from 1 and reports the newest id', () => {
    const ring = new EventRing(4);
    expect(ring.lastId).toBe(0);
    const first = ring.publish('grant', SCOPE_B, { action: 'issue' });
    expect(first).toEqual({ id: 1, kind: 'grant', grant: 'b', generation: null, data: { action: 'issue' } });
    fill(ring, 2);
    expect(ring.lastId).toBe(3);
    expect(ring.capacity).toBe(4);
    expect(new EventRing().capacity).toBe(DEFAULT_EVENT_RING_CAPACITY);
  });

  it.each([0, -1, 1.5, Number.NaN])('refuses capacity %s', (capacity) => {
    expect(() => new EventRing(capacity)).toThrow(RangeError);
  });

  it('since(afterId) returns the events after afterId, oldest first, and nothing lost while the ring holds them', () => {
    const ring = new EventRing(5);
    fill(ring, 5);
    expect(ids(ring.since(0).events)).toEqual([1, 2, 3, 4, 5]);
    expect(ring.since(0).lost).toBeNull();
    expect(ids(ring.since(3).events)).toEqual([4, 5]);
    expect(ring.since(5)).toEqual({ events: [], lost: null });
    // A reader from beyond the newest id (an earlier process's ids) gets nothing from the ring itself.
    expect(ring.since(99)).toEqual({ events: [], lost: null });
  });

  it('wraps: keeps the newest `capacity` events and names the ids a reader lost (from..to inclusive)', () => {
    const ring = new EventRing(3);
    fill(ring, 10);
    expect(ids(ring.since(0).events)).toEqual([8, 9, 10]);
    expect(ring.since(0).lost).toEqual({ from: 1, to: 7 });
    expect(ring.since(5)).toMatchObject({ lost: { from: 6, to: 7 } });
    expect(ids(ring.since(5).events)).toEqual([8, 9, 10]);
    // Exactly at the oldest held id: nothing lost.
    expect(ring.since(7).lost).toBeNull();
    expect(ids(ring.since(8).events)).toEqual([9, 10]);
    expect(ring.since(0).events.map((e) => e.data['n'])).toEqual([8, 9, 10]);
  });

  it('wraps many times over without confusing a slot with an older event of the same slot', () => {
    const ring = new EventRing(7);
    fill(ring, 7 * 13 + 3);
    const all = ring.since(0);
    expect(ids(all.events)).toEqual([88, 89, 90, 91, 92, 93, 94]);
    expect(all.lost).toEqual({ from: 1, to: 87 });
  });

  it('calls every listener synchronously with each published event, and not after unsubscribe', () => {
    const ring = new EventRing(2);
    const seenA: number[] = [];
    const seenB: number[] = [];
    const offA = ring.subscribe((e) => void seenA.push(e.id));
    const offB = ring.subscribe((e) => void seenB.push(e.id));
    expect(ring.subscriberCount).toBe(2);
    fill(ring, 2);
    expect(seenA).toEqual([1, 2]);
    offA();
    fill(ring, 1);
    expect(seenA).toEqual([1, 2]);
    expect(seenB).toEqual([1, 2, 3]);
    offB();
    expect(ring.subscriberCount).toBe(0);
  });

  it('wants decisions only once a reader has subscribed (a proxy nobody watches builds no decision event)', () => {
    const ring = new EventRing(2);
    expect(ring.wantsDecisions).toBe(false);
    const off = ring.subscribe(() => undefined);
    expect(ring.wantsDecisions).toBe(true);
    off();
    expect(ring.wantsDecisions).toBe(true);
  });

  it('declares the SSE event names of the interface', () => {
    expect(EVENT_KINDS).toEqual(['decision', 'ask', 'ask_answered', 'grant', 'gap']);
  });
});

describe('matchesFilter', () => {
  const event = (kind: SluiceEvent['kind'], grant: string | null, generation: string | null): SluiceEvent => ({ id: 1, kind, grant, generation, data: {} });

  it.each([
    [{}, event('decision', 'a', 'run-1'), true],
    [{ grant: 'a' }, event('decision', 'a', 'run-1'), true],
    [{ grant: 'a' }, event('decision', 'b', 'run-1'), false],
    [{ grant: 'a' }, event('decision', null, null), false],
    [{ generation: 'run-1' }, event('grant', 'b', 'run-1'), true],
    [{ generation: 'run-1' }, event('grant', 'b', null), false],
    [{ kinds: new Set(['ask', 'grant'] as const) }, event('grant', 'a', null), true],
    [{ kinds: new Set(['ask', 'grant'] as const) }, event('decision', 'a', null), false],
    [{ grant: 'a', generation: 'run-1', kinds: new Set(['decision'] as const) }, event('decision', 'a', 'run-2'), false],
    // A gap concerns every reader: it passes any filter.
    [{ grant: 'a', generation: 'x', kinds: new Set(['ask'] as const) }, event('gap', null, null), true],
  ])('filter %j and %j → %s', (filter, e, expected) => {
    expect(matchesFilter(e, filter)).toBe(expected);
  });
});
