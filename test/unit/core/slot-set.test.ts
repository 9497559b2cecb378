// SlotSet: a set whose members keep their own index, so a member per connection costs no hash-table
// churn (core/slot-set.ts). What it must never do: report a member it does not hold (a stale slot from
// another set, or from before a delete), lose one on a swap, or let a walk be disturbed by deletes.
import { describe, expect, it } from 'vitest';
import { SlotSet } from '../../../src/core/index.js';

interface Member {
  readonly id: number;
  slot: number;
}

const member = (id: number): Member => ({ id, slot: -1 });

describe('SlotSet', () => {
  it('adds once, deletes by swapping the last member in, and clears the slot of what it deletes', () => {
    const set = new SlotSet<Member>('slot');
    const [a, b, c] = [member(1), member(2), member(3)];
    set.add(a);
    set.add(b);
    set.add(c);
    set.add(b);
    expect(set.size).toBe(3);
    expect(set.delete(a)).toBe(true);
    expect(a.slot).toBe(-1);
    expect(c.slot).toBe(0);
    expect(set.has(a)).toBe(false);
    expect(set.delete(a)).toBe(false);
    expect([...set].map((m) => m.id).sort()).toEqual([2, 3]);
  });

  it('agrees with a Set over random adds and deletes (bounded: 5,000 operations over 64 members)', () => {
    const set = new SlotSet<Member>('slot');
    const reference = new Set<Member>();
    const members = Array.from({ length: 64 }, (_, i) => member(i));
    let seed = 7;
    const next = (): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
    for (let i = 0; i < 5_000; i++) {
      const m = members[next() % members.length] as Member;
      if (next() % 2 === 0) {
        set.add(m);
        reference.add(m);
      } else {
        expect(set.delete(m)).toBe(reference.delete(m));
      }
      expect(set.size).toBe(reference.size);
    }
    for (const m of members) expect(set.has(m)).toBe(reference.has(m));
    expect(new Set(set)).toEqual(reference);
  });

  it('does not take a member of another set sharing the property for its own', () => {
    const first = new SlotSet<Member>('slot');
    const second = new SlotSet<Member>('slot');
    const [a, b] = [member(1), member(2)];
    first.add(a);
    second.add(b);
    // a's slot (0) points at b in `second`: second must not see a, nor delete b for it.
    expect(second.has(a)).toBe(false);
    expect(second.delete(a)).toBe(false);
    expect(second.has(b)).toBe(true);
    expect(first.has(a)).toBe(true);
  });

  it('walks the members as they were when the walk began, whatever is deleted or added meanwhile', () => {
    const set = new SlotSet<Member>('slot');
    const members = [member(1), member(2), member(3), member(4)];
    for (const m of members) set.add(m);
    const seen: number[] = [];
    for (const m of set) {
      seen.push(m.id);
      set.delete(m);
      set.add(member(100 + m.id));
    }
    expect(seen.sort()).toEqual([1, 2, 3, 4]);
    expect([...set].map((m) => m.id).sort()).toEqual([101, 102, 103, 104]);
  });

  it('keeps its index under a symbol for members whose class it does not own', () => {
    const slot = Symbol('test.slot');
    const set = new SlotSet<object>(slot);
    const [a, b] = [{}, {}];
    set.add(a);
    set.add(b);
    expect(set.delete(a)).toBe(true);
    expect((b as Record<symbol, unknown>)[slot]).toBe(0);
    expect(set.has(b)).toBe(true);
  });
});
