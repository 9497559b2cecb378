// Resolves a canonical host name to its addresses: static `dns.hosts` first, then the LookupAll port,
// every lookup bounded by timeoutMs, answers cached within their TTL (capped by cacheMaxTtlMs) and
// concurrent lookups of one name shared. Never classifies, never dials.
import { LRUCache } from 'lru-cache';
import { ProxyError, deny, ok, type Clock, type LookupAll, type LookupAnswer, type Verdict } from '../core/index.js';

export interface ResolverOptions {
  readonly timeoutMs: number;
  readonly cacheMaxEntries: number;
  readonly cacheMaxTtlMs: number;
  readonly hosts: ReadonlyMap<string, readonly LookupAnswer[]>;
  /** Lookups in flight at once; more are refused fast with dns_busy (a flood of unique names). */
  readonly maxConcurrentLookups?: number;
}

export interface Resolution {
  readonly answers: readonly LookupAnswer[];
  readonly source: 'hosts' | 'cache' | 'dns';
}

interface CacheEntry {
  readonly answers: readonly LookupAnswer[];
  readonly expiresAtMs: number;
}

export class Resolver {
  private readonly cache: LRUCache<string, CacheEntry> | null;
  private readonly inflight = new Map<string, Promise<Verdict<Resolution>>>();
  // The last few answers, even TTL-0 ones, so a PAC evaluated right after resolving its destination
  // sees the address this hop is checking (never a fresh query).
  private readonly recent = new Map<string, readonly LookupAnswer[]>();

  constructor(
    private readonly lookup: LookupAll,
    private readonly options: ResolverOptions,
    private readonly now: Clock,
  ) {
    this.cache = options.cacheMaxEntries > 0 ? new LRUCache({ max: options.cacheMaxEntries }) : null;
  }

  /** What Sluice already knows for `host` (static hosts or an unexpired cache entry), without any I/O. */
  peek(host: string): readonly LookupAnswer[] | null {
    const fixed = this.options.hosts.get(host);
    if (fixed !== undefined) return fixed;
    const cached = this.cache?.get(host);
    if (cached !== undefined && cached.expiresAtMs > this.now()) return cached.answers;
    return this.recent.get(host) ?? null;
  }

  resolve(host: string): Promise<Verdict<Resolution>> {
    const fixed = this.options.hosts.get(host);
    if (fixed !== undefined) return Promise.resolve(ok({ answers: fixed, source: 'hosts' }));
    const cached = this.cache?.get(host);
    if (cached !== undefined) {
      if (cached.expiresAtMs > this.now()) return Promise.resolve(ok({ answers: cached.answers, source: 'cache' }));
      this.cache?.delete(host);
    }
    let pending = this.inflight.get(host);
    if (pending === undefined && this.inflight.size >= (this.options.maxConcurrentLookups ?? Infinity)) {
      return Promise.resolve(deny('dns_busy', `${this.inflight.size} lookups in flight`));
    }
    if (pending === undefined) {
      pending = this.lookupOnce(host).finally(() => this.inflight.delete(host));
      this.inflight.set(host, pending);
    }
    return pending;
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
    if (this.recent.size >= 256) this.recent.clear();
    this.recent.set(host, answers);
    const ttlMs = Math.min(this.options.cacheMaxTtlMs, ...answers.map((a) => a.ttlSeconds * 1000));
    if (ttlMs > 0) this.cache?.set(host, { answers, expiresAtMs: this.now() + ttlMs });
    return ok({ answers, source: 'dns' });
  }
}
