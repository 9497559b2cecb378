// A fleet's asks on Redis (grant/shared-asks.ts is the port; issue 27; docs/fleet.md "Asks"):
//   <p>ask:<id>                    string  the pending ask's view (JSON), lives its timeout + KEEP_MS
//   <p>askkey:<grant> <destination> string  the id of the ask pending for that pair, lives its timeout
//   <p>askdone:<id>                string  how the ask ended (JSON), lives KEEP_MS: a late answer is 409
//   <p>asks                        zset    id → expiry (ms): what GET /v1/asks lists
//   channel <p>asks: {kind: raised | answered, from, view, answer}
// Raising and answering are one script each, so two instances raising the same pair get one ask, and
// of two answers (or an answer and a timeout) exactly one wins. A lost message costs at most the join
// grace: every waiting instance asks the store how the ask ended once its deadline passed.
import type { Redis } from 'ioredis';
import { ProxyError, type AskPending } from '../core/index.js';

/** How long an ended ask is remembered (a late answer 409), and a pending one past its deadline. */
const KEEP_MS = 600_000;

// KEYS: askkey, ask:<id>, asks. ARGV: id, view, timeout ms, expiry ms, channel, from, ask: prefix, askdone: prefix.
const RAISE = `
local existing = redis.call('GET', KEYS[1])
if existing then
  local view = redis.call('GET', ARGV[7] .. existing)
  if view and redis.call('EXISTS', ARGV[8] .. existing) == 0 then return view end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
redis.call('SET', KEYS[2], ARGV[2], 'PX', tonumber(ARGV[3]) + ${KEEP_MS})
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[1])
redis.call('PUBLISH', ARGV[5], cjson.encode({kind = 'raised', from = ARGV[6], view = cjson.decode(ARGV[2])}))
return ARGV[2]`;

// KEYS: ask:<id>, askdone:<id>, asks. ARGV: id, answer, channel, from, askkey: prefix.
// Returns the ask's view when this answer won, -1 when it had ended, 0 when no such ask is pending.
const ANSWER = `
if redis.call('EXISTS', KEYS[2]) == 1 then return -1 end
local view = redis.call('GET', KEYS[1])
if not view then return 0 end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ${KEEP_MS})
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[3], ARGV[1])
local v = cjson.decode(view)
local pairKey = ARGV[5] .. v['grant'] .. ' ' .. v['destination']
if redis.call('GET', pairKey) == ARGV[1] then redis.call('DEL', pairKey) end
redis.call('PUBLISH', ARGV[3], cjson.encode({kind = 'answered', from = ARGV[4], view = v, answer = cjson.decode(ARGV[2])}))
return view`;

/** A pending ask, as the store keeps it: core's AskPending. */
export type StoredAsk = AskPending;

export interface StoredAskAnswer {
  readonly decision: 'allow' | 'deny' | 'timeout' | 'revoked';
  readonly scope: 'once' | 'grant' | null;
  readonly answeredBy: 'admin' | 'timeout' | 'revoked';
}

export type StoredAskMessage =
  | { readonly kind: 'raised'; readonly from: string; readonly view: StoredAsk }
  | { readonly kind: 'answered'; readonly from: string; readonly view: StoredAsk; readonly answer: StoredAskAnswer };

/** Subscribes to a channel on the store's subscriber connection (redis-store.ts). */
export type ChannelListen = (channel: string, listener: (message: string) => void) => Promise<void>;

function parseView(json: string): StoredAsk {
  const view = JSON.parse(json) as StoredAsk;
  // cjson writes a JSON null for null, so generation comes back as written.
  if (typeof view.ask !== 'string' || typeof view.grant !== 'string' || typeof view.destination !== 'string') throw new Error('not an ask');
  return { ...view, generation: typeof view.generation === 'string' ? view.generation : null };
}

export class RedisAsks {
  private readonly keys: { ask: string; done: string; pair: string; set: string; channel: string };

  constructor(
    private readonly redis: Redis,
    prefix: string,
    readonly instance: string,
    private readonly onChannel: ChannelListen,
  ) {
    this.keys = { ask: `${prefix}ask:`, done: `${prefix}askdone:`, pair: `${prefix}askkey:`, set: `${prefix}asks`, channel: `${prefix}asks` };
  }

  async raise(view: StoredAsk, timeoutMs: number): Promise<StoredAsk> {
    const keys = [`${this.keys.pair}${view.grant} ${view.destination}`, `${this.keys.ask}${view.ask}`, this.keys.set];
    const args = [view.ask, JSON.stringify(view), Math.max(1, Math.ceil(timeoutMs)), Date.parse(view.expiresAt), this.keys.channel, this.instance, this.keys.ask, this.keys.done];
    const stored = (await this.redis.eval(RAISE, keys.length, ...keys, ...args)) as string;
    return this.parse(stored, `${this.keys.ask}${view.ask}`);
  }

  async answer(id: string, answer: StoredAskAnswer): Promise<{ readonly result: 'answered' | 'already_answered' | 'not_found'; readonly view: StoredAsk | null }> {
    const keys = [`${this.keys.ask}${id}`, `${this.keys.done}${id}`, this.keys.set];
    const reply = (await this.redis.eval(ANSWER, keys.length, ...keys, id, JSON.stringify(answer), this.keys.channel, this.instance, this.keys.pair)) as string | number;
    if (typeof reply === 'string') return { result: 'answered', view: this.parse(reply, `${this.keys.ask}${id}`) };
    return { result: Number(reply) < 0 ? 'already_answered' : 'not_found', view: null };
  }

  async outcome(id: string): Promise<StoredAskAnswer | null> {
    const json = await this.redis.get(`${this.keys.done}${id}`);
    if (json === null) return null;
    try {
      return JSON.parse(json) as StoredAskAnswer;
    } catch (error) {
      throw new ProxyError('ERR_LEDGER_STORE_CORRUPT', `${this.keys.done}${id}: ${(error as Error).message}`);
    }
  }

  async list(): Promise<StoredAsk[]> {
    const now = Date.now();
    await this.redis.zremrangebyscore(this.keys.set, '-inf', String(now));
    const ids = await this.redis.zrange(this.keys.set, '0', '1023');
    if (ids.length === 0) return [];
    const views = await this.redis.mget(...ids.map((id) => `${this.keys.ask}${id}`));
    const out: StoredAsk[] = [];
    for (const [i, json] of views.entries()) if (json !== null) out.push(this.parse(json, `${this.keys.ask}${ids[i] ?? ''}`));
    return out;
  }

  /** Messages from the other instances: this instance's own are dropped. A malformed one is ignored. */
  subscribe(listener: (message: StoredAskMessage) => void): Promise<void> {
    return this.onChannel(this.keys.channel, (text) => {
      let message: StoredAskMessage;
      try {
        const parsed = JSON.parse(text) as StoredAskMessage;
        message = { ...parsed, view: parseView(JSON.stringify(parsed.view)) };
      } catch {
        return;
      }
      if (message.from !== this.instance) listener(message);
    });
  }

  private parse(json: string, where: string): StoredAsk {
    try {
      return parseView(json);
    } catch (error) {
      throw new ProxyError('ERR_LEDGER_STORE_CORRUPT', `${where}: ${(error as Error).message}`);
    }
  }
}
