// The shared ledger store on Redis (ADR 0017). Keys under one prefix, so fleets can share a server:
//   <p>grants   hash  id → run-time GrantRecord (JSON; token hash only, never a token)
//   <p>revoked  hash  id → revokedAt (tombstones, config and run-time grants alike)
//   <p>answers  hash  `<grant id> <scheme://host:port>` → a standing answer to an ask (JSON; issue 27)
//   <p>rev      int   the revision, bumped by every change
//   <p>log      stream, entry id `<rev>-1`: kind (issued, revoked, forgot, rotated, answered), id, at,
//               record (the grant record, or the answer)
//               (trimmed to about LOG_LENGTH entries)
//   channel <p>changes: the new revision, published by every change
// Each change is one Lua script, so the record, the tombstone, the revision, the log entry and the
// notification are one atomic step. Pub/sub alone can lose a message: instances also poll `rev`.
import { Redis } from 'ioredis';
import { ProxyError } from '../core/index.js';
import { describeStoreError } from './describe-store-error.js';
import type { GrantRecord } from './ledger.js';
import { RedisAsks } from './redis-asks.js';
import { RedisBudgets } from './redis-budgets.js';
import { redisTargetLabel, redisTargetOptions, type RedisTarget } from './redis-target.js';
import type { LedgerChange, LedgerSnapshot, SharedLedgerStore, StandingAnswer } from './shared-store.js';

const LOG_LENGTH = 10_000;
/** How soon a refused SUBSCRIBE is tried again (the revision poll carries changes meanwhile). */
const RESUBSCRIBE_MS = 1000;
/** The cause of a connection that closed with no error event (a server killed or restarted). */
const SERVER_CLOSED = new Error('the server closed the connection');

// The same record again is the answer to a retry whose first reply was lost: taken, not a collision
// (review 2026-12-04 finding 7: a retried issue must not leave an orphan grant nobody has the token of).
const ISSUE = `
local existing = redis.call('HGET', KEYS[1], ARGV[2])
if existing == ARGV[3] then return math.max(1, tonumber(redis.call('GET', KEYS[2]) or '1')) end
if existing or redis.call('HEXISTS', KEYS[4], ARGV[2]) == 1 then return 0 end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
local rev = redis.call('INCR', KEYS[2])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[4], rev .. '-1', 'kind', 'issued', 'id', ARGV[2], 'at', '', 'record', ARGV[3])
redis.call('PUBLISH', ARGV[1], rev)
return rev`;

const REVOKE = `
if redis.call('HEXISTS', KEYS[4], ARGV[2]) == 1 then return 0 end
redis.call('HSET', KEYS[4], ARGV[2], ARGV[3])
local rev = redis.call('INCR', KEYS[2])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[4], rev .. '-1', 'kind', 'revoked', 'id', ARGV[2], 'at', ARGV[3], 'record', '')
redis.call('PUBLISH', ARGV[1], rev)
return rev`;

// A forgotten run-time grant leaves no record and no tombstone (its id is random and never reissued),
// so the store stays bounded however many runs there are; the log entry tells the other instances.
const FORGET = `
if redis.call('HEXISTS', KEYS[1], ARGV[2]) == 0 then return 0 end
redis.call('HDEL', KEYS[1], ARGV[2])
redis.call('HDEL', KEYS[4], ARGV[2])
redis.call('DEL', KEYS[5], KEYS[6])
local mine = ARGV[2] .. ' '
for _, field in ipairs(redis.call('HKEYS', KEYS[7])) do
  if string.sub(field, 1, #mine) == mine then redis.call('HDEL', KEYS[7], field) end
end
local rev = redis.call('INCR', KEYS[2])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[4], rev .. '-1', 'kind', 'forgot', 'id', ARGV[2], 'at', ARGV[3], 'record', '')
redis.call('PUBLISH', ARGV[1], rev)
return rev`;

