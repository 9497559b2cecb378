// The egress module: the only place that opens outbound TCP connections.
export * from './dial.js';
export * from './upstream-connect.js';
export * from './fetch-text.js';
export * from './unix-probe.js';
export * from './deadlines.js';
export * from './proxy-answer.js';
export * from './proxy-auth.js';
export * from './negotiate.js';
