// Idle timeouts for tunnels without a timer per socket: a tunnel marks itself active on every chunk
// (one boolean store), and one interval per idle limit ends the tunnels that stayed unmarked for the
// whole limit. socket.setTimeout instead costs a timer per socket and a timer refresh per read and write.
// A tunnel is ended between `idleMs` and `idleMs + 2 × periodMs` after its last byte (period: a quarter
// of the limit, 10 ms to 1 s).

export interface IdleWatched {
  /** Set by the tunnel on every chunk; cleared by the sweep. */
  active: boolean;
  /** When the sweep last saw the tunnel active (ms, the sweep's clock). */
  idleSinceMs: number;
  endIdle(): void;
}

const MIN_PERIOD_MS = 10;
const MAX_PERIOD_MS = 1_000;

export class IdleSweep {
  private static readonly byLimit = new Map<number, IdleSweep>();
  private readonly watched = new Set<IdleWatched>();
  private timer: NodeJS.Timeout | null = null;
  readonly periodMs: number;

  /** The shared sweep for one idle limit. */
  static for(idleMs: number): IdleSweep {
    let sweep = IdleSweep.byLimit.get(idleMs);
    if (sweep === undefined) {
      sweep = new IdleSweep(idleMs);
      IdleSweep.byLimit.set(idleMs, sweep);
    }
    return sweep;
  }

  private constructor(readonly idleMs: number) {
    this.periodMs = Math.min(MAX_PERIOD_MS, Math.max(MIN_PERIOD_MS, Math.floor(idleMs / 4)));
  }

  add(item: IdleWatched): void {
    item.idleSinceMs = Date.now();
    this.watched.add(item);
    if (this.timer === null) {
      this.timer = setInterval(() => this.sweep(), this.periodMs);
      this.timer.unref();
    }
  }

  delete(item: IdleWatched): void {
    this.watched.delete(item);
  }

  private sweep(): void {
    // The interval stops itself once nothing is watched (not in delete(): one short tunnel at a time
    // would otherwise start and stop an interval per tunnel).
    if (this.watched.size === 0 && this.timer !== null) {
      clearInterval(this.timer);
      this.timer = null;
      return;
    }
    const now = Date.now();
    const expired: IdleWatched[] = [];
    for (const item of this.watched) {
      if (item.active) {
        item.active = false;
        item.idleSinceMs = now;
      } else if (now - item.idleSinceMs >= this.idleMs) {
        expired.push(item);
      }
    }
    // Ended after the walk: ending a tunnel removes it from the set.
    for (const item of expired) item.endIdle();
  }
}