// A rotation replaces a live run-time grant's record, only if its token hash is still the one the
// rotating instance knew (ARGV[5]): of two rotations at once, one wins and the other is told (-1).
// The same rotated record again is a retry whose first reply was lost: it took.
const ROTATE = `
local current = redis.call('HGET', KEYS[1], ARGV[2])
if not current or redis.call('HEXISTS', KEYS[4], ARGV[2]) == 1 then return 0 end
if current == ARGV[3] then return math.max(1, tonumber(redis.call('GET', KEYS[2]) or '1')) end
if cjson.decode(current)['tokenSha256'] ~= ARGV[5] then return -1 end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
local rev = redis.call('INCR', KEYS[2])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[4], rev .. '-1', 'kind', 'rotated', 'id', ARGV[2], 'at', '', 'record', ARGV[3])
redis.call('PUBLISH', ARGV[1], rev)
return rev`;

// A standing answer (issue 27) for a grant with no tombstone: config and run-time grants alike, since
// config grants live in each instance's file; a run-time grant must still be in the store (a forgotten
// one leaves no tombstone, and its answers must not outlive it). Standing answers are few (a person
// gives each one).
const KEEP_ANSWER = `
if redis.call('HEXISTS', KEYS[4], ARGV[2]) == 1 then return 0 end
if ARGV[6] == 'runtime' and redis.call('HEXISTS', KEYS[1], ARGV[2]) == 0 then return 0 end
redis.call('HSET', KEYS[5], ARGV[2] .. ' ' .. ARGV[3], ARGV[5])
local rev = redis.call('INCR', KEYS[2])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[4], rev .. '-1', 'kind', 'answered', 'id', ARGV[2], 'at', '', 'record', ARGV[5])
redis.call('PUBLISH', ARGV[1], rev)
return rev`;

// Tombstones the store lost come back with a revision bump and no log entry, so every instance reads
// the whole table again (a log shorter than the revision means resync). Only a tombstone that was
// missing takes the record with it: one already there (a revoke that landed meanwhile) leaves it alone.
const RESTORE = `
local added = 0
for i = 2, #ARGV, 2 do
  if redis.call('HSETNX', KEYS[4], ARGV[i], ARGV[i + 1]) == 1 then
    added = added + 1
    redis.call('HDEL', KEYS[1], ARGV[i])
  end
end
if added == 0 then return 0 end
local rev = redis.call('INCR', KEYS[2])
redis.call('PUBLISH', ARGV[1], rev)
return rev`;

type Script = (keys: readonly string[], args: readonly (string | number)[]) => Promise<unknown>;

function parseRecord(json: string, where: string): GrantRecord {
  try {
    const record = JSON.parse(json) as GrantRecord;
    if (typeof record.id !== 'string' || typeof record.spec !== 'object') throw new Error('not a grant record');
    return { ...record, source: 'runtime', revokedAt: null };
  } catch (error) {
    throw new ProxyError('ERR_LEDGER_STORE_CORRUPT', `${where}: ${(error as Error).message}`);
  }
}

function parseAnswer(json: string, where: string): StandingAnswer {
  try {
    const answer = JSON.parse(json) as StandingAnswer;
    if (typeof answer.grant !== 'string' || typeof answer.destination !== 'string' || (answer.decision !== 'allow' && answer.decision !== 'deny')) throw new Error('not a standing answer');
    return { grant: answer.grant, destination: answer.destination, decision: answer.decision, at: String(answer.at) };
  } catch (error) {
    throw new ProxyError('ERR_LEDGER_STORE_CORRUPT', `${where}: ${(error as Error).message}`);
  }
}

function fieldsOf(entry: [string, string[]]): Record<string, string> {
  const out: Record<string, string> = {};
  const fields = entry[1];
  for (let i = 0; i + 1 < fields.length; i += 2) out[fields[i] as string] = fields[i + 1] as string;
  return out;
}

export interface RedisStoreOptions {
  /** One server, or a Sentinel group's primary (redis-target.ts). */
  readonly target: RedisTarget;
  readonly keyPrefix: string;
  /** Fails a command this long after the connection is lost, instead of queueing it. */
  readonly commandTimeoutMs: number;
}

