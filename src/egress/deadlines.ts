// Connect deadlines without a timer per dial: pending dials sit in a set that one interval per timeout
// value sweeps. A timer per dial (setTimeout, then clearTimeout on connect) was a visible share of tunnel
// setup. A deadline fires between `timeoutMs` and `timeoutMs + periodMs` (period: a tenth of the
// timeout, 5 to 250 ms).

export interface Deadline {
  readonly atMs: number;
  readonly expire: () => void;
}

const MIN_PERIOD_MS = 5;
const MAX_PERIOD_MS = 250;

export class Deadlines {
  private static readonly byTimeout = new Map<number, Deadlines>();
  private readonly pending = new Set<Deadline>();
  private timer: NodeJS.Timeout | null = null;
  private readonly periodMs: number;

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
    this.periodMs = Math.min(MAX_PERIOD_MS, Math.max(MIN_PERIOD_MS, Math.floor(timeoutMs / 10)));
  }

  /** Calls `expire` once `timeoutMs` have passed, unless the deadline is cleared first. */
  start(expire: () => void): Deadline {
    const deadline = { atMs: Date.now() + this.timeoutMs, expire };
    this.pending.add(deadline);
    if (this.timer === null) {
      this.timer = setInterval(() => this.sweep(), this.periodMs);
      this.timer.unref();
    }
    return deadline;
  }

  clear(deadline: Deadline): void {
    this.pending.delete(deadline);
  }

  private sweep(): void {
    // The interval stops itself once nothing is pending (not in clear(): one dial at a time would
    // otherwise start and stop an interval per dial).
    if (this.pending.size === 0 && this.timer !== null) {
      clearInterval(this.timer);
      this.timer = null;
      return;
    }
    const now = Date.now();
    const due: Deadline[] = [];
    for (const deadline of this.pending) if (now >= deadline.atMs) due.push(deadline);
    for (const deadline of due) {
      this.clear(deadline);
      deadline.expire();
    }
  }
}
