// What the proxy counts through, with no metrics library behind it: the port (MetricsSink), its options,
// and the sink that counts nothing. prom-client (1.9 MB of heap, issue 26 item 2) is loaded by
// metrics.ts only when `admin.metrics` is configured (createMetrics in index.ts).
import type { ReasonCode, RequestKind } from '../core/index.js';

/** What `/metrics` serves. */
export interface RenderedMetrics {
  readonly contentType: string;
  readonly body: string;
}

/** What the proxy calls. Every method is cheap, never throws, and ignores values it cannot count. */
export interface MetricsSink {
  decision(reason: ReasonCode, request: RequestKind): void;
  connectionOpened(listener: string): void;
  connectionClosed(listener: string): void;
  tunnelOpened(listener: string): void;
  tunnelClosed(listener: string): void;
  bytes(up: number, down: number): void;
  authorizeSeconds(seconds: number): void;
  dialSeconds(seconds: number): void;
  dnsCache(hit: boolean): void;
  pacCache(hit: boolean): void;
  /** A hop's decision was answered from the hop cache (hit) or ran its stages (miss). */
  hopCache(hit: boolean): void;
  ledger(active: number, revoked: number, expired: number): void;
  closed(reason: string): void;
  /** The shared ledger store: whether it answers, and for how long it has not. */
  ledgerStore(up: boolean, stalenessSeconds: number): void;
  revocationLagSeconds(seconds: number): void;
  render(): Promise<RenderedMetrics>;
}

export interface MetricsOptions {
  /** Configured listener names: their series exist from the start, at zero. Others appear on first use. */
  readonly listeners?: readonly string[];
  /** prom-client's default Node.js and OS metrics (`process_*`, `nodejs_*`). Default true. */
  readonly defaultMetrics?: boolean;
}

/** A MetricsSink that counts nothing: for tests, and when `admin.metrics` is not configured. */
export class NoopMetrics implements MetricsSink {
  decision(): void {}
  connectionOpened(): void {}
  connectionClosed(): void {}
  tunnelOpened(): void {}
  tunnelClosed(): void {}
  bytes(): void {}
  authorizeSeconds(): void {}
  dialSeconds(): void {}
  dnsCache(): void {}
  pacCache(): void {}
  hopCache(): void {}
  ledger(): void {}
  closed(): void {}
  ledgerStore(): void {}
  revocationLagSeconds(): void {}
  render(): Promise<RenderedMetrics> {
    return Promise.resolve({ contentType: 'text/plain; version=0.0.4; charset=utf-8', body: '' });
  }
}
