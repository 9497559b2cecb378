// A grant's byte budget on one instance of a fleet (FleetByteBudget): what a principal streaming fast on
// several instances could try is to spend past maxBytes while reservations are in flight. The bound is
// one chunk per instance; once the store says the budget is spent, nothing past what was reserved goes.
import { describe, expect, it } from 'vitest';
import { ok, type Verdict } from '../../../src/core/index.js';
import { byteChunk, FleetByteBudget, type SharedBudgets } from '../../../src/grant/index.js';

/** A store holding one budget, answering reservations when told to (so the test controls the race). */
function store(maxBytes: number): SharedBudgets & { used: number; pending: (() => void)[]; flush(): Promise<void> } {
  const s = {
    used: 0,
    pending: [] as (() => void)[],
    acquire: (): Promise<Verdict<string>> => Promise.resolve(ok('lease')),
    release: (): void => undefined,
    reserveBytes: (_id: string, want: number): Promise<number> =>
      new Promise((resolve) => {
        s.pending.push(() => {
          const granted = Math.max(0, Math.min(want, maxBytes - s.used));
          s.used += granted;
          resolve(granted);
        });
      }),
    async flush(): Promise<void> {
      while (s.pending.length > 0) {
        s.pending.shift()?.();
        await Promise.resolve();
        await Promise.resolve();
      }
    },
  };
  return s;
}

describe('byteChunk', () => {
  it('is a 64th of the budget, at least 16 KiB and at most 1 MiB', () => {
    expect(byteChunk(1000)).toBe(16 << 10);
    expect(byteChunk(64 << 20)).toBe(1 << 20);
    expect(byteChunk(1 << 30)).toBe(1 << 20);
    expect(byteChunk(4 << 20)).toBe(64 << 10);
  });
});

describe('FleetByteBudget', () => {
  it('relays within what it reserved and asks for the next chunk before it runs out', async () => {
    const s = store(10 << 20);
    const budget = new FleetByteBudget('g', 10 << 20, s, () => undefined);
    await Promise.all([budget.prime(), s.flush()]);
    const chunk = budget.chunk;
    expect(budget.take(chunk / 4)).toBe(true);
    expect(s.pending).toHaveLength(0);
    expect(budget.take(chunk / 2)).toBe(true);
    // Below half a chunk left: the next reservation is on its way.
    expect(s.pending).toHaveLength(1);
    await s.flush();
    expect(budget.take(chunk)).toBe(true);
  });

  it('goes on for at most one chunk while a reservation is in flight (the overshoot bound), then stops', async () => {
    const s = store(100 << 20);
    const budget = new FleetByteBudget('g', 100 << 20, s, () => undefined);
    await Promise.all([budget.prime(), s.flush()]);
    const chunk = budget.chunk;
    // The store does not answer: one chunk reserved, one more allowed on credit, then nothing.
    expect(budget.take(chunk)).toBe(true);
    expect(budget.take(chunk)).toBe(true);
    expect(budget.take(1)).toBe(false);
  });

  it('holds a fast stream while the reservation is in flight instead of cutting it, and never counts refused bytes', async () => {
    const s = store(100 << 20);
    const budget = new FleetByteBudget('g', 100 << 20, s, () => undefined);
    await Promise.all([budget.prime(), s.flush()]);
    const chunk = budget.chunk;
    expect(budget.take(2 * chunk)).toBe(true);
    expect(budget.take(chunk)).toBe(false);
    expect(budget.bytes).toBe(2 * chunk);
    const later = budget.whenAvailable();
    expect(later).not.toBeNull();
    await s.flush();
    expect(await later).toBe(true);
    expect(budget.take(chunk)).toBe(true);
  });

  it('never relays past what was reserved once the store says the budget is spent, across instances', async () => {
    const max = 40 << 10;
    const s = store(max);
    const a = new FleetByteBudget('g', max, s, () => undefined);
    const b = new FleetByteBudget('g', max, s, () => undefined);
    await Promise.all([a.prime(), b.prime(), s.flush()]);
    let relayed = 0;
    for (let i = 0; i < 100; i += 1) {
      for (const budget of [a, b]) if (budget.take(1024)) relayed += 1024;
      await s.flush();
    }
    // Fleet-wide: at most maxBytes plus one chunk per instance.
    expect(relayed).toBeGreaterThanOrEqual(max);
    expect(relayed).toBeLessThanOrEqual(max + 2 * a.chunk);
    expect(a.hasLeft() || b.hasLeft()).toBe(false);
  });

  it('refuses up front when the budget was spent elsewhere (hasLeft after the store answers 0)', async () => {
    const s = store(0);
    const budget = new FleetByteBudget('g', 1, s, () => undefined);
    await Promise.all([budget.prime(), s.flush()]);
    expect(budget.hasLeft()).toBe(false);
    expect(budget.take(1)).toBe(false);
    expect(budget.whenAvailable()).toBeNull();
  });

  it('reports a store error and stops at one chunk of credit instead of relaying on', async () => {
    const errors: unknown[] = [];
    const failing: SharedBudgets = { acquire: () => Promise.resolve(ok('l')), release: () => undefined, reserveBytes: () => Promise.reject(new Error('store away')) };
    const budget = new FleetByteBudget('g', 1 << 20, failing, (e) => void errors.push(e));
    await budget.prime();
    expect(errors).toHaveLength(1);
    expect(budget.take(budget.chunk)).toBe(true);
    expect(budget.take(1)).toBe(false);
  });
});
