// The proxy module: listeners and the per-hop pipeline.
export * from './hop/hop.js';
export * from './hop/decide.js';
export * from './hop/hop-cache.js';
export * from './ingress/respond.js';
export * from './hop/runtime.js';
export * from './ingress/server.js';
export * from './hop/connection-context.js';
export * from './hop/decision.js';
export * from './ingress/bridge.js';
