// Admission limits that protect Sluice itself, before any principal is known: connection caps (global
// and per listener) and a per-source cap on failed proxy authentications, so token guessing is slow
// and one flood cannot starve other principals (CWE-307, CWE-770).

const WINDOW_MS = 60_000;
// Bounded memory under a spray of source addresses: past this many, the window starts over.
const MAX_TRACKED_SOURCES = 10_000;

export class ConnectionGate {
  private total = 0;
  private readonly perListener = new Map<string, number>();

  constructor(private readonly maxTotal: number) {}

  /** Counts a new connection if both caps allow it; the caller must `release` it exactly once. */
  tryAdmit(listener: string, listenerMax: number | undefined): boolean {
    const current = this.perListener.get(listener) ?? 0;
    if (this.total >= this.maxTotal) return false;
    if (listenerMax !== undefined && current >= listenerMax) return false;
    this.total += 1;
    this.perListener.set(listener, current + 1);
    return true;
  }

  release(listener: string): void {
    this.total -= 1;
    this.perListener.set(listener, (this.perListener.get(listener) ?? 1) - 1);
  }

  get count(): number {
    return this.total;
  }
}

export class AuthThrottle {
  private windowStartMs = 0;
  private readonly failures = new Map<string, number>();

  constructor(
    private readonly maxPerMinute: number,
    private readonly now: () => number,
  ) {}

  private roll(): void {
    const now = this.now();
    if (now - this.windowStartMs >= WINDOW_MS || this.failures.size > MAX_TRACKED_SOURCES) {
      this.windowStartMs = now;
      this.failures.clear();
    }
  }

  /** `source` is asked for only when some source has failed this window (it can cost a getpeername). */
  isBlocked(source: () => string): boolean {
    this.roll();
    if (this.failures.size === 0) return false;
    return (this.failures.get(source()) ?? 0) >= this.maxPerMinute;
  }

  recordFailure(source: string): void {
    this.roll();
    this.failures.set(source, (this.failures.get(source) ?? 0) + 1);
  }
}
