// The grants in force and the connections acting under each. Installs compiled grants from the ledger
// (start, issue, revoke, reload), enforces per-grant budgets when a connection attaches, and ends a
// grant's live tunnels and keep-alive connections at once when it is revoked, expires or narrows,
// touching no other grant (docs/scenarios.md scenario 5).
import { deny, ok, SlotSet, type CanonicalDestination, type CloseReason, type PinnedAddress, type Verdict } from '../core/index.js';
import type { ConfigIssue, GrantSpec } from '../config/index.js';
import { parseProxyAuthorization, TokenStore, type PreviousToken } from '../identity/index.js';
import { authorize } from '../authority/index.js';
import { checkAddress, type SelfAddresses } from '../resolve/index.js';
import type { ForwardBudget } from '../relay/index.js';
import { certificateKey, compileGrant, type RuntimeGrant } from './grant-table.js';
import { FleetByteBudget, type SharedBudgets } from './shared-budgets.js';

/** A client connection as the registry sees it: proxy/'s GrantConnection. */
export interface GrantConnection {
  /** The grant this connection is attached to (set by attach). */
  grantId: string | null;
  /** The registry's: the connection's index among its grant's live ones (-1 while in none). */
  liveSlot: number;
  /** The live tunnel's destination and dialed address, so a changed grant can be re-checked against it. */
  readonly tunnelHop: { readonly canonical: CanonicalDestination | null; readonly dialed: PinnedAddress | null } | null;
  readonly socket: { once(event: 'close', listener: () => void): unknown; readonly destroyed?: boolean };
  /** The Proxy-Authorization the connection was identified by; null or absent on a dedicated listener. */
  readonly verifiedAuthorization?: string | null;
  /** Ends the connection now, recording `reason` on its close record. */
  end(reason: CloseReason): void;
  limitDuration(ms: number): void;
}

export interface GrantInput {
  readonly id: string;
  readonly spec: GrantSpec;
  readonly revoked: boolean;
  /** The token hash, if this grant can be used with a token. */
  readonly tokenSha256: Buffer | null;
}

/**
 * What a grant has used since start, and its byte budget: one per grant, so every tunnel and forwarded
 * request of the grant takes from the same counter while its bytes stream (a take is synchronous, so
 * parallel hops never both spend the last byte). `maxBytes` follows the grant in force (Infinity: none).
 */
class GrantUsage implements ForwardBudget {
  connections = 0;
  bytes = 0;

  constructor(public maxBytes: number) {}

  /** Counts bytes; false once the budget is passed (the caller relays nothing more). */
  take(bytes: number): boolean {
    this.bytes += bytes;
    return this.bytes <= this.maxBytes;
  }

  hasLeft(): boolean {
    return this.bytes < this.maxBytes;
  }
}

const NO_USAGE = Object.freeze({ connections: 0, bytes: 0 });

// setTimeout holds at most 2^31-1 ms (~24.8 days); later expiries re-arm.
const MAX_TIMER_MS = 2_147_483_647;

type Usage = GrantUsage | FleetByteBudget;