export class RedisLedgerStore implements SharedLedgerStore {
  readonly label: string;
  private readonly keys: { grants: string; revoked: string; answers: string; rev: string; log: string; channel: string };
  private readonly redis: Redis;
  private subscriber: Redis | null = null;
  private budgetStore: RedisBudgets | null = null;
  private askStore: RedisAsks | null = null;
  /** Channel → listener, subscribed on every (re)connect of the subscriber. */
  private readonly channels = new Map<string, (message: string) => void>();
  private readonly prefix: string;
  private readonly scripts: Record<'issue' | 'revoke' | 'forget' | 'rotate' | 'restore' | 'keepAnswer', Script>;
  private opened = false;
  private readyCount = 0;
  /** Why the connection last failed, until it is ready again. */
  private connectionError: Error | null = null;

  private constructor(options: RedisStoreOptions) {
    this.label = redisTargetLabel(options.target);
    const p = options.keyPrefix;
    this.prefix = p;
    this.keys = { grants: `${p}grants`, revoked: `${p}revoked`, answers: `${p}answers`, rev: `${p}rev`, log: `${p}log`, channel: `${p}changes` };
    // No offline queue: a command while Redis is away fails at once, and the instance goes stale
    // instead of serving on a queue of promises (docs/fleet.md, "when Redis is away").
    const target = redisTargetOptions(options.target, options.commandTimeoutMs);
    const common = {
      ...target.options,
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      connectTimeout: options.commandTimeoutMs,
      commandTimeout: options.commandTimeoutMs,
      retryStrategy: (times: number) => Math.min(50 * times, 500),
      // While no sentinel answers, ioredis asks them again and again inside one connect; at start that
      // would hang `sluice start`, so the first connect fails instead (exit 1 with the reason), and
      // only once open do reconnects keep asking (a failover can take all sentinels a while).
      sentinelRetryStrategy: (times: number) => (this.opened ? Math.min(50 * times, 500) : null),
      // A server that answers READONLY is a replica (a primary demoted under us, or a role check INFO
      // could not make for want of the ACL): reconnect, which asks the sentinels again. The command is not
      // resent: it was refused, so it ran nothing, and its caller already answered 503 or retries itself.
      reconnectOnError: (error: Error) => (error.message.startsWith('READONLY') ? 1 : false),
    };
    this.redis = target.url === null ? new Redis(common) : new Redis(target.url, common);
    // Errors are read where commands fail; an unhandled 'error' event must not crash the process. A failed
    // command says only that the connection is down: the event's cause (ECONNREFUSED, WRONGPASS, a TLS
    // failure) is kept for the message (describe-store-error.ts).
    this.redis.on('error', (error: Error) => (this.connectionError = error));
    this.redis.on('close', () => (this.connectionError ??= SERVER_CLOSED));
    // Each new connection may be to a new primary: fleet-sync.ts then reads the whole table (connections()).
    this.redis.on('ready', () => {
      this.readyCount += 1;
      this.connectionError = null;
    });
    const define = (lua: string): Script => {
      const sha = { lua };
      return (keys, args) => this.redis.eval(sha.lua, keys.length, ...keys, ...args) as Promise<unknown>;
    };
    this.scripts = { issue: define(ISSUE), revoke: define(REVOKE), forget: define(FORGET), rotate: define(ROTATE), restore: define(RESTORE), keepAnswer: define(KEEP_ANSWER) };
  }

  /** Connects and checks the keys have the types this store writes; throws a ProxyError naming what is wrong. */
  static async open(options: RedisStoreOptions): Promise<RedisLedgerStore> {
    const store = new RedisLedgerStore(options);
    try {
      await store.redis.connect();
      await store.checkTypes();
      store.opened = true;
    } catch (error) {
      // Described before the disconnect, whose own close would otherwise stand in for the cause.
      const cause = describeStoreError(error, store);
      store.redis.disconnect();
      if (error instanceof ProxyError) throw error;
      throw new ProxyError('ERR_LEDGER_STORE_UNAVAILABLE', `cannot use the ledger store ${store.label}: ${cause}`, { cause: error });
    }
    return store;
  }

  /** Why the connection last failed (ECONNREFUSED, WRONGPASS, …), or null while it is up. */
  lastConnectionError(): Error | null {
    if (this.connectionError !== null) return this.connectionError;
    // A server that ended the connection (killed, restarted) leaves the socket unwritable before ioredis
    // sees the close: a call failing in between finds it so, with no error event.
    const { status, stream } = this.redis;
    const ended = status === 'close' || status === 'reconnecting' || (status === 'ready' && (stream as { writable?: boolean } | undefined)?.writable === false);
    return ended ? SERVER_CLOSED : null;
  }

