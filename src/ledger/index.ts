// The ledger module: grants over time and their persistence.
import type { RedisLedgerStore, RedisStoreOptions } from './redis-store.js';

export * from './ledger.js';
export * from './store.js';
export * from './read-state-file.js';
export * from './shared-store.js';
// ioredis loads only with `ledger.store: redis` (issue 26): a file-store start keeps its ~2 MB of heap out of every
// full GC, so the Redis store is reached through openRedisLedgerStore, never by a static import.
export type { RedisLedgerStore, RedisStoreOptions } from './redis-store.js';
export * from './redis-target.js';
export * from './fleet-sync.js';
export * from './describe-store-error.js';
export * from './redis-budgets.js';
export type { RedisAsks, StoredAsk, StoredAskAnswer, StoredAskMessage } from './redis-asks.js';
export * from './usage-file.js';

/** Opens the shared ledger store on Redis (RedisLedgerStore.open), loading it and ioredis on first use. */
export async function openRedisLedgerStore(options: RedisStoreOptions): Promise<RedisLedgerStore> {
  const redisStore = await import('./redis-store.js');
  return redisStore.RedisLedgerStore.open(options);
}
