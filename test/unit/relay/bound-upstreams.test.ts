// BoundUpstreams (src/relay/bound-upstreams.ts): a connection a proxy authenticated serves one principal
// only, and the idle set is bounded in count and age.
import { describe, expect, it } from 'vitest';
import type { Dispatcher } from 'undici';
import { BoundUpstreams } from '../../../src/relay/index.js';

interface Fake {
  readonly id: number;
  readonly origin: string;
  closed: boolean;
  close(): Promise<void>;
}

function harness(options = { maxIdlePerKey: 2, maxIdle: 3, maxIdleMs: 1000 }) {
  let clock = 0;
  const made: Fake[] = [];
  const pool = new BoundUpstreams(
    (origin) => {
      const fake: Fake = { id: made.length, origin, closed: false, close: async () => void (fake.closed = true) };
      made.push(fake);
      return fake as unknown as Dispatcher;
    },
    options,
    () => clock,
  );
  return { pool, made, tick: (ms: number) => void (clock += ms) };
}
const idOf = (d: Dispatcher): number => (d as unknown as Fake).id;
const proxy = 'http://corp.test:3128';

describe('BoundUpstreams', () => {
  it('gives a principal back its own connection, never another principal’s', () => {
    const { pool } = harness();
    const a = BoundUpstreams.key('grant-a', proxy);
    const b = BoundUpstreams.key('grant-b', proxy);
    const first = pool.take(a, proxy, true);
    expect(first.reused).toBe(false);
    pool.give(a, first.client, true);
    const forB = pool.take(b, proxy, true);
    expect(forB.reused).toBe(false);
    expect(idOf(forB.client)).not.toBe(idOf(first.client));
    const again = pool.take(a, proxy, true);
    expect(again).toMatchObject({ reused: true });
    expect(idOf(again.client)).toBe(idOf(first.client));
  });

  it('a grant id that embeds another key cannot reach its connections', () => {
    expect(BoundUpstreams.key('a', 'http://x:1')).not.toBe(BoundUpstreams.key('a\0http://x:1', ''));
    const { pool } = harness();
    const victim = BoundUpstreams.key('a', 'http://x:1');
    const c = pool.take(victim, 'http://x:1', true);
    pool.give(victim, c.client, true);
    expect(pool.take(BoundUpstreams.key('a\0http://x', ':1'), 'http://x:1', true).reused).toBe(false);
  });

  it('without reuse (a request with a body) it always opens a new connection, and keeps the idle one', () => {
    const { pool } = harness();
    const a = BoundUpstreams.key('a', proxy);
    const c = pool.take(a, proxy, true);
    pool.give(a, c.client, true);
    expect(pool.take(a, proxy, false).reused).toBe(false);
    expect(pool.take(a, proxy, true).reused).toBe(true);
  });

  it('closes what it does not keep: a failed exchange, a closed client, past the per-key bound', () => {
    const { pool, made } = harness();
    const a = BoundUpstreams.key('a', proxy);
    const failed = pool.take(a, proxy, true).client;
    pool.give(a, failed, false);
    expect(made[idOf(failed)]?.closed).toBe(true);
    const three = [pool.take(a, proxy, true), pool.take(a, proxy, true), pool.take(a, proxy, true)];
    for (const t of three) pool.give(a, t.client, true);
    expect(three.map((t) => made[idOf(t.client)]?.closed)).toEqual([false, false, true]);
  });

  it('an idle connection past maxIdleMs is closed, not reused', () => {
    const { pool, made, tick } = harness();
    const a = BoundUpstreams.key('a', proxy);
    const c = pool.take(a, proxy, true).client;
    pool.give(a, c, true);
    tick(1000);
    const next = pool.take(a, proxy, true);
    expect(next.reused).toBe(false);
    expect(made[idOf(c)]?.closed).toBe(true);
  });

  it('bounds the idle set in all: the least recently used principal’s connections go first', () => {
    const { pool, made } = harness();
    const keys = ['p1', 'p2', 'p3', 'p4'].map((g) => BoundUpstreams.key(g, proxy));
    const clients = keys.map((k) => pool.take(k, proxy, true).client);
    keys.forEach((k, i) => pool.give(k, clients[i] as Dispatcher, true));
    expect(clients.map((c) => made[idOf(c)]?.closed)).toEqual([true, false, false, false]);
    expect(pool.take(keys[0] as string, proxy, true).reused).toBe(false);
    expect(pool.take(keys[3] as string, proxy, true).reused).toBe(true);
  });

  it('close() closes every idle connection', async () => {
    const { pool, made } = harness();
    const a = BoundUpstreams.key('a', proxy);
    pool.give(a, pool.take(a, proxy, true).client, true);
    await pool.close();
    expect(made.every((f) => f.closed)).toBe(true);
    expect(pool.take(a, proxy, true).reused).toBe(false);
  });
});
