// PeriodicSweep: due items are acted on once, after the walk, and leave the set; the interval starts with
// the first item and stops itself once a tick finds nothing, so no timer is left behind.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { PeriodicSweep, sweepPeriodMs } from '../../../src/core/index.js';
import { waitUntil } from '../../support/wait.js';


describe('PeriodicSweep', () => {
  afterEach(() => vi.restoreAllMocks());

  it('acts on each due item once, leaves the others, and stops its interval when empty', async () => {
    const started = vi.spyOn(globalThis, 'setInterval');
    const stopped = vi.spyOn(globalThis, 'clearInterval');
    const acted: string[] = [];
    const due = new Set(['a']);
    const item = (name: string) => ({ name, sweepSlot: -1 });
    const [a, b, c] = [item('a'), item('b'), item('c')];
    const sweep = new PeriodicSweep<{ name: string; sweepSlot: number }>(5, (it) => due.has(it.name), (it) => acted.push(it.name));
    sweep.add(a);
    sweep.add(b);
    expect(started).toHaveBeenCalledTimes(1);
    await waitUntil(() => acted.length === 1, { timeoutMs: 2000, label: 'a acted on' });
    due.add('b');
    await waitUntil(() => acted.length === 2, { timeoutMs: 2000, label: 'b acted on' });
    expect(acted).toEqual(['a', 'b']);
    await waitUntil(() => stopped.mock.calls.length === 1, { timeoutMs: 2000, label: 'interval stopped' });
    sweep.add(c);
    sweep.delete(c);
    expect([a, b, c].map((it) => it.sweepSlot)).toEqual([-1, -1, -1]);
    expect(started).toHaveBeenCalledTimes(2);
    await waitUntil(() => stopped.mock.calls.length === 2, { timeoutMs: 2000, label: 'interval stopped again' });
    expect(acted).toEqual(['a', 'b']);
  });

  it('clamps the period to its bounds', () => {
    expect(sweepPeriodMs(300_000, 1 / 4, 10, 1_000)).toBe(1_000);
    expect(sweepPeriodMs(400, 1 / 4, 10, 1_000)).toBe(100);
    expect(sweepPeriodMs(8, 1 / 4, 10, 1_000)).toBe(10);
  });
});
