// A grant's budgets held fleet-wide (ledger.store: redis; docs/fleet.md "Budgets"). Concurrency slots
// are leases with a TTL, so a killed instance's slots come back; the connection count is exact; bytes are
// reserved in chunks so the relay never waits on the store, at the cost of an overshoot of at most one
// chunk per instance. ledger/redis-budgets.ts implements the port; app.ts wires it.
import type { Verdict } from '../core/index.js';
import type { ForwardBudget } from '../relay/index.js';

export interface BudgetLimits {
  readonly maxConcurrent?: number | undefined;
  readonly maxConnections?: number | undefined;
  readonly maxBytes?: number | undefined;
}

export interface SharedBudgets {
  /** Takes a connection of the grant fleet-wide; a lease to release when the connection closes. */
  acquire(grantId: string, limits: BudgetLimits): Promise<Verdict<string>>;
  release(grantId: string, lease: string): void;
  /** Reserves up to `want` bytes of the grant's maxBytes; what was granted (0 once it is spent). */
  reserveBytes(grantId: string, want: number, maxBytes: number): Promise<number>;
}

/** Bytes reserved at a time: a 64th of the budget, between 16 KiB and 1 MiB. */
export function byteChunk(maxBytes: number): number {
  return Math.min(1 << 20, Math.max(16 << 10, Math.ceil(maxBytes / 64)));
}

/**
 * One grant's byte budget on one instance of a fleet. A take is synchronous: it spends what this
 * instance reserved, and asks for the next chunk before that runs out. If the reservation has not come
 * back yet, the relay may go on for at most one more chunk (the overshoot bound), then holds its side
 * until the reservation lands (whenAvailable) rather than cutting a tunnel that still has budget; once
 * the store says the budget is spent, nothing past what was reserved is relayed.
 */
export class FleetByteBudget implements ForwardBudget {
  connections = 0;
  /** Bytes this instance relayed for the grant. */
  bytes = 0;
  private reserved = 0;
  private spent = false;
  private refilling: Promise<void> | null = null;

  constructor(
    private readonly grantId: string,
    public maxBytes: number,
    private readonly shared: SharedBudgets,
    private readonly onError: (error: unknown) => void,
  ) {}

  get chunk(): number {
    return byteChunk(this.maxBytes);
  }

  /** Counts and allows the bytes, or refuses them uncounted (they are not relayed). */
  take(bytes: number): boolean {
    const after = this.bytes + bytes;
    if (this.reserved - after < this.chunk / 2) this.refill();
    if (after > this.reserved && (this.spent || after > this.reserved + this.chunk)) return false;
    this.bytes = after;
    return true;
  }

  /**
   * After a refused take: resolves once the reservation in flight lands, true if budget is left (take
   * again), false if it is spent; null when it is spent already. The relay holds its side meanwhile.
   */
  whenAvailable(): Promise<boolean> | null {
    if (this.spent) return null;
    this.refill();
    const landing = this.refilling;
    return landing === null ? Promise.resolve(!this.spent) : landing.then(() => !this.spent || this.bytes < this.reserved);
  }

  hasLeft(): boolean {
    if (this.bytes < this.reserved) return true;
    this.refill();
    return !this.spent;
  }

  /** Reserves the first chunk before the grant's first relay, so a spent budget is refused up front. */
  prime(): Promise<void> {
    if (this.reserved === 0 && !this.spent) this.refill();
    return this.refilling ?? Promise.resolve();
  }

  private refill(): void {
    if (this.refilling !== null || this.spent) return;
    const want = this.chunk;
    this.refilling = this.shared
      .reserveBytes(this.grantId, want, this.maxBytes)
      .then(
        (granted) => {
          this.reserved += granted;
          if (granted < want) this.spent = true;
        },
        (error: unknown) => this.onError(error),
      )
      .finally(() => {
        this.refilling = null;
      });
  }
}
