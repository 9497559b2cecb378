// The waiting line of one PAC script's calls: one first-in-first-out line per principal, principals
// served in turn, a cap per principal and one for all. It never evaluates anything and never waits.

/** Why a call was not queued: its principal's line is full, or every line together is. */
export type QueueRefusal = 'principal_full' | 'all_full';

export class PacQueue<T> {
  // The Map's order is the rota: a principal that was just served goes to the back. So a principal that
  // floods its line delays another principal's call by at most one of its own, not by its whole line.
  private readonly lines = new Map<string, T[]>();
  private count = 0;

  constructor(
    private readonly maxTotal: number,
    private readonly maxPerPrincipal: number,
  ) {}

  /** Queues `item` at the end of `principal`'s line; null when queued. */
  push(principal: string, item: T): QueueRefusal | null {
    const line = this.lines.get(principal);
    if ((line?.length ?? 0) >= this.maxPerPrincipal) return 'principal_full';
    if (this.count >= this.maxTotal) return 'all_full';
    if (line === undefined) this.lines.set(principal, [item]);
    else line.push(item);
    this.count += 1;
    return null;
  }

  /** The oldest item of the first principal in the rota, which then goes to the back if it has more. */
  shift(): T | undefined {
    for (const [principal, line] of this.lines) {
      const item = line.shift();
      this.lines.delete(principal);
      if (line.length > 0) this.lines.set(principal, line);
      this.count -= 1;
      return item;
    }
    return undefined;
  }

  /** Items queued for `principal`. */
  waitingFor(principal: string): number {
    return this.lines.get(principal)?.length ?? 0;
  }
}
