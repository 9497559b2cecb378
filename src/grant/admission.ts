// Admission limits that protect Sluice itself, before any principal is known: connection caps (global
// and per listener) and a throttle on failed proxy authentications, so token guessing is slow and one
// flood cannot starve other principals (CWE-307, CWE-770).
import { parseProxyAuthorization } from '../identity/index.js';
import type { OperationalLog } from '../audit/index.js';

const WINDOW_MS = 60_000;
/** The throttle's window in seconds: a throttled source may always try again after at most this (Retry-After). */
export const AUTH_THROTTLE_WINDOW_SECONDS = WINDOW_MS / 1000;
// Keys tracked per window in each table; past this, new keys share one overflow count (see FailureCounts).
const MAX_TRACKED_KEYS = 10_000;

export class ConnectionGate {
  private total = 0;
  private readonly perListener = new Map<string, number>();

  constructor(private maxTotal: number) {}

  /** A reload's new limits.maxConnections: connections over it are not ended; new ones wait for room. */
  setMax(maxTotal: number): void {
    this.maxTotal = maxTotal;
  }

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

/**
 * Failures per key in one window, in bounded memory. Once MAX_TRACKED_KEYS keys are tracked, a new key
 * is counted in one shared overflow count and judged by it. That fails closed: a spray of unique grant
 * ids can neither reset the count of the grant id being guessed (as clearing the table would) nor win
 * untracked, unthrottled guesses. Its cost is that, after such a spray, a grant id first seen later in
 * the window shares the spray's count.
 */
class FailureCounts {
  private readonly counts = new Map<string, number>();
  private overflow = 0;

  get isEmpty(): boolean {
    return this.counts.size === 0;
  }

  get(key: string): number {
    return this.counts.get(key) ?? (this.counts.size >= MAX_TRACKED_KEYS ? this.overflow : 0);
  }

  add(key: string): void {
    const count = this.counts.get(key);
    if (count !== undefined) this.counts.set(key, count + 1);
    else if (this.counts.size < MAX_TRACKED_KEYS) this.counts.set(key, 1);
    else this.overflow += 1;
  }

  clear(): void {
    this.counts.clear();
    this.overflow = 0;
  }
}

export interface AuthThrottleLimits {
  /** Failures per presented grant id per window (limits.authFailuresPerMinute). */
  readonly perGrantId: number;
  /** Failures per source address per window, whatever grant ids they present (limits.authFailuresPerMinutePerSource). */
  readonly perSource: number;
}

/**
 * Whose guesses a failure counts against: the grant id presented (Basic user), from any address, so
 * guessing one grant's token stays slow however many addresses guess; a token with no grant id (Bearer,
 * an empty user, an unreadable header) names nobody, so its source address. The prefixes keep a grant id,
 * which is any string a client chose, apart from an address.
 */
function presentedKey(header: string | undefined, source: string): string {
  const presented = parseProxyAuthorization(header);
  return presented !== null && presented !== 'malformed' && presented.grantId !== null ? `id ${presented.grantId}` : `source ${source}`;
}

/**
 * Failed proxy authentications per presented grant id, under a per-source ceiling. Every token client
 * on one host arrives from 127.0.0.1, so a source-only key let one principal's guesses lock out every
 * other principal's token for up to a minute (issue 13). Keyed by grant id, a guesser locks out only
 * the grant id it presents; the ceiling, much higher, bounds how many grant ids one address can try.
 * A blocked presentation is refused without checking the token, so the block is no oracle either.
 */
export class AuthThrottle {
  private windowStartMs = 0;
  private readonly byPresented = new FailureCounts();
  private readonly bySource = new FailureCounts();
  /** Sources the log has named this window: one warning per source per window, at most MAX_TRACKED_KEYS. */
  private readonly logged = new Set<string>();
  private loggedOverflow = false;

  constructor(
    private limits: AuthThrottleLimits,
    private readonly now: () => number,
    private readonly log: Pick<OperationalLog, 'warn'> | null = null,
  ) {}

  /** A reload's new limits; failures counted so far stay counted. */
  setLimits(limits: AuthThrottleLimits): void {
    this.limits = limits;
  }

  private roll(): void {
    const now = this.now();
    if (now - this.windowStartMs >= WINDOW_MS) {
      this.windowStartMs = now;
      this.byPresented.clear();
      this.bySource.clear();
      this.logged.clear();
      this.loggedOverflow = false;
    }
  }

  /** Seconds until the current window ends and every count starts again from zero (at least 1). */
  retryAfterSeconds(): number {
    return Math.max(1, Math.ceil((this.windowStartMs + WINDOW_MS - this.now()) / 1000));
  }

  /**
   * Warns once per source per window, when its failures first block it (the source ceiling, or the
   * grant id it presents). Names the source only: never the header, the token, nor the presented grant
   * id (a client that put its token in the user field would have it logged).
   */
  private warnThrottled(header: string | undefined, source: string): void {
    if (this.log === null || this.logged.has(source)) return;
    const bySource = this.bySource.get(source) >= this.limits.perSource;
    const key = presentedKey(header, source);
    if (!bySource && this.byPresented.get(key) < this.limits.perGrantId) return;
    if (this.logged.size >= MAX_TRACKED_KEYS) {
      if (!this.loggedOverflow) this.log.warn({ reason: 'auth_rate_limited', sources: MAX_TRACKED_KEYS }, 'proxy authentication throttled for more sources than are named this window; the rest go unnamed until it ends');
      this.loggedOverflow = true;
      return;
    }
    this.logged.add(source);
    const retryAfterSeconds = this.retryAfterSeconds();
    const limit = bySource ? 'source' : key.startsWith('id ') ? 'grant_id' : 'token';
    this.log.warn(
      { reason: 'auth_rate_limited', source, limit, retryAfterSeconds },
      `proxy authentication throttled for ${source} (${limit === 'source' ? 'limits.authFailuresPerMinutePerSource' : 'limits.authFailuresPerMinute'}): too many failed attempts this minute; refused for ${retryAfterSeconds} s`,
    );
  }

  /**
   * Whether `header` presented from `source` is refused unchecked. Until some authentication has failed
   * this window it parses nothing and never asks for `source` (that can cost a getpeername).
   */
  isBlocked(header: string, source: () => string): boolean {
    this.roll();
    if (this.bySource.isEmpty) return false;
    const from = source();
    if (this.bySource.get(from) >= this.limits.perSource) return true;
    return this.byPresented.get(presentedKey(header, from)) >= this.limits.perGrantId;
  }

  recordFailure(header: string | undefined, source: string): void {
    this.roll();
    this.bySource.add(source);
    this.byPresented.add(presentedKey(header, source));
    this.warnThrottled(header, source);
  }
}
