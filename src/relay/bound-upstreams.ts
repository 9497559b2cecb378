// Keep-alive connections to an upstream proxy whose authentication binds the connection (Negotiate,
// NTLM), kept per principal: a connection the proxy authenticated for one principal's hop serves only
// that principal's later hops, never another's (issue 18). One undici Client is one connection.
import type { Dispatcher } from 'undici';

export interface BoundUpstreamOptions {
  /** Idle connections kept per principal and proxy. */
  readonly maxIdlePerKey: number;
  /** Idle connections kept in all. */
  readonly maxIdle: number;
  /** An idle connection older than this is closed rather than reused (undici's keep-alive is 4 s). */
  readonly maxIdleMs: number;
}

export const BOUND_UPSTREAM_DEFAULTS: BoundUpstreamOptions = { maxIdlePerKey: 4, maxIdle: 256, maxIdleMs: 3_500 };

interface Idle {
  readonly client: Dispatcher;
  readonly sinceMs: number;
}

function isClosed(client: Dispatcher): boolean {
  const state = client as { closed?: boolean; destroyed?: boolean };
  return state.closed === true || state.destroyed === true;
}

export class BoundUpstreams {
  private readonly idle = new Map<string, Idle[]>();
  private count = 0;

  constructor(
    private readonly create: (origin: string) => Dispatcher,
    private readonly options: BoundUpstreamOptions = BOUND_UPSTREAM_DEFAULTS,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** The key of a principal's connections to one proxy: nothing else ever shares them. */
  static key(grantId: string, origin: string): string {
    return `${grantId}\0${origin}`;
  }

  /** A connection of this principal's to reuse (`reused`: it was authenticated before), or a new one. */
  take(key: string, origin: string, reuse: boolean): { readonly client: Dispatcher; readonly reused: boolean } {
    const list = reuse ? this.idle.get(key) : undefined;
    while (list !== undefined && list.length > 0) {
      const entry = list.pop() as Idle;
      this.count -= 1;
      if (list.length === 0) this.idle.delete(key);
      if (!isClosed(entry.client) && this.now() - entry.sinceMs < this.options.maxIdleMs) return { client: entry.client, reused: true };
      void entry.client.close().catch(() => undefined);
    }
    return { client: this.create(origin), reused: false };
  }

  /** Returns a connection after a complete exchange; beyond the bounds, or `keep` false, it is closed. */
  give(key: string, client: Dispatcher, keep: boolean): void {
    const list = this.idle.get(key) ?? [];
    if (!keep || isClosed(client) || list.length >= this.options.maxIdlePerKey) {
      void client.close().catch(() => undefined);
      return;
    }
    if (this.count >= this.options.maxIdle) this.evictOldestKey();
    list.push({ client, sinceMs: this.now() });
    this.idle.delete(key);
    this.idle.set(key, list);
    this.count += 1;
  }

  async close(): Promise<void> {
    const all = [...this.idle.values()].flat();
    this.idle.clear();
    this.count = 0;
    await Promise.all(all.map((e) => e.client.close().catch(() => undefined)));
  }

  private evictOldestKey(): void {
    const oldest = this.idle.keys().next();
    if (oldest.done === true) return;
    const entries = this.idle.get(oldest.value) ?? [];
    this.idle.delete(oldest.value);
    this.count -= entries.length;
    for (const e of entries) void e.client.close().catch(() => undefined);
  }
}
