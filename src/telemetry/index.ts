// The telemetry module: the metric registry (names.ts), the MetricsSink port with its no-op, the
// Prometheus Metrics behind it (loaded with prom-client only when configured), and the event ring.
import type { MetricsOptions, MetricsSink } from './metrics-sink.js';

export * from './names.js';
export * from './metrics-sink.js';
export type { Metrics } from './metrics.js';
export * from './event-ring.js';

/** The Prometheus metrics (metrics.ts), loading it and prom-client on first use: only with admin.metrics. */
export async function createMetrics(options: MetricsOptions): Promise<MetricsSink> {
  const { Metrics } = await import('./metrics.js');
  return new Metrics(options);
}
