// The egress module: the only place that opens outbound TCP connections.
export * from './dial.js';
