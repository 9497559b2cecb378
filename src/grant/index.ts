// The grant module: compiled grants and the live grant table, admission (connection caps, the auth
// throttle, per-grant budgets), dedicated listeners and the control plane the admin API drives. One floor
// below proxy/, which consults it on every hop.
export * from './grant-table.js';
export * from './grant-registry.js';
export * from './admission.js';
export * from './dedicated-listeners.js';
export * from './control.js';
export * from './shared-budgets.js';
export * from './asks.js';
export * from './shared-asks.js';
