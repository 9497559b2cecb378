// The cli module: clients of the running proxy's admin API (`sluice grant`).
export * from './grant.js';
export * from './run.js';
