// A set for members that come and go once per connection (accepted sockets, live tunnels, pending
// deadlines), without a hash table. Each member holds its own index in the set's array under a property
// the set is given: add is a push, delete a swap with the last member.
//
// Why not Set: V8 links an OrderedHashTable it has outgrown (or compacted) to its successor, so that
// live iterators can follow, and keeps the old table's entries. A Set that adds and deletes a member
// per connection is rehashed every few dozen operations. Once one of those tables is in the old
// generation (a full GC promotes whatever is live, and so the table in use), every later table hangs off
// it, and every member those tables held is copied by each scavenge and then promoted, though none of
// them is reachable: measured on `sluice start` under 32 concurrent new tunnels, 1.9 MB (Node 20) and
// 7.3 MB (Node 24) surviving each scavenge instead of 0.18 MB, scavenges of 5-15 ms instead of 1.5, and a
// full GC every dozen scavenges (ADR 0025). An array's old backing store links to nothing.

/**
 * The property a member's index is kept in: a field its class declares (`-1` when in no set), or a
 * symbol its creator sets on every member so that all keep one shape. A member is in at most one set
 * per property at a time.
 */
export type SlotKey = string | symbol;

type Slotted = Record<SlotKey, unknown>;

export class SlotSet<T extends object> implements Iterable<T> {
  private readonly members: T[] = [];

  constructor(private readonly slot: SlotKey) {}

  get size(): number {
    return this.members.length;
  }

  has(member: T): boolean {
    return this.indexOf(member) >= 0;
  }

  add(member: T): void {
    if (this.indexOf(member) >= 0) return;
    (member as Slotted)[this.slot] = this.members.length;
    this.members.push(member);
  }

  delete(member: T): boolean {
    const index = this.indexOf(member);
    if (index < 0) return false;
    const last = this.members.pop() as T;
    if (last !== member) {
      this.members[index] = last;
      (last as Slotted)[this.slot] = index;
    }
    (member as Slotted)[this.slot] = -1;
    return true;
  }

  /** The members now, in no particular order; deleting or adding during the walk does not disturb it. */
  [Symbol.iterator](): Iterator<T> {
    return this.members.slice()[Symbol.iterator]();
  }

  /** -1 unless `member` is in this set (its slot may be stale from another set using the same property). */
  private indexOf(member: T): number {
    const index = (member as Slotted)[this.slot];
    return typeof index === 'number' && index >= 0 && this.members[index] === member ? index : -1;
  }
}
