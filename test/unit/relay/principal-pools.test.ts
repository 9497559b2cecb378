// PrincipalPools (src/relay/principal-pools.ts): each principal forwards on a dispatcher of its own, so a
// connection that carried one principal's request never carries another's (review 2026-12-04 finding 6);
// the set is bounded, the least recently used principal's dispatcher is closed, and drop/close end them.
import { describe, expect, it } from 'vitest';
import type { Dispatcher } from 'undici';
import { PrincipalPools } from '../../../src/relay/index.js';

interface Fake {
  readonly id: number;
  closes: number;
  destroys: number;
  close(): Promise<void>;
  destroy(): Promise<void>;
}

function harness(maxPrincipals = 3) {
  const made: Fake[] = [];
  const pools = new PrincipalPools(() => {
    const fake: Fake = {
      id: made.length,
      closes: 0,
      destroys: 0,
      close: async () => void (fake.closes += 1),
      destroy: async () => void (fake.destroys += 1),
    };
    made.push(fake);
    return fake as unknown as Dispatcher;
  }, { maxPrincipals });
  return { pools, made };
}
const fake = (d: Dispatcher): Fake => d as unknown as Fake;
const untouched = (f: Fake): boolean => f.closes === 0 && f.destroys === 0;
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('PrincipalPools', () => {
  it('gives one principal the same dispatcher every time, and two principals different ones', () => {
    const { pools, made } = harness();
    const a = pools.for('grant-a');
    expect(pools.for('grant-a')).toBe(a);
    const b = pools.for('grant-b');
    expect(b).not.toBe(a);
    expect(pools.for('grant-b')).toBe(b);
    expect(pools.for('grant-a')).toBe(a);
    expect(made).toHaveLength(2);
    expect(pools.size).toBe(2);
  });

  it('keys by the exact grant id: the empty principal, case and prefixes are all distinct', () => {
    const { pools } = harness(10);
    const ids = ['', 'a', 'A', 'a ', 'ab', 'a\0'];
    const dispatchers = ids.map((id) => pools.for(id));
    expect(new Set(dispatchers).size).toBe(ids.length);
  });

  it('beyond maxPrincipals closes the least recently used principal’s dispatcher, not a recently used one', async () => {
    const { pools, made } = harness(3);
    const a = pools.for('a');
    const b = pools.for('b');
    pools.for('c');
    // a is used again: b is now the least recently used.
    expect(pools.for('a')).toBe(a);
    pools.for('d');
    await settle();
    expect(fake(b).closes).toBe(1);
    expect(fake(b).destroys).toBe(0);
    expect(made.filter(untouched).map((f) => f.id)).toEqual([0, 2, 3]);
    expect(pools.size).toBe(3);
    // b comes back with a new dispatcher, never its closed one; that evicts c (a and d were used since).
    const b2 = pools.for('b');
    expect(b2).not.toBe(b);
    await settle();
    expect(made[2]?.closes).toBe(1);
    expect(untouched(fake(a))).toBe(true);
    expect(pools.size).toBe(3);
  });

  it('a dispatcher whose close rejects does not break eviction', async () => {
    const made: Dispatcher[] = [];
    const pools = new PrincipalPools(() => {
      const d = { close: () => Promise.reject(new Error('already destroyed')), destroy: () => Promise.resolve() } as unknown as Dispatcher;
      made.push(d);
      return d;
    }, { maxPrincipals: 1 });
    pools.for('a');
    expect(() => pools.for('b')).not.toThrow();
    await settle();
    expect(pools.size).toBe(1);
  });

  it('drop destroys only that principal’s dispatcher, and the principal then gets a new one', async () => {
    const { pools, made } = harness();
    const a = pools.for('a');
    const b = pools.for('b');
    pools.drop('a');
    await settle();
    expect(fake(a).destroys).toBe(1);
    expect(fake(a).closes).toBe(0);
    expect(untouched(fake(b))).toBe(true);
    expect(pools.size).toBe(1);
    pools.drop('a');
    pools.drop('never-seen');
    await settle();
    expect(fake(a).destroys).toBe(1);
    expect(pools.for('a')).not.toBe(a);
    expect(made).toHaveLength(3);
  });

  it('close closes every principal’s dispatcher and forgets them all', async () => {
    const { pools, made } = harness();
    pools.for('a');
    pools.for('b');
    pools.for('c');
    await pools.close();
    expect(made.map((f) => f.closes)).toEqual([1, 1, 1]);
    expect(made.every((f) => f.destroys === 0)).toBe(true);
    expect(pools.size).toBe(0);
    await pools.close();
    expect(made.map((f) => f.closes)).toEqual([1, 1, 1]);
  });
});
