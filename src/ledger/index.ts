// The ledger module: grants over time and their persistence.
export * from './ledger.js';
export * from './store.js';
export * from './read-state-file.js';
export * from './shared-store.js';
export * from './redis-store.js';
export * from './redis-target.js';
export * from './fleet-sync.js';
export * from './describe-store-error.js';
export * from './redis-budgets.js';
export * from './usage-file.js';
