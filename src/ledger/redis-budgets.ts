// A fleet's grant budgets on Redis (grant/shared-budgets.ts is the port; docs/fleet.md "Budgets"):
//   <p>usage:<grant>          hash  connections, bytes: what the grant used, fleet-wide, across restarts
//   <p>leases:<grant>         zset  lease → expiry (ms, Redis' clock): the grant's live connections
//   <p>budgetop:<grant>:<op>  string, lives OP_TTL_MS: what one script call charged ('connection' or
//                             'bytes N'), or 'cancelled' once it was settled
// A lease lives `leaseTtlMs` and is renewed every third of that while its connection lives, so the slots
// of an instance that was killed come back within one TTL. Times come from Redis' own clock (TIME), so
// the instances' clocks never matter.
//
// Every charge carries a random operation id, recorded by the script that charges (review 2026-12-04
// finding 9). The client runs with maxRetriesPerRequest 0: if the connection drops after the script ran
// but before its reply, the hop is refused (or the reservation is not credited) while the store keeps the
// charge. So on any error but one that sent nothing, the op is settled once the store answers again
// (within SETTLE_WINDOW_MS): what it charged is given back and the op marked cancelled, so the script
// cannot charge later either. A charge that cannot be settled in that window stays (the lease still
// expires within leaseTtlMs); docs/fleet.md says so.
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { deny, ok, type Verdict } from '../core/index.js';

// KEYS: usage, leases, op. ARGV: lease TTL, lease, maxConcurrent, maxConnections, maxBytes (-1: none), op TTL.
const ACQUIRE = `
if redis.call('EXISTS', KEYS[3]) == 1 then return 'cancelled' end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local maxC, maxN, maxB = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
if maxC >= 0 and redis.call('ZCARD', KEYS[2]) >= maxC then return 'connection_limit_reached' end
if maxN >= 0 and tonumber(redis.call('HGET', KEYS[1], 'connections') or '0') >= maxN then return 'connection_quota_exhausted' end
if maxB >= 0 and tonumber(redis.call('HGET', KEYS[1], 'bytes') or '0') >= maxB then return 'byte_limit_reached' end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[1]), ARGV[2])
redis.call('HINCRBY', KEYS[1], 'connections', 1)
redis.call('SET', KEYS[3], 'connection', 'PX', ARGV[6])
return 'ok'`;

const RENEW = `
local t = redis.call('TIME')
local expiry = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[1])
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'XX', expiry, ARGV[i]) end
return 1`;

// KEYS: usage, op. ARGV: want, maxBytes, op TTL. -1: the op was settled (cancelled) before it ran.
const RESERVE = `
if redis.call('EXISTS', KEYS[2]) == 1 then return -1 end
local left = tonumber(ARGV[2]) - tonumber(redis.call('HGET', KEYS[1], 'bytes') or '0')
if left <= 0 then return 0 end
local granted = math.min(left, tonumber(ARGV[1]))
redis.call('HINCRBY', KEYS[1], 'bytes', granted)
redis.call('SET', KEYS[2], 'bytes ' .. granted, 'PX', ARGV[3])
return granted`;

// Settles an op whose reply was lost: gives back what it charged, if anything, and marks it cancelled
// (so the script, should it still run, charges nothing). Idempotent. A forgotten grant's counters are
// gone: nothing is written back for it. KEYS: usage, leases, op. ARGV: lease ('' for bytes), op TTL.
const SETTLE = `
local charged = redis.call('GET', KEYS[3])
redis.call('SET', KEYS[3], 'cancelled', 'PX', ARGV[2])
if not charged or charged == 'cancelled' or redis.call('EXISTS', KEYS[1]) == 0 then return 'nothing' end
if charged == 'connection' then
  redis.call('ZREM', KEYS[2], ARGV[1])
  redis.call('HINCRBY', KEYS[1], 'connections', -1)
  return charged
end
local bytes = tonumber(string.sub(charged, 7))
if bytes and bytes > 0 then redis.call('HINCRBY', KEYS[1], 'bytes', -bytes) end
return charged`;

const REFUSALS = new Set(['connection_limit_reached', 'connection_quota_exhausted', 'byte_limit_reached'] as const);
type Refusal = 'connection_limit_reached' | 'connection_quota_exhausted' | 'byte_limit_reached';