  /**
   * How many times the connection became ready. A Sentinel failover promotes a replica that may lack the
   * last changes the old primary acknowledged (replication is asynchronous), and a restarted server may
   * have lost its last second: after any new connection the instance reads the whole table and writes
   * back the tombstones it lacks, rather than trust that an equal revision means the same history.
   */
  connections(): number {
    return this.readyCount;
  }

  private async checkTypes(): Promise<void> {
    const expected: [string, string][] = [[this.keys.grants, 'hash'], [this.keys.revoked, 'hash'], [this.keys.answers, 'hash'], [this.keys.rev, 'string'], [this.keys.log, 'stream']];
    for (const [key, type] of expected) {
      const actual = await this.redis.type(key);
      if (actual !== 'none' && actual !== type) throw new ProxyError('ERR_LEDGER_STORE_CORRUPT', `ledger store ${this.label}: key ${key} is a ${actual}, expected a ${type}`);
    }
  }

  private keyList(): string[] {
    return [this.keys.grants, this.keys.rev, this.keys.log, this.keys.revoked];
  }

  async load(): Promise<LedgerSnapshot> {
    const result = await this.redis.multi().hgetall(this.keys.grants).hgetall(this.keys.revoked).get(this.keys.rev).hgetall(this.keys.answers).exec();
    if (result === null) throw new ProxyError('ERR_LEDGER_STORE_UNAVAILABLE', `ledger store ${this.label}: snapshot aborted`);
    const [grants, revoked, rev, answers] = result.map(([error, value]) => {
      if (error !== null) throw error;
      return value;
    }) as [Record<string, string>, Record<string, string>, string | null, Record<string, string>];
    const runtime = Object.entries(grants).map(([id, json]) => parseRecord(json, `${this.keys.grants} ${id}`));
    const standing = Object.entries(answers).map(([field, json]) => parseAnswer(json, `${this.keys.answers} ${field}`));
    return { revision: Number(rev ?? 0), runtime, revoked: new Map(Object.entries(revoked)), answers: standing };
  }

  async issue(record: GrantRecord): Promise<boolean> {
    const rev = await this.scripts.issue(this.keyList(), [this.keys.channel, record.id, JSON.stringify({ ...record, revokedAt: null }), LOG_LENGTH]);
    return Number(rev) > 0;
  }

  async revoke(id: string, at: string): Promise<void> {
    await this.scripts.revoke(this.keyList(), [this.keys.channel, id, at, LOG_LENGTH]);
  }

  async forget(id: string, at: string): Promise<void> {
    // Its budget counters go with it (redis-budgets.ts).
    const budget = RedisBudgets.keysOf(this.prefix, id);
    await this.scripts.forget([...this.keyList(), budget.usage, budget.leases, this.keys.answers], [this.keys.channel, id, at, LOG_LENGTH]);
  }

  async rotate(record: GrantRecord, expectedSha256: string): Promise<'rotated' | 'unknown' | 'conflict'> {
    const rev = Number(await this.scripts.rotate(this.keyList(), [this.keys.channel, record.id, JSON.stringify({ ...record, revokedAt: null }), LOG_LENGTH, expectedSha256]));
    return rev > 0 ? 'rotated' : rev < 0 ? 'conflict' : 'unknown';
  }

  async keepAnswer(answer: StandingAnswer, runtime: boolean): Promise<number> {
    const keys = [...this.keyList(), this.keys.answers];
    const rev = await this.scripts.keepAnswer(keys, [this.keys.channel, answer.grant, answer.destination, LOG_LENGTH, JSON.stringify(answer), runtime ? 'runtime' : 'config']);
    return Math.max(0, Number(rev));
  }

  /** The fleet's budget counters, on this store's connection and prefix. */
  budgets(leaseTtlMs: number): RedisBudgets {
    this.budgetStore ??= new RedisBudgets(this.redis, this.prefix, leaseTtlMs);
    return this.budgetStore;
  }

