// The resolve module: address classes, per-grant address policy, the resolver and pinning.
export * from './address-class.js';
export * from './address-policy.js';
export * from './host-addresses.js';
export * from './self-addresses.js';
export * from './lookup.js';
export * from './resolver.js';
export * from './pin.js';
