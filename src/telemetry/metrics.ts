// The Prometheus metrics of one Sluice instance, on a private prom-client Registry (never the global
// one). On the hot path a call only adds to a plain number: prom-client's labelled children build a
// label-hash string on every inc(), so the numbers are handed to them when a scrape collects.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { ReasonCode, RequestKind } from '../core/index.js';
import {
  ByteDirections,
  CacheResults,
  DecisionReasons,
  DecisionRequests,
  LISTENER_OVERFLOW,
  LedgerStates,
  MAX_LISTENER_SERIES,
  MetricCloseReasons,
  MetricSpecs,
  CLOSE_REASON_OTHER,
  type MetricName,
} from './names.js';

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
  ledger(active: number, revoked: number, expired: number): void;
  closed(reason: string): void;
  render(): Promise<RenderedMetrics>;
}

export interface MetricsOptions {
  /** Configured listener names: their series exist from the start, at zero. Others appear on first use. */
  readonly listeners?: readonly string[];
  /** prom-client's default Node.js and OS metrics (`process_*`, `nodejs_*`). Default true. */
  readonly defaultMetrics?: boolean;
}

/** One label set of a counter. The hot path adds to `pending`; a scrape moves it into prom-client. */
class CounterSeries {
  pending = 0;
  constructor(readonly child: Counter.Internal) {
    child.inc(0);
  }
}

/** One label set of a gauge. The hot path moves `value`; a scrape copies it into prom-client. */
class GaugeSeries {
  value = 0;
  constructor(readonly child: Gauge.Internal<string>) {
    child.set(0);
  }
}

class DecisionSeries {
  constructor(
    readonly connect: CounterSeries,
    readonly forward: CounterSeries,
  ) {}
}

class ListenerSeries {
  constructor(
    readonly connectionsActive: GaugeSeries,
    readonly connectionsTotal: CounterSeries,
    readonly tunnelsActive: GaugeSeries,
  ) {}
}

function publishCounters(series: readonly CounterSeries[]): void {
  for (const s of series) {
    const n = s.pending;
    s.pending = 0;
    if (n > 0 && n !== Infinity) s.child.inc(n);
  }
}

function publishGauges(series: readonly GaugeSeries[]): void {
  for (const s of series) if (Number.isFinite(s.value)) s.child.set(s.value);
}

function isCountable(n: number): boolean {
  return n > 0 && n !== Infinity;
}

export class Metrics implements MetricsSink {
  private readonly registry = new Registry();
  private readonly counters: CounterSeries[] = [];
  private readonly gauges: GaugeSeries[] = [];
  private readonly decisions = new Map<string, DecisionSeries>();
  private readonly closes = new Map<string, CounterSeries>();
  private readonly closeOther: CounterSeries;
  private readonly listeners = new Map<string, ListenerSeries>();
  private readonly connectionsActive: Gauge;
  private readonly connectionsTotal: Counter;
  private readonly tunnelsActive: Gauge;
  private readonly bytesUp: CounterSeries;
  private readonly bytesDown: CounterSeries;
  private readonly authorize: Histogram.Internal<string>;
  private readonly dial: Histogram.Internal<string>;
  private readonly dnsHit: CounterSeries;
  private readonly dnsMiss: CounterSeries;
  private readonly pacHit: CounterSeries;
  private readonly pacMiss: CounterSeries;
  private readonly ledgerActive: GaugeSeries;
  private readonly ledgerRevoked: GaugeSeries;
  private readonly ledgerExpired: GaugeSeries;

