// The telemetry module: the metric registry (names.ts) and the Prometheus Metrics behind MetricsSink.
export * from './names.js';
export * from './metrics.js';
export * from './event-ring.js';
