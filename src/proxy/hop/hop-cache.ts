// Remembers what identify → canonicalize → authorize → route → resolve/classify/pin concluded for an
// allowed hop, so a repeated hop (the same listener, credentials and target) is one map lookup: no hash,
// no parse, no promise (ADR 0018). Only allowed outcomes are kept, and an entry is served only while
// nothing it was derived from has changed: the grant table's revision (issue, revoke, expiry, reload,
// a fleet change), the classes of Sluice's own addresses, the PAC script, and the DNS answer's TTL.
// Everything that is not a pure function of the key (the grant's liveness and budgets, the auth
// throttle, the shared ledger's freshness, the connection's principal) is still checked on every hop.
import type { CanonicalDestination, ClassifiedAddress, PinnedAddress, Principal, RequestKind, Scheme } from '../../core/index.js';
import type { RuntimeGrant } from '../../grant/index.js';
import type { Route, RouteHop } from '../../route/index.js';
import type { Hop } from './hop.js';

/** An allowed hop's outcome, as a later hop with the same key may reuse it. */
export interface RememberedHop {
  readonly principal: Principal;
  readonly grant: RuntimeGrant;
  readonly scheme: Scheme | null;
  readonly canonical: CanonicalDestination;
  readonly rule: string | null;
  readonly addresses: readonly ClassifiedAddress[];
  readonly pinned: readonly PinnedAddress[];
  readonly route: Route;
  readonly routeHops: readonly RouteHop[];
  /** Forward hops: the last Host field value found to agree with the target (that check is pure). */
  agreedHost: string | null;
}

/** What the sources were when a hop started: an outcome is remembered as of then, never later. */
export interface HopStamp {
  readonly revision: number;
  readonly selfVersion: number;
  readonly routeEpoch: unknown;
}

interface Entry extends RememberedHop, HopStamp {
  /** monotonic ms after which the checked addresses are no longer vouched for (the answer's TTL). */
  readonly validUntil: number;
  /** Served since eviction last passed it: it gets a second chance instead of going out. */
  used: boolean;
}

export interface HopCacheSources {
  /** The grant table (GrantRegistry): its revision changes with every grant or token change. */
  readonly registry: { readonly revision: number };
  /** Sluice's own addresses (SelfAddresses): a new listener or interface address can change a class. */
  readonly self: { readonly version: number };
  readonly routes: { readonly epoch?: () => unknown };
  /** Monotonic milliseconds (performance.now). */
  readonly now: () => number;
}

export const DEFAULT_HOP_CACHE_ENTRIES = 10_000;

const NO_EPOCH = (): unknown => null;

/**
 * Least recently used first out, approximately (second chance, CLOCK): a Map keeps insertion order, a hit
 * only marks its entry, and eviction moves a marked entry to the end with its mark cleared instead of
 * dropping it. Re-inserting the key on every hit (a true LRU) deleted and added a Map entry per hop, and a
 * Map churned per connection chains its outgrown tables (core/slot-set.ts). lru-cache belongs to resolve/.
 */
export class HopCache {
  private readonly entries = new Map<string, Entry>();
  private readonly epoch: () => unknown;

  constructor(
    private readonly sources: HopCacheSources,
    private readonly maxEntries: number = DEFAULT_HOP_CACHE_ENTRIES,
  ) {
    this.epoch = sources.routes.epoch ?? NO_EPOCH;
  }

  /**
   * The key: every input the remembered stages read. `boundGrant` is part of it because every dedicated
   * listener has the same name. Listener names, grant ids and credentials cannot hold a line feed (the
   * config schema, the ledger alphabet and RFC 9110 §5.5 field values), so only the last part, the
   * target, could, and the key stays unambiguous. `credential` is the exact Proxy-Authorization value:
   * compared in memory, never logged or kept beyond this bounded map (principle A8 in docs/principles.md).
   */
  static key(kind: RequestKind, listener: string, boundGrant: string | null, credential: string | undefined, target: string): string {
    return `${kind}\n${listener}\n${boundGrant ?? ''}\n${credential === undefined ? '\u0000' : credential}\n${target}`;
  }

  /** The remembered outcome, if every source it came from is unchanged and its addresses are within their TTL. */
  get(key: string): RememberedHop | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    const { registry, self, now } = this.sources;
    if (entry.revision !== registry.revision || entry.selfVersion !== self.version || entry.routeEpoch !== this.epoch() || entry.validUntil <= now()) {
      this.entries.delete(key);
      return undefined;
    }
    entry.used = true;
    return entry;
  }

  /**
   * Taken when a missed hop starts, before any stage runs: a grant revoked while the hop waited on DNS
   * or PAC then leaves a stamp that is already stale, so the outcome is never served.
   */
  stamp(): HopStamp {
    return { revision: this.sources.registry.revision, selfVersion: this.sources.self.version, routeEpoch: this.epoch() };
  }

  /**
   * Remembers an allowed hop once its destination is decided (before it is dialed: the dial's outcome
   * is not part of the decision), as of `stamp`. Not remembered: a hop denied so far, one whose name did
   * not resolve locally (an upstream proxy resolves it), or one whose answer has no TTL left.
   */
  remember(key: string, hop: Hop, stamp: HopStamp): void {
    if (this.maxEntries <= 0 || !hop.isAllowed) return;
    const { principal, grant, canonical, route, answerTtlMs } = hop;
    if (principal === null || grant === null || canonical === null || route === null || answerTtlMs === null || !(answerTtlMs > 0)) return;
    this.entries.delete(key);
    if (this.entries.size >= this.maxEntries) this.evictOne();
    this.entries.set(key, {
      principal,
      grant,
      scheme: hop.scheme,
      canonical,
      rule: hop.rule,
      addresses: hop.addresses,
      pinned: hop.pinned,
      route,
      routeHops: hop.routeHops,
      agreedHost: null,
      revision: stamp.revision,
      selfVersion: stamp.selfVersion,
      routeEpoch: stamp.routeEpoch,
      validUntil: this.sources.now() + answerTtlMs,
      used: false,
    });
  }

  /** Drops the oldest entry not served since eviction last passed it; bounded: each pass clears a mark. */
  private evictOne(): void {
    for (let passed = this.entries.size; passed > 0; passed--) {
      const [key, entry] = this.entries.entries().next().value as [string, Entry];
      this.entries.delete(key);
      if (!entry.used) return;
      entry.used = false;
      this.entries.set(key, entry);
    }
    // Every entry was marked: each went to the end unmarked, so the oldest goes now.
    this.entries.delete(this.entries.keys().next().value as string);
  }

  /** Forgets everything (a reload that changed what the sources cannot see, such as listeners). */
  clear(): void {
    this.entries.clear();
  }

  get size(): number {
    return this.entries.size;
  }
}

/** Fills a hop from a remembered outcome: what decideDestination would have set, without running it. */
export function applyRemembered(hop: Hop, remembered: RememberedHop): void {
  hop.scheme = remembered.scheme;
  hop.canonical = remembered.canonical;
  hop.rule = remembered.rule;
  hop.addresses = remembered.addresses;
  hop.pinned = remembered.pinned;
  hop.route = remembered.route;
  hop.routeHops = remembered.routeHops;
  const at = hop.elapsedUs();
  hop.authorizeUs = at;
  hop.routeUs = at;
  hop.resolveUs = at;
}
