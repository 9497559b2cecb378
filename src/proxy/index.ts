// The proxy module: listeners and the per-hop pipeline.
export * from './hop.js';
export * from './decide.js';
export * from './hop-cache.js';
export * from './respond.js';
export * from './runtime.js';
export * from './server.js';
export * from './connection-context.js';
export * from './decision.js';
export * from './bridge.js';
