// A fleet's grant budgets on Redis (grant/shared-budgets.ts is the port; docs/fleet.md "Budgets"):
//   <p>usage:<grant>   hash  connections, bytes: what the grant used, fleet-wide, across restarts
//   <p>leases:<grant>  zset  lease → expiry (ms, Redis' clock): the grant's live connections
// A lease lives `leaseTtlMs` and is renewed every third of that while its connection lives, so the slots
// of an instance that was killed come back within one TTL. Times come from Redis' own clock (TIME), so
// the instances' clocks never matter.
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { deny, ok, type Verdict } from '../core/index.js';

const ACQUIRE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local maxC, maxN, maxB = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
if maxC >= 0 and redis.call('ZCARD', KEYS[2]) >= maxC then return 'connection_limit_reached' end
if maxN >= 0 and tonumber(redis.call('HGET', KEYS[1], 'connections') or '0') >= maxN then return 'connection_quota_exhausted' end
if maxB >= 0 and tonumber(redis.call('HGET', KEYS[1], 'bytes') or '0') >= maxB then return 'byte_limit_reached' end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[1]), ARGV[2])
redis.call('HINCRBY', KEYS[1], 'connections', 1)
return 'ok'`;

const RENEW = `
local t = redis.call('TIME')
local expiry = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[1])
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'XX', expiry, ARGV[i]) end
return 1`;

const RESERVE = `
local left = tonumber(ARGV[2]) - tonumber(redis.call('HGET', KEYS[1], 'bytes') or '0')
if left <= 0 then return 0 end
local granted = math.min(left, tonumber(ARGV[1]))
redis.call('HINCRBY', KEYS[1], 'bytes', granted)
return granted`;

const REFUSALS = new Set(['connection_limit_reached', 'connection_quota_exhausted', 'byte_limit_reached'] as const);
type Refusal = 'connection_limit_reached' | 'connection_quota_exhausted' | 'byte_limit_reached';

export interface RedisBudgetLimits {
  readonly maxConcurrent?: number | undefined;
  readonly maxConnections?: number | undefined;
  readonly maxBytes?: number | undefined;
}

export class RedisBudgets {
  /** The leases this instance holds, by grant: renewed while their connections live. */
  private readonly held = new Map<string, Set<string>>();
  private readonly timer: NodeJS.Timeout;
  private readonly instance = randomBytes(6).toString('hex');
  private next = 0;

  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly leaseTtlMs: number,
  ) {
    this.timer = setInterval(() => void this.renew(), Math.max(100, Math.floor(leaseTtlMs / 3)));
    this.timer.unref();
  }

  static keysOf(prefix: string, grantId: string): { usage: string; leases: string } {
    return { usage: `${prefix}usage:${grantId}`, leases: `${prefix}leases:${grantId}` };
  }

  async acquire(grantId: string, limits: RedisBudgetLimits): Promise<Verdict<string>> {
    const keys = RedisBudgets.keysOf(this.prefix, grantId);
    this.next += 1;
    const lease = `${this.instance}:${this.next}`;
    const n = (v: number | undefined): number => v ?? -1;
    const answer = String(await this.redis.eval(ACQUIRE, 2, keys.usage, keys.leases, this.leaseTtlMs, lease, n(limits.maxConcurrent), n(limits.maxConnections), n(limits.maxBytes)));
    if (REFUSALS.has(answer as Refusal)) {
      const detail = answer === 'connection_limit_reached' ? `maxConcurrent ${limits.maxConcurrent ?? 0} across the fleet` : answer === 'connection_quota_exhausted' ? `maxConnections ${limits.maxConnections ?? 0} across the fleet` : `maxBytes ${limits.maxBytes ?? 0} across the fleet`;
      return deny(answer as Refusal, detail);
    }
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
    return Number(await this.redis.eval(RESERVE, 1, RedisBudgets.keysOf(this.prefix, grantId).usage, want, maxBytes));
  }

  private async renew(): Promise<void> {
    for (const [grantId, leases] of this.held) {
      if (leases.size === 0) continue;
      await this.redis.eval(RENEW, 1, RedisBudgets.keysOf(this.prefix, grantId).leases, this.leaseTtlMs, ...leases).catch(() => undefined);
    }
  }

  close(): void {
    clearInterval(this.timer);
  }
}
