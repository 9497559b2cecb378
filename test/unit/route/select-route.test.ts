// Specifies the PAC route cache (review 2026-12 finding 15): answers are cached per scheme://host:port
// and evicted least recently used, one at a time. Before, a full cache was cleared at once, so one
// principal churning unique names made every principal's routes go back through the PAC queue.
import { describe, expect, it } from 'vitest';
import { canonicalize } from '../../../src/authority/index.js';
import { ok, type CanonicalDestination } from '../../../src/core/index.js';
import type { PacSource } from '../../../src/route/index.js';
import { pacSelector } from '../../../src/route/select-route.js';

/** A PacSource stand-in whose script answers DIRECT and counts the calls per host and principal. */
function countingSource(): { source: PacSource; calls: Map<string, number>; principals: string[] } {
  const calls = new Map<string, number>();
  const principals: string[] = [];
  const script = {
    findProxy: (_url: string, host: string, principal: string) => {
      calls.set(host, (calls.get(host) ?? 0) + 1);
      principals.push(principal);
      return Promise.resolve(ok('DIRECT'));
    },
  };
  return { source: { current: script, lastError: null, stop: () => undefined } as unknown as PacSource, calls, principals };
}

function dest(authority: string): CanonicalDestination {
  const parsed = canonicalize(authority);
  if (!parsed.ok) throw new Error(parsed.reason);
  return parsed.value;
}

describe('pacSelector route cache', () => {
  it('keeps a route in use while one principal churns more unique names than the cache holds (default 10,000)', async () => {
    const { source, calls } = countingSource();
    const selector = pacSelector(source, {});
    const victim = dest('api.victim.test:443');
    expect((await selector.select(victim, 'connect', null, 'victim')).ok).toBe(true);
    for (let i = 0; i < 12_000; i += 1) {
      await selector.select(dest(`n${i}.churn.test:443`), 'connect', null, 'attacker');
      if (i % 1_000 === 999) await selector.select(victim, 'connect', null, 'victim');
    }
    expect(calls.get('api.victim.test')).toBe(1);
  });

  it('evicts the least recently used route first, one at a time', async () => {
    const { source, calls } = countingSource();
    const selector = pacSelector(source, {}, undefined, 3);
    for (const host of ['a.test', 'b.test', 'c.test']) await selector.select(dest(`${host}:443`), 'connect', null, 'p');
    await selector.select(dest('a.test:443'), 'connect', null, 'p'); // a is now the most recently used
    await selector.select(dest('d.test:443'), 'connect', null, 'p'); // evicts b only
    for (const host of ['a.test', 'c.test', 'd.test']) await selector.select(dest(`${host}:443`), 'connect', null, 'p');
    expect([...calls.entries()]).toEqual([
      ['a.test', 1],
      ['b.test', 1],
      ['c.test', 1],
      ['d.test', 1],
    ]);
    await selector.select(dest('b.test:443'), 'connect', null, 'p');
    expect(calls.get('b.test')).toBe(2);
  });

  it('passes the principal to the PAC queue, and the route it chose does not depend on it', async () => {
    const { source, principals } = countingSource();
    const selector = pacSelector(source, {});
    const first = await selector.select(dest('x.test:443'), 'connect', null, 'a');
    const second = await selector.select(dest('x.test:443'), 'connect', null, 'b');
    expect(principals).toEqual(['a']);
    expect(second).toEqual(first);
  });
});