/** How long after a failed budget call its op is settled, at most: the store must answer within it. */
export const SETTLE_WINDOW_MS = 30_000;
/** How long the store keeps an op's record: past the settle window plus a command timeout. */
export const OP_TTL_MS = 60_000;
/** Ops waiting to be settled at most; past it, a new one is left charged (the lease still expires). */
const MAX_UNSETTLED = 10_000;
const SETTLE_DELAYS_MS = [50, 100, 200, 400, 800, 1000];
/** ioredis' error for a command it did not send (no connection, no offline queue): nothing ran. */
const NOT_SENT = "Stream isn't writeable";

export interface RedisBudgetLimits {
  readonly maxConcurrent?: number | undefined;
  readonly maxConnections?: number | undefined;
  readonly maxBytes?: number | undefined;
}

/** What settling one op did: gave back what it charged, found nothing charged, or gave up (window over, or closed). */
export type Settlement = { readonly op: string; readonly grantId: string; readonly outcome: 'released' | 'nothing' | 'gave_up'; readonly charged?: string };

interface Unsettled {
  readonly grantId: string;
  /** The lease an acquire would have taken; null for a byte reservation. */
  readonly lease: string | null;
  readonly deadline: number;
}

export class RedisBudgets {
  /** The leases this instance holds, by grant: renewed while their connections live. */
  private readonly held = new Map<string, Set<string>>();
  private readonly timer: NodeJS.Timeout;
  private readonly instance = randomBytes(6).toString('hex');
  private next = 0;
  /** Ops whose outcome is unknown (the call failed after it may have run), by op id. */
  private readonly unsettled = new Map<string, Unsettled>();
  private settleTimer: NodeJS.Timeout | null = null;
  private settleAttempt = 0;
  private settling = false;
  private closed = false;

  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly leaseTtlMs: number,
    /** Told how each op of unknown outcome was settled (tests; a log). */
    private readonly onSettled: (settlement: Settlement) => void = () => undefined,
  ) {
    this.timer = setInterval(() => void this.renew(), Math.max(100, Math.floor(leaseTtlMs / 3)));
    this.timer.unref();
  }

  static keysOf(prefix: string, grantId: string): { usage: string; leases: string } {
    return { usage: `${prefix}usage:${grantId}`, leases: `${prefix}leases:${grantId}` };
  }

  static opKey(prefix: string, grantId: string, op: string): string {
    return `${prefix}budgetop:${grantId}:${op}`;
  }

  /** Ops of unknown outcome not settled yet. */
  get unsettledCount(): number {
    return this.unsettled.size;
  }

  async acquire(grantId: string, limits: RedisBudgetLimits): Promise<Verdict<string>> {
    const keys = RedisBudgets.keysOf(this.prefix, grantId);
    this.next += 1;
    const lease = `${this.instance}:${this.next}`;
    const op = newOp();
    const n = (v: number | undefined): number => v ?? -1;
    let answer: string;
    try {
      const opKey = RedisBudgets.opKey(this.prefix, grantId, op);
      answer = String(await this.redis.eval(ACQUIRE, 3, keys.usage, keys.leases, opKey, this.leaseTtlMs, lease, n(limits.maxConcurrent), n(limits.maxConnections), n(limits.maxBytes), OP_TTL_MS));
    } catch (error) {
      this.settleLater(error, op, grantId, lease);
      throw error;
    }
    if (REFUSALS.has(answer as Refusal)) {
      const detail = answer === 'connection_limit_reached' ? `maxConcurrent ${limits.maxConcurrent ?? 0} across the fleet` : answer === 'connection_quota_exhausted' ? `maxConnections ${limits.maxConnections ?? 0} across the fleet` : `maxBytes ${limits.maxBytes ?? 0} across the fleet`;
      return deny(answer as Refusal, detail);
    }
    if (answer !== 'ok') throw new Error(`budget store: acquire answered ${answer}`);
    let leases = this.held.get(grantId);
    if (leases === undefined) {
      leases = new Set();
      this.held.set(grantId, leases);
    }
    leases.add(lease);
    return ok(lease);
  }

  /** Gives the slot back now; if Redis is away, the lease simply expires. */
  release(grantId: string, lease: string): void {
    const leases = this.held.get(grantId);
    leases?.delete(lease);
    if (leases?.size === 0) this.held.delete(grantId);
    this.redis.zrem(RedisBudgets.keysOf(this.prefix, grantId).leases, lease).catch(() => undefined);
  }

  async reserveBytes(grantId: string, want: number, maxBytes: number): Promise<number> {
    const op = newOp();
    let granted: number;
    try {
      granted = Number(await this.redis.eval(RESERVE, 2, RedisBudgets.keysOf(this.prefix, grantId).usage, RedisBudgets.opKey(this.prefix, grantId, op), want, maxBytes, OP_TTL_MS));
    } catch (error) {
      this.settleLater(error, op, grantId, null);
      throw error;
    }
    if (granted < 0) throw new Error('budget store: the reservation was cancelled before it ran');
    return granted;
  }

  /**
   * A call failed: unless it surely sent nothing, the script may have run and charged. The op is settled
   * once the store answers again (review 2026-12-04 finding 9); the caller refuses meanwhile, as before.
   */
  private settleLater(error: unknown, op: string, grantId: string, lease: string | null): void {
    if (this.closed || (error instanceof Error && error.message.startsWith(NOT_SENT))) return;
    if (this.unsettled.size >= MAX_UNSETTLED) {
      this.onSettled({ op, grantId, outcome: 'gave_up' });
      return;
    }
    this.unsettled.set(op, { grantId, lease, deadline: performance.now() + SETTLE_WINDOW_MS });
    this.scheduleSettle(true);
  }

  private scheduleSettle(first: boolean): void {
    if (this.settleTimer !== null || this.settling || this.closed || this.unsettled.size === 0) return;
    if (first) this.settleAttempt = 0;
    const delay = SETTLE_DELAYS_MS[Math.min(this.settleAttempt, SETTLE_DELAYS_MS.length - 1)] ?? 1000;
    this.settleAttempt += 1;
    this.settleTimer = setTimeout(() => {
      this.settleTimer = null;
      void this.settleAll();
    }, delay);
    this.settleTimer.unref();
  }

  /** One round over every unsettled op; those the store did not answer for are tried again, until their deadline. */
  private async settleAll(): Promise<void> {
    this.settling = true;
    let failed = false;
    try {
      await Promise.all(
        [...this.unsettled].map(async ([op, u]) => {
          const keys = RedisBudgets.keysOf(this.prefix, u.grantId);
          try {
            const charged = String(await this.redis.eval(SETTLE, 3, keys.usage, keys.leases, RedisBudgets.opKey(this.prefix, u.grantId, op), u.lease ?? '', OP_TTL_MS));
            this.unsettled.delete(op);
            this.onSettled(charged === 'nothing' ? { op, grantId: u.grantId, outcome: 'nothing' } : { op, grantId: u.grantId, outcome: 'released', charged });
          } catch {
            failed = true;
            if (performance.now() >= u.deadline) {
              this.unsettled.delete(op);
              this.onSettled({ op, grantId: u.grantId, outcome: 'gave_up' });
            }
          }
        }),
      );
    } finally {
      this.settling = false;
    }
    if (!failed) this.settleAttempt = 0;
    this.scheduleSettle(false);
  }

  private async renew(): Promise<void> {
    for (const [grantId, leases] of this.held) {
      if (leases.size === 0) continue;
      await this.redis.eval(RENEW, 1, RedisBudgets.keysOf(this.prefix, grantId).leases, this.leaseTtlMs, ...leases).catch(() => undefined);
    }
  }

  /** Stops renewing and settling; ops not settled yet are left to the lease TTL (their charges stay). */
  close(): void {
    this.closed = true;
    clearInterval(this.timer);
    if (this.settleTimer !== null) clearTimeout(this.settleTimer);
    this.settleTimer = null;
    for (const [op, u] of this.unsettled) this.onSettled({ op, grantId: u.grantId, outcome: 'gave_up' });
    this.unsettled.clear();
  }
}

function newOp(): string {
  return randomBytes(9).toString('base64url');
}
