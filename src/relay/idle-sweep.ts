// Idle timeouts for tunnels without a timer per socket: a tunnel marks itself active on every chunk
// (one boolean store), and one interval per idle limit ends the tunnels that stayed unmarked for the
// whole limit. socket.setTimeout instead costs a timer per socket and a timer refresh per read and write.
// A tunnel is ended between `idleMs` and `idleMs + 2 × periodMs` after its last byte (period: a quarter
// of the limit, 10 ms to 1 s).
import { PeriodicSweep, sweepPeriodMs, type SweepItem } from '../core/index.js';

export interface IdleWatched extends SweepItem {
  /** Set by the tunnel on every chunk; cleared by the sweep. */
  active: boolean;
  /** When the sweep last saw the tunnel active (ms, the sweep's clock). */
  idleSinceMs: number;
  endIdle(): void;
}

/** One sweep per idle limit, shared by every tunnel with that limit. */
export class IdleSweep {
  private static readonly byLimit = new Map<number, IdleSweep>();
  private readonly sweep: PeriodicSweep<IdleWatched>;

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
    this.sweep = new PeriodicSweep<IdleWatched>(
      sweepPeriodMs(idleMs, 1 / 4, 10, 1_000),
      (item, now) => {
        if (!item.active) return now - item.idleSinceMs >= idleMs;
        item.active = false;
        item.idleSinceMs = now;
        return false;
      },
      (item) => item.endIdle(),
    );
  }

  add(item: IdleWatched): void {
    item.idleSinceMs = Date.now();
    this.sweep.add(item);
  }

  delete(item: IdleWatched): void {
    this.sweep.delete(item);
  }
}
