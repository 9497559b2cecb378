// One hop's state as the pipeline fills it in: every field is set in the constructor so the object's
// shape never changes. It is decided once (run-hop.ts); after that, and after its first denial, nothing
// can change the outcome. Its audit records are written from it (it is audit/'s HopDecisionFacts and
// HopCloseFacts), and its Decision value is built from it only when something needs one (decision.ts).
import type { HopCloseFacts, HopDecisionFacts } from '../../audit/index.js';
import type { CanonicalDestination, ClassifiedAddress, PinnedAddress, Principal, ReasonCode, RequestKind, Scheme } from '../../core/index.js';
import type { Route, RouteHop } from '../../route/index.js';
import type { RuntimeGrant } from '../../grant/index.js';
import { isAttested } from './decide.js';
import type { Decision } from './decision.js';

export class Hop implements HopDecisionFacts, HopCloseFacts {
  scheme: Scheme | null = null;
  canonical: CanonicalDestination | null = null;
  principal: Principal | null = null;
  grant: RuntimeGrant | null = null;
  reason: ReasonCode = 'granted';
  detail = '';
  rule: string | null = null;
  /** The ask this hop was held on (grant `ask`), or null: an asked hop is never remembered by the hop cache. */
  askedBy: string | null = null;
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
  /** Set once, by HopRun.decide (run-hop.ts), when its decision record is written. */
  isDecided = false;
  /** The Decision value, built from the decided hop the first time something needs it (HopRun.decision). */
  decision: Decision | null = null;
  /** performance.now() when the request head was parsed: the origin of every timing. */
  readonly startedAt: number = performance.now();
  readonly startedAtMs: number = Date.now();
  /** Date.now() when it was decided: the decision record's `ts`. Its start until then. */
  decidedAtMs: number = this.startedAtMs;

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
    if (this.reason !== 'granted' || this.isDecided) return false;
    this.reason = reason;
    this.detail = detail;
    return false;
  }

  /** Attested for the alternative that carried the hop; before dialing, only if every alternative is. */
  get attested(): boolean | null {
    if (this.usedHop !== null) return isAttested(this.usedHop, this);
    const hops = this.routeHops;
    if (hops.length === 0) return null;
    for (let i = 0; i < hops.length; i++) if (!isAttested(hops[i]!, this)) return false;
    return true;
  }

  /** Through a proxy declared inspectsTls: the one that carried the hop; before dialing, any alternative. */
  get credentialObserving(): boolean | null {
    if (this.usedHop !== null) return this.usedHop.kind === 'proxy' && this.usedHop.proxy.inspectsTls;
    const hops = this.routeHops;
    if (hops.length === 0) return null;
    for (let i = 0; i < hops.length; i++) {
      const h = hops[i]!;
      if (h.kind === 'proxy' && h.proxy.inspectsTls) return true;
    }
    return false;
  }

  /**
   * The address the decision record reports as pinned: the one dialed; before dialing, the first checked
   * one, but only when the route is attested. Never a pin for a hop an upstream proxy resolves: it was
   * checked, not dialed (docs/scenarios.md scenario 3).
   */
  get recordedPin(): string | null {
    if (this.dialed !== null) return this.dialed.address;
    return this.attested === true ? (this.pinned[0]?.address ?? null) : null;
  }

  /** The upstream proxy that carried the hop (its label, never its credentials); null for direct or not dialed. */
  get upstream(): string | null {
    return this.usedHop?.kind === 'proxy' ? this.usedHop.proxy.label : null;
  }

  elapsedUs(): number {
    return Math.round((performance.now() - this.startedAt) * 1000);
  }
}
