// Resolves a canonical host name to its addresses: static `dns.hosts` first, then the LookupAll port,
// every lookup bounded by timeoutMs, answers cached within their TTL (capped by cacheMaxTtlMs) and
// concurrent lookups of one name shared. Lookups in flight are bounded for the process and for each
// principal, so one principal's slow names cannot refuse everyone else's. Never classifies, never dials.
import { LRUCache } from 'lru-cache';
import { ProxyError, deny, ok, type Clock, type LookupAll, type LookupAnswer, type Verdict } from '../core/index.js';

export interface ResolverOptions {
  readonly timeoutMs: number;
  readonly cacheMaxEntries: number;
  readonly cacheMaxTtlMs: number;
  readonly hosts: ReadonlyMap<string, readonly LookupAnswer[]>;
  /** Lookups in flight at once; more are refused fast with dns_busy (a flood of unique names). */
  readonly maxConcurrentLookups?: number;
  /** Lookups one principal may have started and not yet settled; more are its own lookup_limit_reached. */
  readonly maxConcurrentLookupsPerGrant?: number;
}

const MAX_RECENT = 1024;

export interface Resolution {
  readonly answers: readonly LookupAnswer[];
  readonly source: 'hosts' | 'cache' | 'dns';
  /** How much longer the answers may be relied on (Infinity for dns.hosts; 0 for a TTL-0 answer). */
  readonly ttlMs: number;
}

interface CacheEntry {
  readonly answers: readonly LookupAnswer[];
  readonly expiresAtMs: number;
}

export class Resolver {
  private readonly cache: LRUCache<string, CacheEntry> | null;
  private readonly inflight = new Map<string, Promise<Verdict<Resolution>>>();
  // Lookups in flight per principal (grant id), charged to the principal that started each one. Touched
  // only when a lookup starts or settles: a hop answered from hosts, the cache or a shared lookup costs
  // nothing here. Entries leave at zero, so the map holds only principals with lookups in flight.
  private readonly started = new Map<string, number>();
  private readonly maxTotal: number;
  private readonly maxPerPrincipal: number;
  // The last few answers, even TTL-0 ones, so a PAC evaluated right after resolving its destination
  // sees the address this hop is checking (never a fresh query).
  private readonly recent = new Map<string, readonly LookupAnswer[]>();

  constructor(
    private readonly lookup: LookupAll,
    private readonly options: ResolverOptions,
    private readonly now: Clock,
  ) {
    this.cache = options.cacheMaxEntries > 0 ? new LRUCache({ max: options.cacheMaxEntries }) : null;
    this.maxTotal = options.maxConcurrentLookups ?? Infinity;
    this.maxPerPrincipal = options.maxConcurrentLookupsPerGrant ?? Infinity;
  }

  /** What Sluice already knows for `host` (static hosts or an unexpired cache entry), without any I/O. */
  peek(host: string): readonly LookupAnswer[] | null {
    const fixed = this.options.hosts.get(host);
    if (fixed !== undefined) return fixed;
    const cached = this.cache?.get(host);
    if (cached !== undefined && cached.expiresAtMs > this.now()) return cached.answers;
    return this.recent.get(host) ?? null;
  }

  /**
   * `principal` (a grant id) is charged for a lookup it starts until that lookup settles, at most
   * timeoutMs. A hop that joins a lookup already in flight for the same name is charged nothing and
   * never refused: it adds no query and holds no slot. Without a principal only the process cap applies.
   */
  resolve(host: string, principal: string | null = null): Promise<Verdict<Resolution>> {
    const fixed = this.options.hosts.get(host);
    if (fixed !== undefined) return Promise.resolve(ok({ answers: fixed, source: 'hosts', ttlMs: Infinity }));
    const cached = this.cache?.get(host);
    if (cached !== undefined) {
      const left = cached.expiresAtMs - this.now();
      if (left > 0) return Promise.resolve(ok({ answers: cached.answers, source: 'cache', ttlMs: left }));
      this.cache?.delete(host);
    }
    const pending = this.inflight.get(host);
    if (pending !== undefined) return pending;
    // The principal's own share first: a flooding principal is told about its own limit, and its
    // refused lookups never reach the process cap that every other principal depends on (finding 7).
    const held = principal === null ? 0 : (this.started.get(principal) ?? 0);
    if (held >= this.maxPerPrincipal) return Promise.resolve(deny('lookup_limit_reached', `${held} lookups of this grant in flight`));
    if (this.inflight.size >= this.maxTotal) return Promise.resolve(deny('dns_busy', `${this.inflight.size} lookups in flight`));
    if (principal !== null) this.started.set(principal, held + 1);
    const started = this.lookupOnce(host).finally(() => {
      this.inflight.delete(host);
      if (principal !== null) this.release(principal);
    });
    this.inflight.set(host, started);
    return started;
  }

  /** Lookups `principal` started that have not settled yet. */
  lookupsInFlight(principal: string): number {
    return this.started.get(principal) ?? 0;
  }

  private release(principal: string): void {
    const held = (this.started.get(principal) ?? 1) - 1;
    if (held <= 0) this.started.delete(principal);
    else this.started.set(principal, held);
  }

  private async lookupOnce(host: string): Promise<Verdict<Resolution>> {
    const controller = new AbortController();
    const signal = controller.signal;
    let timer: NodeJS.Timeout | undefined;
    // The bound holds even for a lookup that ignores its signal: race it against the timer.
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        controller.abort();
        reject(new ProxyError('ERR_DNS_TIMEOUT', 'lookup timed out'));
      }, this.options.timeoutMs);
    });
    let answers: readonly LookupAnswer[];
    try {
      answers = await Promise.race([this.lookup(host, signal), deadline]);
    } catch (error) {
      const code = error instanceof ProxyError ? error.code : 'ERR_DNS_FAILED';
      if (code === 'ERR_DNS_TIMEOUT' || signal.aborted) return deny('dns_timeout', `no answer within ${this.options.timeoutMs} ms`);
      if (code === 'ERR_DNS_NO_ADDRESS') return deny('dns_no_address');
      return deny('dns_failed', error instanceof Error ? error.message : String(error));
    } finally {
      clearTimeout(timer);
    }
    if (answers.length === 0) return deny('dns_no_address');
    // Oldest first, one at a time: a principal churning names pushes out the oldest answers, never every
    // principal's at once (the PAC of a hop still waiting to be evaluated reads its own answer here).
    if (this.recent.size >= MAX_RECENT) this.recent.delete(this.recent.keys().next().value as string);
    this.recent.delete(host);
    this.recent.set(host, answers);
    const ttlMs = Math.min(this.options.cacheMaxTtlMs, ...answers.map((a) => a.ttlSeconds * 1000));
    if (ttlMs > 0) this.cache?.set(host, { answers, expiresAtMs: this.now() + ttlMs });
    // Without a cache nothing here keeps the answer, so nothing may rely on it past this hop either.
    return ok({ answers, source: 'dns', ttlMs: this.cache === null ? 0 : Math.max(0, ttlMs) });
  }
}
