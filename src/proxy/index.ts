// The proxy module: listeners and the per-hop pipeline.
export * from './grant-table.js';
export * from './hop.js';
export * from './decide.js';
export * from './respond.js';
export * from './runtime.js';
export * from './server.js';
export * from './connection-context.js';
export * from './explain.js';
export * from './grant-registry.js';
export * from './dedicated-listeners.js';
export * from './control.js';
export * from './admission.js';
export * from './bridge.js';
export * from './socket-group.js';
