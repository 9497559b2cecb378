// One hop's state as the pipeline fills it in: every field is set in the constructor so the object's
// shape never changes. Its decision is built from it once (decision.ts); after that, and after its first
// denial, nothing can change the outcome.
import type { CanonicalDestination, ClassifiedAddress, PinnedAddress, Principal, ReasonCode, RequestKind, Scheme } from '../core/index.js';
import type { Route, RouteHop } from '../route/index.js';
import type { RuntimeGrant } from '../grant/index.js';
import type { Decision } from './decision.js';

export class Hop {
  scheme: Scheme | null = null;
  canonical: CanonicalDestination | null = null;
  principal: Principal | null = null;
  grant: RuntimeGrant | null = null;
  reason: ReasonCode = 'granted';
  detail = '';
  rule: string | null = null;
  addresses: readonly ClassifiedAddress[] = [];
  pinned: readonly PinnedAddress[] = [];
  dialed: PinnedAddress | null = null;
  route: Route | null = null;
  /** The route's alternatives that survived the address and attestation checks, in order. */
  routeHops: readonly RouteHop[] = [];
  /** The alternative that carried the hop, once dialed. */
  usedHop: RouteHop | null = null;
  identifyUs: number | null = null;
  authorizeUs: number | null = null;
  routeUs: number | null = null;
  firstByteUs: number | null = null;
  resolveUs: number | null = null;
  dialUs: number | null = null;
  /** How long the checked addresses stay valid (the DNS answer's TTL left; Infinity for a literal or dns.hosts). */
  answerTtlMs: number | null = null;
  /** Set once, by HopRun.decide (run-hop.ts). */
  decision: Decision | null = null;
  /** performance.now() when the request head was parsed: the origin of every timing. */
  readonly startedAt: number = performance.now();
  readonly startedAtMs: number = Date.now();

  constructor(
    readonly index: number,
    readonly kind: RequestKind,
    readonly method: string,
    /** The request target as received; a SOCKS5 hop learns it after identification. */
    public target: string,
  ) {}

  get isAllowed(): boolean {
    return this.reason === 'granted';
  }

  /** Denies the hop. The first denial is final: a later failure, or one after the decision, changes nothing. */
  fail(reason: ReasonCode, detail = ''): false {
    if (this.reason !== 'granted' || this.decision !== null) return false;
    this.reason = reason;
    this.detail = detail;
    return false;
  }

  elapsedUs(): number {
    return Math.round((performance.now() - this.startedAt) * 1000);
  }
}
