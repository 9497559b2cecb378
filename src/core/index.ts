// The core vocabulary: reason codes, verdicts, faults, types and ports. No I/O.
export * from './reason.js';
export * from './remedy.js';
export * from './proxy-status.js';
export * from './socks-reply.js';
export * from './verdict.js';
export * from './errors.js';
export * from './types.js';
export * from './ports.js';
export * from './reused-reads.js';
export * from './slot-set.js';
export * from './periodic-sweep.js';
