// Specifies the PAC waiting line (review 2026-12 finding 15): one first-in-first-out line per principal,
// principals served in turn, a cap per principal (its own refusal) and one for all.
import { describe, expect, it } from 'vitest';
import { PacQueue } from '../../../src/route/pac-queue.js';

function drain<T>(queue: PacQueue<T>): T[] {
  const out: T[] = [];
  for (let item = queue.shift(); item !== undefined; item = queue.shift()) out.push(item);
  return out;
}

describe('PacQueue', () => {
  it('keeps one principal’s calls in order', () => {
    const q = new PacQueue<string>(10, 10);
    for (const item of ['a1', 'a2', 'a3']) expect(q.push('a', item)).toBeNull();
    expect(drain(q)).toEqual(['a1', 'a2', 'a3']);
  });

  it('serves principals in turn, so a flood delays another principal by one call, not by the flood', () => {
    const q = new PacQueue<string>(100, 50);
    for (let i = 0; i < 40; i += 1) q.push('attacker', `x${i}`);
    q.push('victim', 'v1');
    q.push('victim', 'v2');
    q.push('third', 't1');
    expect(drain(q).slice(0, 7)).toEqual(['x0', 'v1', 't1', 'x1', 'v2', 'x2', 'x3']);
  });

  it('refuses a principal whose line is full with principal_full, and still queues another principal', () => {
    const q = new PacQueue<string>(100, 2);
    expect([q.push('a', '1'), q.push('a', '2'), q.push('a', '3')]).toEqual([null, null, 'principal_full']);
    expect(q.waitingFor('a')).toBe(2);
    expect(q.push('b', '1')).toBeNull();
    q.shift();
    expect(q.push('a', '3')).toBeNull();
  });

  it('refuses anyone with all_full once every line together holds maxTotal', () => {
    const q = new PacQueue<string>(3, 2);
    expect([q.push('a', '1'), q.push('a', '2'), q.push('b', '1'), q.push('c', '1')]).toEqual([null, null, null, 'all_full']);
    expect(q.push('a', '3')).toBe('principal_full');
    q.shift();
    expect(q.push('c', '1')).toBeNull();
  });

  it('is empty once drained', () => {
    const q = new PacQueue<number>(5, 5);
    q.push('a', 1);
    expect(drain(q)).toEqual([1]);
    expect(q.shift()).toBeUndefined();
    expect(q.waitingFor('a')).toBe(0);
  });
});
