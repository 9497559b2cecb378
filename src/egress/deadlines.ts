// Connect deadlines without a timer per dial: pending dials sit in a set that one interval per timeout
// value sweeps. A timer per dial (setTimeout, then clearTimeout on connect) was a visible share of tunnel
// setup. A deadline fires between `timeoutMs` and `timeoutMs + periodMs` (period: a tenth of the
// timeout, 5 to 250 ms).
import { PeriodicSweep, sweepPeriodMs, type SweepItem } from '../core/index.js';

export interface Deadline extends SweepItem {
  readonly atMs: number;
  readonly expire: () => void;
}

/** One sweep per timeout value, shared by every dial (or request head) with that timeout. */
export class Deadlines {
  private static readonly byTimeout = new Map<number, Deadlines>();
  private readonly sweep: PeriodicSweep<Deadline>;

  /** The shared set for one timeout value. */
  static for(timeoutMs: number): Deadlines {
    let deadlines = Deadlines.byTimeout.get(timeoutMs);
    if (deadlines === undefined) {
      deadlines = new Deadlines(timeoutMs);
      Deadlines.byTimeout.set(timeoutMs, deadlines);
    }
    return deadlines;
  }

  private constructor(private readonly timeoutMs: number) {
    this.sweep = new PeriodicSweep<Deadline>(
      sweepPeriodMs(timeoutMs, 1 / 10, 5, 250),
      (deadline, now) => now >= deadline.atMs,
      (deadline) => deadline.expire(),
    );
  }

  /** Calls `expire` once `timeoutMs` have passed, unless the deadline is cleared first. */
  start(expire: () => void): Deadline {
    const deadline: Deadline = { atMs: Date.now() + this.timeoutMs, expire, sweepSlot: -1 };
    this.sweep.add(deadline);
    return deadline;
  }

  /** Watches a deadline the caller made itself (its `atMs` set from this set's timeout). */
  add(deadline: Deadline): void {
    this.sweep.add(deadline);
  }

  clear(deadline: Deadline): void {
    this.sweep.delete(deadline);
  }
}