  constructor(options: MetricsOptions = {}) {
    const decisions = this.counter('sluice_decisions_total');
    for (const reason of DecisionReasons) {
      const [connect, forward] = DecisionRequests.map((request) => this.counterSeries(decisions, reason, request));
      this.decisions.set(reason, new DecisionSeries(connect as CounterSeries, forward as CounterSeries));
    }
    this.connectionsActive = this.gauge('sluice_connections_active');
    this.connectionsTotal = this.counter('sluice_connections_total');
    this.tunnelsActive = this.gauge('sluice_tunnels_active');
    const bytes = this.counter('sluice_bytes_total');
    [this.bytesUp, this.bytesDown] = ByteDirections.map((direction) => this.counterSeries(bytes, direction)) as [CounterSeries, CounterSeries];
    this.authorize = this.histogram('sluice_authorize_duration_seconds').labels();
    this.dial = this.histogram('sluice_dial_duration_seconds').labels();
    const dns = this.counter('sluice_dns_cache_lookups_total');
    [this.dnsHit, this.dnsMiss] = CacheResults.map((result) => this.counterSeries(dns, result)) as [CounterSeries, CounterSeries];
    const pac = this.counter('sluice_pac_cache_lookups_total');
    [this.pacHit, this.pacMiss] = CacheResults.map((result) => this.counterSeries(pac, result)) as [CounterSeries, CounterSeries];
    const ledger = this.gauge('sluice_ledger_grants');
    [this.ledgerActive, this.ledgerRevoked, this.ledgerExpired] = LedgerStates.map((state) => this.gaugeSeries(ledger, state)) as [
      GaugeSeries,
      GaugeSeries,
      GaugeSeries,
    ];
    const closes = this.counter('sluice_closes_total');
    for (const reason of MetricCloseReasons) this.closes.set(reason, this.counterSeries(closes, reason));
    this.closeOther = this.closes.get(CLOSE_REASON_OTHER) as CounterSeries;
    for (const listener of options.listeners ?? []) this.seriesFor(listener);
    if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry });
  }

  decision(reason: ReasonCode, request: RequestKind): void {
    const series = this.decisions.get(reason);
    if (series === undefined) return;
    if (request === 'connect') series.connect.pending += 1;
    else if (request === 'forward') series.forward.pending += 1;
  }

  connectionOpened(listener: string): void {
    const series = this.seriesFor(listener);
    series.connectionsActive.value += 1;
    series.connectionsTotal.pending += 1;
  }

  connectionClosed(listener: string): void {
    this.seriesFor(listener).connectionsActive.value -= 1;
  }

  tunnelOpened(listener: string): void {
    this.seriesFor(listener).tunnelsActive.value += 1;
  }

  tunnelClosed(listener: string): void {
    this.seriesFor(listener).tunnelsActive.value -= 1;
  }

  bytes(up: number, down: number): void {
    if (isCountable(up)) this.bytesUp.pending += up;
    if (isCountable(down)) this.bytesDown.pending += down;
  }

  authorizeSeconds(seconds: number): void {
    if (seconds >= 0 && seconds !== Infinity) this.authorize.observe(seconds);
  }

  dialSeconds(seconds: number): void {
    if (seconds >= 0 && seconds !== Infinity) this.dial.observe(seconds);
  }

  dnsCache(hit: boolean): void {
    (hit ? this.dnsHit : this.dnsMiss).pending += 1;
  }

  pacCache(hit: boolean): void {
    (hit ? this.pacHit : this.pacMiss).pending += 1;
  }

  ledger(active: number, revoked: number, expired: number): void {
    this.ledgerActive.value = active;
    this.ledgerRevoked.value = revoked;
    this.ledgerExpired.value = expired;
  }

  closed(reason: string): void {
    (this.closes.get(reason) ?? this.closeOther).pending += 1;
  }

  async render(): Promise<RenderedMetrics> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  /** The series of a listener; a name past MAX_LISTENER_SERIES shares the LISTENER_OVERFLOW series. */
  private seriesFor(listener: string): ListenerSeries {
    return this.listeners.get(listener) ?? this.addListener(listener);
  }

  private addListener(name: string): ListenerSeries {
    const listener = this.listeners.size < MAX_LISTENER_SERIES ? name : LISTENER_OVERFLOW;
    const existing = this.listeners.get(listener);
    if (existing !== undefined) return existing;
    const series = new ListenerSeries(
      this.gaugeSeries(this.connectionsActive, listener),
      this.counterSeries(this.connectionsTotal, listener),
      this.gaugeSeries(this.tunnelsActive, listener),
    );
    this.listeners.set(listener, series);
    return series;
  }

  // Each metric's collect hook publishes every series of the instance; publishing is idempotent
  // (pending is zeroed, gauges are set), so it does not matter which metric a scrape reads first.

  private counter(name: MetricName): Counter {
    const spec = MetricSpecs[name];
    const counters = this.counters;
    return new Counter({ name, help: spec.help, labelNames: spec.labelNames, registers: [this.registry], collect: () => publishCounters(counters) });
  }

  private gauge(name: MetricName): Gauge {
    const spec = MetricSpecs[name];
    const gauges = this.gauges;
    return new Gauge({ name, help: spec.help, labelNames: spec.labelNames, registers: [this.registry], collect: () => publishGauges(gauges) });
  }

  private histogram(name: 'sluice_authorize_duration_seconds' | 'sluice_dial_duration_seconds'): Histogram {
    const spec = MetricSpecs[name];
    return new Histogram({ name, help: spec.help, labelNames: spec.labelNames, buckets: [...spec.buckets], registers: [this.registry] });
  }

  private counterSeries(counter: Counter, ...labelValues: string[]): CounterSeries {
    const series = new CounterSeries(counter.labels(...labelValues));
    this.counters.push(series);
    return series;
  }

  private gaugeSeries(gauge: Gauge, ...labelValues: string[]): GaugeSeries {
    const series = new GaugeSeries(gauge.labels(...labelValues));
    this.gauges.push(series);
    return series;
  }
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
  ledger(): void {}
  closed(): void {}
  render(): Promise<RenderedMetrics> {
    return Promise.resolve({ contentType: 'text/plain; version=0.0.4; charset=utf-8', body: '' });
  }
}