  async restoreTombstones(revoked: ReadonlyMap<string, string>): Promise<void> {
    if (revoked.size === 0) return;
    const args: string[] = [this.keys.channel];
    for (const [id, at] of revoked) args.push(id, at);
    await this.scripts.restore(this.keyList(), args);
  }

  async revision(): Promise<number> {
    return Number((await this.redis.get(this.keys.rev)) ?? 0);
  }

  async changesSince(revision: number): Promise<readonly LedgerChange[] | 'resync'> {
    const entries = (await this.redis.xrange(this.keys.log, `${revision + 1}-1`, '+', 'COUNT', 1000)) as [string, string[]][];
    const changes: LedgerChange[] = [];
    let expected = revision + 1;
    for (const entry of entries) {
      const rev = Number(entry[0].split('-')[0]);
      // A gap means the log was trimmed (or rewritten) past what this instance saw: read everything.
      if (rev !== expected) return 'resync';
      expected += 1;
      const f = fieldsOf(entry);
      const id = f['id'] ?? '';
      if (f['kind'] === 'issued') changes.push({ revision: rev, kind: 'issued', record: parseRecord(f['record'] ?? '', `${this.keys.log} ${entry[0]}`) });
      else if (f['kind'] === 'revoked') changes.push({ revision: rev, kind: 'revoked', id, at: f['at'] ?? '' });
      else if (f['kind'] === 'forgot') changes.push({ revision: rev, kind: 'forgot', id, at: f['at'] ?? '' });
      else if (f['kind'] === 'rotated') changes.push({ revision: rev, kind: 'rotated', record: parseRecord(f['record'] ?? '', `${this.keys.log} ${entry[0]}`) });
      else if (f['kind'] === 'answered') changes.push({ revision: rev, kind: 'answered', answer: parseAnswer(f['record'] ?? '', `${this.keys.log} ${entry[0]}`) });
      else return 'resync';
    }
    return changes;
  }

  onNotify(listener: () => void): Promise<void> {
    return this.onChannel(this.keys.channel, () => listener());
  }

  /**
   * Listens to a channel on the one subscriber connection (the ledger's changes, the fleet's asks).
   * Subscribed here on every (re)connect, not by ioredis' own resubscribe, so that a refused SUBSCRIBE
   * (an ACL, a restart) is retried every second instead of leaving the instance on the poll alone.
   */
  async onChannel(channel: string, listener: (message: string) => void): Promise<void> {
    this.channels.set(channel, listener);
    if (this.subscriber !== null) {
      if (this.subscriber.status === 'ready') await this.subscribeAll(this.subscriber).catch(() => undefined);
      return;
    }
    const subscriber = this.redis.duplicate({ lazyConnect: true, enableOfflineQueue: true, autoResubscribe: false });
    subscriber.on('error', () => undefined);
    subscriber.on('message', (on: string, message: string) => this.channels.get(on)?.(message));
    subscriber.on('ready', () => void this.subscribeAll(subscriber).catch(() => undefined));
    this.subscriber = subscriber;
    // Resolves once subscribed (the 'ready' handler's SUBSCRIBE is not awaited): a message published
    // after this call returns is heard.
    const connected = await subscriber.connect().then(() => true, () => false);
    if (connected) await this.subscribeAll(subscriber).catch(() => undefined);
  }

  private async subscribeAll(subscriber: Redis): Promise<void> {
    try {
      await subscriber.subscribe(...this.channels.keys());
    } catch (error) {
      const retry = setTimeout(() => {
        if (this.subscriber === subscriber && subscriber.status === 'ready') void this.subscribeAll(subscriber).catch(() => undefined);
      }, RESUBSCRIBE_MS);
      retry.unref();
      throw error;
    }
  }

  /** The fleet's asks (issue 27), on this store's connection and prefix. */
  asks(instance: string): RedisAsks {
    this.askStore ??= new RedisAsks(this.redis, this.prefix, instance, (channel, listener) => this.onChannel(channel, listener));
    return this.askStore;
  }

  async close(): Promise<void> {
    this.budgetStore?.close();
    const subscriber = this.subscriber;
    this.subscriber = null;
    subscriber?.disconnect();
    this.redis.disconnect();
  }
}
