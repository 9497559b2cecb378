// The ledger module: grants over time and their persistence.
export * from './ledger.js';
export * from './store.js';
