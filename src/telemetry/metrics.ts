// The Prometheus metrics of one Sluice instance, on a private prom-client Registry (never the global
// one). On the hot path a call only adds to a plain number: prom-client's labelled children build a
// label-hash string on every inc(), so the numbers are handed to them when a scrape collects.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { ReasonCode, RequestKind } from '../core/index.js';
import {
  ByteDirections,
  CLOSE_REASON_OTHER,
  CacheResults,
  DecisionReasons,
  DecisionRequests,
  LISTENER_OVERFLOW,
  LedgerStates,
  MAX_LISTENER_SERIES,
  MetricCloseReasons,
  MetricSpecs,
  type MetricName,
} from './names.js';
import type { MetricsOptions, MetricsSink, RenderedMetrics } from './metrics-sink.js';

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

/** A counter and its series; its collect hook (run by each scrape) publishes the pending counts. */
class CounterFamily {
  private readonly series: CounterSeries[] = [];
  private readonly metric: Counter;

  constructor(registry: Registry, name: MetricName) {
    const { help, labelNames } = MetricSpecs[name];
    const series = this.series;
    this.metric = new Counter({ name, help, labelNames, registers: [registry], collect: () => publishCounters(series) });
  }

  add(...labelValues: string[]): CounterSeries {
    const series = new CounterSeries(this.metric.labels(...labelValues));
    this.series.push(series);
    return series;
  }
}

/** A gauge and its series; its collect hook (run by each scrape) publishes the current values. */
class GaugeFamily {
  private readonly series: GaugeSeries[] = [];
  private readonly metric: Gauge;

  constructor(registry: Registry, name: MetricName) {
    const { help, labelNames } = MetricSpecs[name];
    const series = this.series;
    this.metric = new Gauge({ name, help, labelNames, registers: [registry], collect: () => publishGauges(series) });
  }

  add(...labelValues: string[]): GaugeSeries {
    const series = new GaugeSeries(this.metric.labels(...labelValues));
    this.series.push(series);
    return series;
  }
}

function publishCounters(series: readonly CounterSeries[]): void {
  for (const s of series) {
    const n = s.pending;
    s.pending = 0;
    if (isCountable(n)) s.child.inc(n);
  }
}

function publishGauges(series: readonly GaugeSeries[]): void {
  for (const s of series) if (Number.isFinite(s.value)) s.child.set(s.value);
}

/** Positive and finite: NaN, negatives and Infinity would make prom-client throw during a scrape. */
function isCountable(n: number): boolean {
  return n > 0 && n !== Infinity;
}

function histogram(registry: Registry, name: 'sluice_authorize_duration_seconds' | 'sluice_dial_duration_seconds' | 'sluice_revocation_lag_seconds'): Histogram.Internal<string> {
  const { help, labelNames, buckets } = MetricSpecs[name];
  return new Histogram({ name, help, labelNames, buckets: [...buckets], registers: [registry] }).labels();
}