export class GrantRegistry {
  readonly grants = new Map<string, RuntimeGrant>();
  readonly tokens: TokenStore;
  // A SlotSet per grant, not a Set: a connection joins and leaves once each (core/slot-set.ts says why).
  private readonly live = new Map<string, SlotSet<GrantConnection>>();
  private readonly usage = new Map<string, Usage>();
  private shared: { readonly budgets: SharedBudgets; readonly onError: (error: unknown) => void } | null = null;
  /** A connection whose fleet-wide attach is in flight: a second hop on it waits for the same answer. */
  private readonly attaching = new WeakMap<GrantConnection, Promise<Verdict<void>>>();
  private readonly expiry = new Map<string, NodeJS.Timeout>();
  private changes = 0;
  private readonly endedListeners: ((id: string) => void)[] = [];
  private readonly expiredListeners: ((id: string) => void)[] = [];
  /** Rotated grants whose previous token is still accepted, with when that ends (epoch ms). */
  private readonly graces = new Map<string, number>();
  /** Certificate key (grant-table.ts certificateKey) → grant id; rebuilt on first use after a change. */
  private certificates: Map<string, string> | null = null;
  /** The earliest of `graces` (Infinity: none), checked on every revision read; and its timer. */
  private graceEndMs = Infinity;
  private graceTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly self: SelfAddresses,
    private readonly now: () => number,
  ) {
    this.tokens = new TokenStore(now);
  }

  /**
   * Bumped by every change to what a hop may be allowed: a grant or token installed, rotated, removed,
   * revoked or forgotten, a rotation's grace ending, or a grant reaching its expiry. A decision
   * remembered at one revision is never served at another (proxy/hop/hop-cache.ts). A grace that has ended
   * moves the revision here, on the first read after its end, not only when its timer fires late: a
   * remembered hop with the previous token is never served past the grace.
   */
  get revision(): number {
    if (this.graceEndMs !== Infinity && this.now() >= this.graceEndMs) this.endGraces();
    return this.changes;
  }

  /**
   * The grant a verified client certificate acts for (issue 28): the one grant that names its SHA-256 or
   * one of its URI SANs. Several grants matched (a SHA-256 and a URI naming different grants, or two URIs)
   * is no principal at all, never the first match. Never the subject's CN.
   */
  grantForCertificate(sha256: string, uris: readonly string[]): { readonly grant: string } | { readonly none: 'unknown' | 'ambiguous' } {
    if (this.certificates === null) {
      this.certificates = new Map();
      // A revoked grant gives its certificate up: a new grant may name it (its connections ended with it).
      for (const grant of this.grants.values()) if (grant.clientCertificate !== null && !grant.revoked) this.certificates.set(certificateKey(grant.clientCertificate), grant.id);
    }
    const matched = new Set<string>();
    const bySha = this.certificates.get(`sha256 ${sha256}`);
    if (bySha !== undefined) matched.add(bySha);
    for (const uri of uris) {
      const byUri = this.certificates.get(`uri ${uri}`);
      if (byUri !== undefined) matched.add(byUri);
    }
    if (matched.size === 1) return { grant: [...matched][0] as string };
    return { none: matched.size === 0 ? 'unknown' : 'ambiguous' };
  }

  /** The grant other than `except` that already names this certificate, if any (one certificate, one principal). */
  certificateHolder(certificate: { readonly sha256: string } | { readonly uriSan: string }, except?: string): string | undefined {
    const key = certificateKey(certificate);
    for (const grant of this.grants.values()) if (grant.id !== except && !grant.revoked && grant.clientCertificate !== null && certificateKey(grant.clientCertificate) === key) return grant.id;
    return undefined;
  }

  /** Compiles one grant; nothing is installed when it has issues. */
  compile(input: GrantInput, prefix: string): { ok: true; value: RuntimeGrant } | { ok: false; issues: ConfigIssue[] } {
    return compileGrant(input.id, input.spec, input.revoked, this.self, prefix);
  }

  /** Installs or replaces grants; live connections of a replaced grant are re-checked and ended if no longer allowed. */
  install(grants: readonly { grant: RuntimeGrant; tokenSha256: Buffer | null }[]): number {
    let ended = 0;
    this.changes += 1;
    this.certificates = null;
    for (const { grant, tokenSha256 } of grants) {
      const previous = this.grants.get(grant.id);
      this.grants.set(grant.id, grant);
      const usage = this.usage.get(grant.id);
      if (usage !== undefined) usage.maxBytes = grant.limits.maxBytes ?? Infinity;
      if (tokenSha256 === null) this.tokens.delete(grant.id);
      else this.tokens.set(grant.id, tokenSha256);
      this.graces.delete(grant.id);
      this.armExpiry(grant);
      if (previous !== undefined && previous !== grant) ended += this.recheck(grant);
    }
    return ended;
  }

  /**
   * A rotation: `tokenSha256` is the grant's token from now on. The previous token is accepted until
   * `previous.untilMs` (a grace), or not at all; a connection identified by a token that no longer
   * verifies ends now (and, with a grace, when it ends). Returns the connections ended.
   */
  rotateToken(id: string, tokenSha256: Buffer, previous: PreviousToken | null): number {
    if (!this.grants.has(id)) return 0;
    this.changes += 1;
    this.tokens.rotate(id, tokenSha256, previous);
    const until = this.tokens.previousUntil(id);
    if (until === null) this.graces.delete(id);
    else this.graces.set(id, until);
    this.armGraceTimer();
    return this.endUnverified(id);
  }

  /** Drops every previous token whose grace has ended, ending the connections that relied on one. */
  private endGraces(): void {
    const now = this.now();
    for (const [id, until] of [...this.graces]) {
      if (until > now) continue;
      this.graces.delete(id);
      this.tokens.dropPrevious(id);
      this.changes += 1;
      this.endUnverified(id);
    }
    this.armGraceTimer();
  }

  private armGraceTimer(): void {
    if (this.graceTimer !== null) clearTimeout(this.graceTimer);
    this.graceTimer = null;
    this.graceEndMs = Math.min(Infinity, ...this.graces.values());
    if (this.graceEndMs === Infinity) return;
    const timer = setTimeout(() => {
      this.graceTimer = null;
      this.endGraces();
    }, Math.max(0, Math.min(this.graceEndMs - this.now(), MAX_TIMER_MS)));
    timer.unref();
    this.graceTimer = timer;
  }

  /** Ends a grant's connections identified by a token that no longer verifies (dedicated-listener ones stay). */
  private endUnverified(id: string): number {
    let ended = 0;
    for (const ctx of [...(this.live.get(id) ?? [])]) {
      const header = ctx.verifiedAuthorization;
      if (header === undefined || header === null || this.verifies(id, header)) continue;
      ctx.end('grant_changed');
      ended += 1;
    }
    return ended;
  }

  private verifies(id: string, header: string): boolean {
    const presented = parseProxyAuthorization(header);
    if (presented === null || presented === 'malformed') return false;
    if (presented.grantId === null) return this.tokens.findByToken(presented.token) === id;
    return presented.grantId === id && this.tokens.verify(id, presented.token);
  }

  /** Removes grants no longer in force (a reload dropped them); their connections end. */
  remove(ids: readonly string[], reason: CloseReason): number {
    let ended = 0;
    if (ids.length > 0) this.changes += 1;
    this.certificates = null;
    for (const id of ids) {
      for (const listener of this.endedListeners) listener(id);
      this.grants.delete(id);
      this.tokens.delete(id);
      this.graces.delete(id);
      const usage = this.usage.get(id);
      if (usage !== undefined) usage.maxBytes = Infinity;
      this.clearExpiry(id);
      ended += this.endConnections(id, reason);
      // Connections detach when they close, later; the last one drops a non-empty set then.
      if (this.live.get(id)?.size === 0) this.live.delete(id);
    }
    return ended;
  }

  /** Called with a grant's id when it is revoked, forgotten or dropped (asks.ts ends the hops held on its asks). */
  onGrantEnded(listener: (id: string) => void): void {
    this.endedListeners.push(listener);
  }

  /** Called with a grant's id when it reaches its expiresAt (its connections have just ended). */
  onGrantExpired(listener: (id: string) => void): void {
    this.expiredListeners.push(listener);
  }

  /** Marks a grant revoked (kept, so its token answers grant_revoked) and ends its connections now. */
  revoke(id: string): number {
    const grant = this.grants.get(id);
    if (grant === undefined) return 0;
    for (const listener of this.endedListeners) listener(id);
    this.changes += 1;
    this.certificates = null;
    this.grants.set(id, { ...grant, revoked: true });
    this.clearExpiry(id);
    return this.endConnections(id, 'revoked');
  }

  /** Ends a grant's connections and drops everything kept for it (a forgotten run-time grant). */
  forget(id: string): number {
    const ended = this.revoke(id);
    // revoke() already ended the connections (they detach on close, later): not counted twice.
    this.remove([id], 'revoked');
    this.usage.delete(id);
    return ended;
  }

  /**
   * Holds every grant's budgets fleet-wide from now on (ledger.store: redis): a budgeted grant's
   * connections are counted in the store, and its bytes reserved from it in chunks.
   */
  useSharedBudgets(budgets: SharedBudgets, onError: (error: unknown) => void): void {
    this.shared = { budgets, onError };
  }

  /**
   * Called once a connection's principal is known; refuses it when the grant's budgets are spent. Sync,
   * except for a budgeted grant in a fleet: then the store answers (one round trip per connection).
   */
  admit(ctx: GrantConnection, grant: RuntimeGrant): Verdict<void> | Promise<Verdict<void>> {
    const { maxConcurrent, maxConnections, maxBytes } = grant.limits;
    if (this.shared !== null && (maxConcurrent !== undefined || maxConnections !== undefined || maxBytes !== undefined)) return this.attachShared(ctx, grant, this.shared.budgets);
    return this.attach(ctx, grant);
  }

  /** The budgets this instance counts itself (the file store, or a grant without budgets). */
  attach(ctx: GrantConnection, grant: RuntimeGrant): Verdict<void> {
    const { maxConcurrent, maxConnections, maxBytes } = grant.limits;
    const usage = this.usageOf(grant.id);
    if (maxConcurrent !== undefined && (this.live.get(grant.id)?.size ?? 0) >= maxConcurrent) return deny('connection_limit_reached', `maxConcurrent ${maxConcurrent}`);
    if (maxConnections !== undefined && usage.connections >= maxConnections) return deny('connection_quota_exhausted', `maxConnections ${maxConnections}`);
    if (maxBytes !== undefined && usage.bytes >= maxBytes) return deny('byte_limit_reached', `maxBytes ${maxBytes}`);
    this.track(ctx, grant, usage, null);
    return ok(undefined);
  }

  private attachShared(ctx: GrantConnection, grant: RuntimeGrant, budgets: SharedBudgets): Promise<Verdict<void>> {
    const pending = this.attaching.get(ctx);
    if (pending !== undefined) return pending;
    const attached = budgets.acquire(grant.id, grant.limits).then(
      (lease): Verdict<void> => {
        if (!lease.ok) return lease;
        const release = (): void => budgets.release(grant.id, lease.value);
        // Closed while the store answered: the slot goes back at once.
        if (ctx.socket.destroyed === true) {
          release();
          return deny('client_gone', 'before the grant’s budgets were checked');
        }
        this.track(ctx, grant, this.usageOf(grant.id), release);
        return ok(undefined);
      },
      (error: unknown): Verdict<void> => {
        this.shared?.onError(error);
        return deny('ledger_unavailable', 'the shared store did not answer for the grant’s budgets');
      },
    );
    this.attaching.set(ctx, attached);
    return attached;
  }

  private track(ctx: GrantConnection, grant: RuntimeGrant, usage: Usage, release: (() => void) | null): void {
    let set = this.live.get(grant.id);
    if (set === undefined) {
      set = new SlotSet<GrantConnection>('liveSlot');
      this.live.set(grant.id, set);
    }
    set.add(ctx);
    usage.connections += 1;
    ctx.grantId = grant.id;
    if (grant.limits.maxDurationMs !== undefined) ctx.limitDuration(grant.limits.maxDurationMs);
    ctx.socket.once('close', () => {
      this.detach(ctx);
      release?.();
    });
  }

  detach(ctx: GrantConnection): void {
    if (ctx.grantId === null) return;
    const set = this.live.get(ctx.grantId);
    set?.delete(ctx);
    // A grant's empty set stays while the grant does: deleting and re-adding the entry per connection
    // would churn the Map as a Set would (core/slot-set.ts). remove() drops it with the grant.
    if (set?.size === 0 && !this.grants.has(ctx.grantId)) this.live.delete(ctx.grantId);
  }

  /** Adds bytes to a grant's budget; false once maxBytes is passed. */
  addBytes(grantId: string, bytes: number): boolean {
    return this.usageOf(grantId).take(bytes);
  }

  bytesLeft(grantId: string): number {
    const usage = this.usageOf(grantId);
    if (!usage.hasLeft()) return 0;
    return Math.max(1, usage.maxBytes - usage.bytes);
  }

  /** The budget a grant's forwarded requests count against while they stream; null without maxBytes. */
  budgetOf(grant: RuntimeGrant): ForwardBudget | null {
    return grant.limits.maxBytes === undefined ? null : this.usageOf(grant.id);
  }

  usageOf(grantId: string): Usage {
    let usage = this.usage.get(grantId);
    if (usage === undefined) {
      const maxBytes = this.grants.get(grantId)?.limits.maxBytes;
      // In a fleet, a budgeted grant's bytes are reserved from the shared store (shared-budgets.ts).
      usage = this.shared !== null && maxBytes !== undefined ? new FleetByteBudget(grantId, maxBytes, this.shared.budgets, this.shared.onError) : new GrantUsage(maxBytes ?? Infinity);
      this.usage.set(grantId, usage);
    }
    return usage;
  }

  /** What a grant has used, for views: reading it creates no entry (a forgotten grant leaves none behind). */
  usageView(grantId: string): { readonly connections: number; readonly bytes: number } {
    return this.usage.get(grantId) ?? NO_USAGE;
  }

  /** What each grant used, for the usage file (budgets across restarts on the file store). */
  usageSnapshot(): Map<string, { readonly connections: number; readonly bytes: number }> {
    const out = new Map<string, { connections: number; bytes: number }>();
    for (const [id, usage] of this.usage) if (usage.connections > 0 || usage.bytes > 0) out.set(id, { connections: usage.connections, bytes: usage.bytes });
    return out;
  }

  /** Starts each grant's counters from what it used before a restart. */
  seedUsage(used: ReadonlyMap<string, { readonly connections: number; readonly bytes: number }>): void {
    for (const [id, count] of used) {
      const usage = this.usageOf(id);
      usage.connections = count.connections;
      usage.bytes = count.bytes;
    }
  }

  activeConnections(grantId: string): number {
    return this.live.get(grantId)?.size ?? 0;
  }

  endConnections(grantId: string, reason: CloseReason): number {
    const set = this.live.get(grantId);
    if (set === undefined) return 0;
    const contexts = [...set];
    for (const ctx of contexts) ctx.end(reason);
    return contexts.length;
  }

  close(): void {
    if (this.graceTimer !== null) clearTimeout(this.graceTimer);
    this.graceTimer = null;
    for (const timer of this.expiry.values()) clearTimeout(timer);
    this.expiry.clear();
  }

  /** After a grant changed: end tunnels whose destination or dialed address it no longer allows. */
  private recheck(grant: RuntimeGrant): number {
    if (grant.revoked) return this.endConnections(grant.id, 'revoked');
    if (grant.expiresAtMs !== null && this.now() >= grant.expiresAtMs) return this.endConnections(grant.id, 'expired');
    let ended = 0;
    for (const ctx of [...(this.live.get(grant.id) ?? [])]) {
      const hop = ctx.tunnelHop;
      if (hop === null || hop.canonical === null) continue;
      const still = authorize(grant.authority, 'connect', hop.canonical).ok && (hop.dialed === null || checkAddress(grant.addressPolicy, hop.dialed, hop.dialed.port).allowed);
      if (!still) {
        ctx.end('grant_changed');
        ended += 1;
      }
    }
    return ended;
  }

  private armExpiry(grant: RuntimeGrant): void {
    this.clearExpiry(grant.id);
    if (grant.expiresAtMs === null || grant.revoked) return;
    const delay = grant.expiresAtMs - this.now();
    const timer = setTimeout(() => {
      this.expiry.delete(grant.id);
      const current = this.grants.get(grant.id);
      if (current === undefined) return;
      if (this.now() < (current.expiresAtMs ?? 0)) this.armExpiry(current);
      else {
        this.changes += 1;
        this.endConnections(grant.id, 'expired');
        for (const listener of this.expiredListeners) listener(grant.id);
      }
    }, Math.max(0, Math.min(delay, MAX_TIMER_MS)));
    timer.unref();
    this.expiry.set(grant.id, timer);
  }

  private clearExpiry(id: string): void {
    const timer = this.expiry.get(id);
    if (timer !== undefined) clearTimeout(timer);
    this.expiry.delete(id);
  }
}
