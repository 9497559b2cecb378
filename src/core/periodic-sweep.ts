// A set of items visited by one interval instead of a timer each (idle tunnels, dial deadlines, first
// request heads). The interval starts with the first item and stops itself on a tick that finds the set
// empty, not on the last delete: one short-lived item at a time would otherwise start and stop an
// interval per item. Unref'd: it never keeps the process alive. Items come and go once per connection,
// so they sit in a SlotSet, not a Set (slot-set.ts says why).
import { SlotSet } from './slot-set.js';

/** An item of a sweep: `sweepSlot` is the sweep's (-1 while in none); an item is in one sweep at a time. */
export interface SweepItem {
  sweepSlot: number;
}

export class PeriodicSweep<T extends SweepItem> {
  private readonly items = new SlotSet<T>('sweepSlot');
  private timer: NodeJS.Timeout | null = null;

  /** `due` is asked, once per tick and item, whether the item is done; those are handed to `act` after the walk. */
  constructor(
    private readonly periodMs: number,
    private readonly due: (item: T, nowMs: number) => boolean,
    private readonly act: (item: T) => void,
  ) {}

  add(item: T): void {
    this.items.add(item);
    if (this.timer === null) {
      this.timer = setInterval(() => this.tick(), this.periodMs);
      this.timer.unref();
    }
  }

  delete(item: T): void {
    this.items.delete(item);
  }

  private tick(): void {
    if (this.items.size === 0 && this.timer !== null) {
      clearInterval(this.timer);
      this.timer = null;
      return;
    }
    const now = Date.now();
    const done: T[] = [];
    for (const item of this.items) if (this.due(item, now)) done.push(item);
    // Acted on after the walk: acting may delete the item from the set.
    for (const item of done) {
      this.items.delete(item);
      this.act(item);
    }
  }
}

/** The sweep period for a limit: `fraction` of it, clamped to [minMs, maxMs]. */
export function sweepPeriodMs(limitMs: number, fraction: number, minMs: number, maxMs: number): number {
  return Math.min(maxMs, Math.max(minMs, Math.floor(limitMs * fraction)));
}