/** One series per value of a closed label set, keyed by value (construction time only). */
function seriesBy<K extends string, S>(values: readonly K[], add: (value: K) => S): Record<K, S> {
  const out = {} as Record<K, S>;
  for (const value of values) out[value] = add(value);
  return out;
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

export class Metrics implements MetricsSink {
  private readonly registry = new Registry();
  private readonly decisions = new Map<string, DecisionSeries>();
  private readonly listeners = new Map<string, ListenerSeries>();
  private readonly connectionsActive: GaugeFamily;
  private readonly connectionsTotal: CounterFamily;
  private readonly tunnelsActive: GaugeFamily;
  private readonly bytesBy: Record<(typeof ByteDirections)[number], CounterSeries>;
  private readonly authorize: Histogram.Internal<string>;
  private readonly dial: Histogram.Internal<string>;
  private readonly dnsBy: Record<(typeof CacheResults)[number], CounterSeries>;
  private readonly pacBy: Record<(typeof CacheResults)[number], CounterSeries>;
  private readonly hopBy: Record<(typeof CacheResults)[number], CounterSeries>;
  private readonly ledgerBy: Record<(typeof LedgerStates)[number], GaugeSeries>;
  private readonly closes = new Map<string, CounterSeries>();
  private readonly closeOther: CounterSeries;
  private readonly storeUp: GaugeSeries;
  private readonly storeStaleness: GaugeSeries;
  private readonly revocationLag: Histogram.Internal<string>;

  constructor(options: MetricsOptions = {}) {
    const registry = this.registry;
    const decisions = new CounterFamily(registry, 'sluice_decisions_total');
    for (const reason of DecisionReasons) {
      const byRequest = seriesBy(DecisionRequests, (request) => decisions.add(reason, request));
      this.decisions.set(reason, new DecisionSeries(byRequest.connect, byRequest.forward));
    }
    this.connectionsActive = new GaugeFamily(registry, 'sluice_connections_active');
    this.connectionsTotal = new CounterFamily(registry, 'sluice_connections_total');
    this.tunnelsActive = new GaugeFamily(registry, 'sluice_tunnels_active');
    const bytes = new CounterFamily(registry, 'sluice_bytes_total');
    this.bytesBy = seriesBy(ByteDirections, (direction) => bytes.add(direction));
    this.authorize = histogram(registry, 'sluice_authorize_duration_seconds');
    this.dial = histogram(registry, 'sluice_dial_duration_seconds');
    const dns = new CounterFamily(registry, 'sluice_dns_cache_lookups_total');
    this.dnsBy = seriesBy(CacheResults, (result) => dns.add(result));
    const pac = new CounterFamily(registry, 'sluice_pac_cache_lookups_total');
    this.pacBy = seriesBy(CacheResults, (result) => pac.add(result));
    const hop = new CounterFamily(registry, 'sluice_decision_cache_lookups_total');
    this.hopBy = seriesBy(CacheResults, (result) => hop.add(result));
    const ledger = new GaugeFamily(registry, 'sluice_ledger_grants');
    this.ledgerBy = seriesBy(LedgerStates, (state) => ledger.add(state));
    const closes = new CounterFamily(registry, 'sluice_closes_total');
    for (const reason of MetricCloseReasons) this.closes.set(reason, closes.add(reason));
    this.closeOther = this.closes.get(CLOSE_REASON_OTHER) ?? closes.add(CLOSE_REASON_OTHER);
    this.storeUp = new GaugeFamily(registry, 'sluice_ledger_store_up').add();
    this.storeUp.value = 1;
    this.storeStaleness = new GaugeFamily(registry, 'sluice_ledger_store_staleness_seconds').add();
    this.revocationLag = histogram(registry, 'sluice_revocation_lag_seconds');
    for (const listener of options.listeners ?? []) this.seriesFor(listener);
    if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry });
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
    if (isCountable(up)) this.bytesBy.up.pending += up;
    if (isCountable(down)) this.bytesBy.down.pending += down;
  }

  authorizeSeconds(seconds: number): void {
    if (seconds >= 0 && seconds !== Infinity) this.authorize.observe(seconds);
  }

  dialSeconds(seconds: number): void {
    if (seconds >= 0 && seconds !== Infinity) this.dial.observe(seconds);
  }

  dnsCache(hit: boolean): void {
    (hit ? this.dnsBy.hit : this.dnsBy.miss).pending += 1;
  }

  pacCache(hit: boolean): void {
    (hit ? this.pacBy.hit : this.pacBy.miss).pending += 1;
  }

  hopCache(hit: boolean): void {
    (hit ? this.hopBy.hit : this.hopBy.miss).pending += 1;
  }

  ledger(active: number, revoked: number, expired: number): void {
    this.ledgerBy.active.value = active;
    this.ledgerBy.revoked.value = revoked;
    this.ledgerBy.expired.value = expired;
  }

  closed(reason: string): void {
    (this.closes.get(reason) ?? this.closeOther).pending += 1;
  }

  ledgerStore(up: boolean, stalenessSeconds: number): void {
    this.storeUp.value = up ? 1 : 0;
    if (stalenessSeconds >= 0 && stalenessSeconds !== Infinity) this.storeStaleness.value = stalenessSeconds;
  }

  revocationLagSeconds(seconds: number): void {
    if (seconds >= 0 && seconds !== Infinity) this.revocationLag.observe(seconds);
  }

  async render(): Promise<RenderedMetrics> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  /** The series of a listener; names past MAX_LISTENER_SERIES share the LISTENER_OVERFLOW series. */
  private seriesFor(listener: string): ListenerSeries {
    return this.listeners.get(listener) ?? this.addListener(listener);
  }

  private addListener(name: string): ListenerSeries {
    const listener = this.listeners.size < MAX_LISTENER_SERIES ? name : LISTENER_OVERFLOW;
    const existing = this.listeners.get(listener);
    if (existing !== undefined) return existing;
    const series = new ListenerSeries(this.connectionsActive.add(listener), this.connectionsTotal.add(listener), this.tunnelsActive.add(listener));
    this.listeners.set(listener, series);
    return series;
  }
}
