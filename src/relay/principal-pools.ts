// Origin and upstream connections kept per principal (review 2026-12-04 finding 6): with one pool per
// origin for every principal, an origin that answers without reading a request body (Python's
// http.server does) took principal A's body, `GET /A-CHOSEN-PATH HTTP/1.1\r\nX-Swallow: `, as the start of
// principal B's next request on the same connection, and served A's path with B's credentials to B.
// So a connection that carried one principal's request never carries another's: each principal has a
// dispatcher of its own (an undici Agent: its pools, its connections), made on first use and closed
// when it has been least recently used among too many.
import type { Dispatcher } from 'undici';

export interface PrincipalPoolOptions {
  /** Principals whose connections are kept at once; the least recently used beyond it is closed. */
  readonly maxPrincipals: number;
}

export const PRINCIPAL_POOL_DEFAULTS: PrincipalPoolOptions = { maxPrincipals: 256 };

export class PrincipalPools {
  private readonly byPrincipal = new Map<string, Dispatcher>();
  /** The most recently used principal: its key is already last, so a request of it moves nothing (ADR 0025). */
  private newest: string | null = null;

  constructor(
    private readonly create: () => Dispatcher,
    private readonly options: PrincipalPoolOptions = PRINCIPAL_POOL_DEFAULTS,
  ) {}

  /** The dispatcher of one principal (its grant id): nothing of another principal's ever uses it. */
  for(principal: string): Dispatcher {
    const found = this.byPrincipal.get(principal);
    if (found !== undefined) {
      // Most recently used last: Map keeps insertion order, so the first key is the one to close.
      if (principal !== this.newest) {
        this.byPrincipal.delete(principal);
        this.byPrincipal.set(principal, found);
        this.newest = principal;
      }
      return found;
    }
    const created = this.create();
    this.byPrincipal.set(principal, created);
    this.newest = principal;
    if (this.byPrincipal.size > this.options.maxPrincipals) {
      const [oldest, dispatcher] = this.byPrincipal.entries().next().value as [string, Dispatcher];
      this.byPrincipal.delete(oldest);
      // close() lets that principal's requests in flight finish; only its idle connections go at once.
      void dispatcher.close().catch(() => undefined);
    }
    return created;
  }

  /** Ends one principal's connections (a revoked grant): in-flight requests are ended with them. */
  drop(principal: string): void {
    const dispatcher = this.byPrincipal.get(principal);
    if (dispatcher === undefined) return;
    this.byPrincipal.delete(principal);
    if (this.newest === principal) this.newest = null;
    void dispatcher.destroy().catch(() => undefined);
  }

  get size(): number {
    return this.byPrincipal.size;
  }

  async close(): Promise<void> {
    const all = [...this.byPrincipal.values()];
    this.byPrincipal.clear();
    this.newest = null;
    await Promise.all(all.map((d) => d.close().catch(() => undefined)));
  }
}
