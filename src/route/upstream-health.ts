// Remembers which upstream proxies of a failover list failed at the connection level, and for how long
// to skip them (back-off 1 s doubling to 60 s, reset on success). Never chooses DIRECT: it only tells
// the route loop (proxy/tunnel/over-route.ts) to skip a proxy that is backing off (principle A2 in
// docs/principles.md). The check after a back-off is the next real hop (passive: no probe traffic).

export const UPSTREAM_BACKOFF_INITIAL_MS = 1000;
export const UPSTREAM_BACKOFF_MAX_MS = 60_000;

export interface BackoffSettings {
  readonly initialMs: number;
  readonly maxMs: number;
}

const DEFAULT_BACKOFF: BackoffSettings = { initialMs: UPSTREAM_BACKOFF_INITIAL_MS, maxMs: UPSTREAM_BACKOFF_MAX_MS };

/** The health of one upstream proxy. Shared by every route that names it; its label never holds credentials. */
export class UpstreamHealth {
  /** performance.now() until which the proxy is skipped; 0 while it is up. */
  private downUntilMs = 0;
  /** The back-off that the last failure set; 0 while up. */
  private backoffMs = 0;
  /** The last connection-level failure's reason and detail (for the refusal when every proxy is down). */
  lastFailure = '';

  constructor(
    readonly label: string,
    private readonly now: () => number = () => performance.now(),
    private readonly backoff: BackoffSettings = DEFAULT_BACKOFF,
  ) {}

  /** True while the proxy is backing off: a route with another alternative skips it. */
  get isBackingOff(): boolean {
    return this.downUntilMs !== 0 && this.now() < this.downUntilMs;
  }

  /** False once a connection-level failure marked it down, until a hop through it succeeds. */
  get isUp(): boolean {
    return this.backoffMs === 0;
  }

  /** Milliseconds until the next hop may try the proxy again (0 when it may now). */
  get retryInMs(): number {
    return Math.max(0, this.downUntilMs - this.now());
  }

  /**
   * A connection-level failure (refused, unreachable, timed out, TLS). Concurrent hops that failed in
   * the same back-off window count once: the back-off doubles per failed check, not per hop.
   */
  markFailed(failure: string): void {
    this.lastFailure = failure;
    if (this.isBackingOff) return;
    this.backoffMs = this.backoffMs === 0 ? this.backoff.initialMs : Math.min(this.backoff.maxMs, this.backoffMs * 2);
    this.downUntilMs = this.now() + this.backoffMs;
  }

  /** The proxy connected (whatever it then answered: a 407 or a refusal is an answer, not a failure). */
  markUp(): void {
    this.backoffMs = 0;
    this.downUntilMs = 0;
    this.lastFailure = '';
  }
}

/** One UpstreamHealth per proxy label, bounded: PAC answers may name any proxy. */
export class UpstreamHealthTable {
  private readonly entries = new Map<string, UpstreamHealth>();

  constructor(
    private readonly now: () => number = () => performance.now(),
    private readonly backoff: BackoffSettings = DEFAULT_BACKOFF,
    private readonly maxEntries = 1000,
  ) {}

  for(label: string): UpstreamHealth {
    let health = this.entries.get(label);
    if (health === undefined) {
      // Forgetting an old entry only forgets its back-off: the next hop tries that proxy again.
      if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value as string);
      health = new UpstreamHealth(label, this.now, this.backoff);
      this.entries.set(label, health);
    }
    return health;
  }

  /** Every proxy known so far and whether it is up (the metrics gauge). */
  snapshot(): readonly { readonly upstream: string; readonly isUp: boolean }[] {
    return [...this.entries.values()].map((h) => ({ upstream: h.label, isUp: h.isUp }));
  }
}
