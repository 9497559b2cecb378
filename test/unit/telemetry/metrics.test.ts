// Specifies Metrics as a scrape sees it: each method moves exactly its series, the output is valid
// Prometheus text with every registered family, labels stay bounded whatever the caller passes, and the
// registry is private. NoopMetrics has the same face and counts nothing.
import { register as globalRegistry } from 'prom-client';
import { afterAll, describe, expect, it } from 'vitest';
import { CloseReasons, Reasons, type ReasonCode } from '../../../src/core/index.js';
import {
  AUTHORIZE_BUCKETS_SECONDS,
  DIAL_BUCKETS_SECONDS,
  DecisionRequests,
  LISTENER_OVERFLOW,
  MAX_LISTENER_SERIES,
  MetricSpecs,
  NoopMetrics,
  type MetricName,
  type MetricsSink,
} from '../../../src/telemetry/index.js';
// Metrics itself is loaded only with admin.metrics (createMetrics): tested from its own file.
import { Metrics } from '../../../src/telemetry/metrics.js';
import { parsePrometheusText, type Family } from './prometheus-text.js';

const names = Object.keys(MetricSpecs) as MetricName[];

async function scrape(metrics: MetricsSink): Promise<Map<string, Family>> {
  return parsePrometheusText((await metrics.render()).body);
}

function family(families: Map<string, Family>, name: MetricName): Family {
  const found = families.get(name);
  if (found === undefined) throw new Error(`${name} is not in the scrape`);
  return found;
}

/** The value of the one sample of `name` whose labels are exactly `labels`; undefined when absent. */
function valueOf(families: Map<string, Family>, name: string, labels: Record<string, string> = {}): number | undefined {
  const key = JSON.stringify(Object.entries(labels).sort());
  for (const f of families.values()) {
    for (const s of f.samples) if (s.name === name && JSON.stringify(Object.entries(s.labels).sort()) === key) return s.value;
  }
  return undefined;
}

/** Every sample value in the scrape, keyed by name and labels, to assert that nothing else moved. */
function snapshot(families: Map<string, Family>): Map<string, number> {
  const out = new Map<string, number>();
  for (const f of families.values()) {
    if (!f.name.startsWith('sluice_')) continue;
    for (const s of f.samples) out.set(`${s.name}${JSON.stringify(Object.entries(s.labels).sort())}`, s.value);
  }
  return out;
}

function changed(before: Map<string, number>, after: Map<string, number>): string[] {
  return [...new Set([...before.keys(), ...after.keys()])].filter((k) => before.get(k) !== after.get(k)).sort();
}

const series = (name: string, labels: Record<string, string> = {}): string => `${name}${JSON.stringify(Object.entries(labels).sort())}`;

describe('Metrics: each method moves exactly its series', () => {
  // Each row: the call, and the series (with its new value) it must move from a fresh instance.
  const cases: readonly [string, (m: Metrics) => void, readonly (readonly [string, Record<string, string>, number])[]][] = [
    ['decision', (m) => m.decision('destination_not_granted', 'connect'), [['sluice_decisions_total', { reason: 'destination_not_granted', request: 'connect' }, 1]]],
    ['decision (forward)', (m) => m.decision('granted', 'forward'), [['sluice_decisions_total', { reason: 'granted', request: 'forward' }, 1]]],
    [
      'connectionOpened',
      (m) => m.connectionOpened('main'),
      [
        ['sluice_connections_active', { listener: 'main' }, 1],
        ['sluice_connections_total', { listener: 'main' }, 1],
      ],
    ],
    ['connectionClosed', (m) => m.connectionClosed('main'), [['sluice_connections_active', { listener: 'main' }, -1]]],
    ['tunnelOpened', (m) => m.tunnelOpened('main'), [['sluice_tunnels_active', { listener: 'main' }, 1]]],
    ['tunnelClosed', (m) => m.tunnelClosed('main'), [['sluice_tunnels_active', { listener: 'main' }, -1]]],
    [
      'bytes',
      (m) => m.bytes(10, 2000),
      [
        ['sluice_bytes_total', { direction: 'up' }, 10],
        ['sluice_bytes_total', { direction: 'down' }, 2000],
      ],
    ],
    ['dnsCache(true)', (m) => m.dnsCache(true), [['sluice_dns_cache_lookups_total', { result: 'hit' }, 1]]],
    ['dnsCache(false)', (m) => m.dnsCache(false), [['sluice_dns_cache_lookups_total', { result: 'miss' }, 1]]],
    ['pacCache(true)', (m) => m.pacCache(true), [['sluice_pac_cache_lookups_total', { result: 'hit' }, 1]]],
    ['pacCache(false)', (m) => m.pacCache(false), [['sluice_pac_cache_lookups_total', { result: 'miss' }, 1]]],
    ['hopCache(true)', (m) => m.hopCache(true), [['sluice_decision_cache_lookups_total', { result: 'hit' }, 1]]],
    ['hopCache(false)', (m) => m.hopCache(false), [['sluice_decision_cache_lookups_total', { result: 'miss' }, 1]]],
    [
      'ledger',
      (m) => m.ledger(3, 1, 2),
      [
        ['sluice_ledger_grants', { state: 'active' }, 3],
        ['sluice_ledger_grants', { state: 'revoked' }, 1],
        ['sluice_ledger_grants', { state: 'expired' }, 2],
      ],
    ],
    ['closed', (m) => m.closed('idle_timeout'), [['sluice_closes_total', { reason: 'idle_timeout' }, 1]]],
    ['closed (unknown reason)', (m) => m.closed('not a close reason'), [['sluice_closes_total', { reason: 'other' }, 1]]],
  ];

  it.each(cases)('%s', async (_, call, expected) => {
    const m = new Metrics({ defaultMetrics: false, listeners: ['main'] });
    const before = snapshot(await scrape(m));
    call(m);
    const after = snapshot(await scrape(m));
    expect(changed(before, after)).toEqual(expected.map(([name, labels]) => series(name, labels)).sort());
    for (const [name, labels, value] of expected) expect(after.get(series(name, labels))).toBe(value);
  });

  it('authorizeSeconds observes into sluice_authorize_duration_seconds only', async () => {
    const m = new Metrics({ defaultMetrics: false });
    const before = snapshot(await scrape(m));
    m.authorizeSeconds(3e-6);
    const families = await scrape(m);
    const moved = changed(before, snapshot(families));
    expect(moved.every((k) => k.startsWith('sluice_authorize_duration_seconds_'))).toBe(true);
    expect(valueOf(families, 'sluice_authorize_duration_seconds_count')).toBe(1);
    expect(valueOf(families, 'sluice_authorize_duration_seconds_sum')).toBeCloseTo(3e-6, 12);
    expect(valueOf(families, 'sluice_authorize_duration_seconds_bucket', { le: '0.0000025' })).toBe(0);
    expect(valueOf(families, 'sluice_authorize_duration_seconds_bucket', { le: '0.000005' })).toBe(1);
    expect(valueOf(families, 'sluice_authorize_duration_seconds_bucket', { le: '+Inf' })).toBe(1);
  });

  it('dialSeconds observes into sluice_dial_duration_seconds only', async () => {
    const m = new Metrics({ defaultMetrics: false });
    const before = snapshot(await scrape(m));
    m.dialSeconds(0.3);
    m.dialSeconds(42);
    const families = await scrape(m);
    expect(changed(before, snapshot(families)).every((k) => k.startsWith('sluice_dial_duration_seconds_'))).toBe(true);
    expect(valueOf(families, 'sluice_dial_duration_seconds_count')).toBe(2);
    expect(valueOf(families, 'sluice_dial_duration_seconds_bucket', { le: '0.25' })).toBe(0);
    expect(valueOf(families, 'sluice_dial_duration_seconds_bucket', { le: '0.5' })).toBe(1);
    expect(valueOf(families, 'sluice_dial_duration_seconds_bucket', { le: '10' })).toBe(1);
    expect(valueOf(families, 'sluice_dial_duration_seconds_bucket', { le: '+Inf' })).toBe(2);
  });

  it('has the declared buckets, µs to ms for authorize and 100 µs to 10 s for dial', async () => {
    const families = await scrape(new Metrics({ defaultMetrics: false }));
    const bounds = (name: MetricName): number[] =>
      family(families, name)
        .samples.filter((s) => s.name === `${name}_bucket`)
        .map((s) => (s.labels['le'] === '+Inf' ? Infinity : Number(s.labels['le'])));
    expect(bounds('sluice_authorize_duration_seconds')).toEqual([...AUTHORIZE_BUCKETS_SECONDS, Infinity]);
    expect(bounds('sluice_dial_duration_seconds')).toEqual([...DIAL_BUCKETS_SECONDS, Infinity]);
    expect(AUTHORIZE_BUCKETS_SECONDS[0]).toBe(1e-6);
    expect(AUTHORIZE_BUCKETS_SECONDS.at(-1)).toBe(1e-2);
    expect(DIAL_BUCKETS_SECONDS[0]).toBe(1e-4);
    expect(DIAL_BUCKETS_SECONDS.at(-1)).toBe(10);
  });

  it('accumulates across calls and across scrapes, never counting a call twice', async () => {
    const m = new Metrics({ defaultMetrics: false });
    m.decision('granted', 'connect');
    m.bytes(5, 7);
    m.connectionOpened('main');
    m.connectionOpened('main');
    await scrape(m);
    await scrape(m);
    m.decision('granted', 'connect');
    m.bytes(1, 1);
    m.connectionClosed('main');
    const [a, b] = await Promise.all([scrape(m), scrape(m)]);
    for (const families of [a, b]) {
      expect(valueOf(families, 'sluice_decisions_total', { reason: 'granted', request: 'connect' })).toBe(2);
      expect(valueOf(families, 'sluice_bytes_total', { direction: 'up' })).toBe(6);
      expect(valueOf(families, 'sluice_bytes_total', { direction: 'down' })).toBe(8);
      expect(valueOf(families, 'sluice_connections_active', { listener: 'main' })).toBe(1);
      expect(valueOf(families, 'sluice_connections_total', { listener: 'main' })).toBe(2);
    }
  });

  it('ledger() sets the gauges rather than adding to them', async () => {
    const m = new Metrics({ defaultMetrics: false });
    m.ledger(3, 1, 2);
    m.ledger(4, 0, 2);
    const families = await scrape(m);
    expect(family(families, 'sluice_ledger_grants').samples.map((s) => [s.labels['state'], s.value])).toEqual([
      ['active', 4],
      ['revoked', 0],
      ['expired', 2],
    ]);
  });

  it('ledgerStore() shows the shared store up or down and its staleness; revocation lag lands in its histogram', async () => {
    const m = new Metrics({ defaultMetrics: false });
    expect(valueOf(await scrape(m), 'sluice_ledger_store_up')).toBe(1);
    m.ledgerStore(false, 2.5);
    m.revocationLagSeconds(0.03);
    const families = await scrape(m);
    expect(valueOf(families, 'sluice_ledger_store_up')).toBe(0);
    expect(valueOf(families, 'sluice_ledger_store_staleness_seconds')).toBe(2.5);
    expect(valueOf(families, 'sluice_revocation_lag_seconds_count')).toBe(1);
    expect(valueOf(families, 'sluice_revocation_lag_seconds_bucket', { le: '0.05' })).toBe(1);
    expect(valueOf(families, 'sluice_revocation_lag_seconds_bucket', { le: '0.025' })).toBe(0);
    m.ledgerStore(true, 0.01);
    expect(valueOf(await scrape(m), 'sluice_ledger_store_up')).toBe(1);
  });

  it('ignores values a counter or histogram cannot take, so a scrape never fails', async () => {
    const m = new Metrics({ defaultMetrics: false });
    const before = snapshot(await scrape(m));
    m.bytes(-1, NaN);
    m.bytes(Infinity, 0);
    m.authorizeSeconds(NaN);
    m.authorizeSeconds(-1);
    m.dialSeconds(Infinity);
    m.decision('not_a_reason' as ReasonCode, 'connect');
    m.decision('granted', 'tunnel' as 'connect');
    expect(changed(before, snapshot(await scrape(m)))).toEqual([]);
  });
});

describe('Metrics: render()', () => {
  it('answers with the Prometheus text content type', async () => {
    const { contentType } = await new Metrics({ defaultMetrics: false }).render();
    expect(contentType).toMatch(/^text\/plain; version=0\.0\.4/);
  });

  it('parses as Prometheus text and declares every registered name with its type and help', async () => {
    const families = await scrape(new Metrics({ listeners: ['main'] }));
    for (const name of names) {
      const f = family(families, name);
      expect(f.type, name).toBe(MetricSpecs[name].type);
      expect(f.help, name).toBe(MetricSpecs[name].help);
    }
  });

  it('gives each sample only the declared label names', async () => {
    const m = new Metrics({ defaultMetrics: false, listeners: ['main'] });
    m.authorizeSeconds(1e-5);
    const families = await scrape(m);
    for (const name of names) {
      const spec = MetricSpecs[name];
      const f = family(families, name);
      expect(f.samples.length, `${name} has samples`).toBeGreaterThan(0);
      for (const s of f.samples) {
        const expected = spec.type === 'histogram' && s.name.endsWith('_bucket') ? [...spec.labelNames, 'le'] : [...spec.labelNames];
        expect(Object.keys(s.labels).sort(), s.name).toEqual(expected.sort());
      }
    }
  });

  it('starts every decision pair and every close reason at 0', async () => {
    const families = await scrape(new Metrics({ defaultMetrics: false }));
    const decisions = family(families, 'sluice_decisions_total').samples;
    expect(decisions).toHaveLength(Object.keys(Reasons).length * DecisionRequests.length);
    expect(decisions.every((s) => s.value === 0)).toBe(true);
    const closes = family(families, 'sluice_closes_total').samples.map((s) => s.labels['reason']);
    expect(closes.sort()).toEqual([...Object.keys(CloseReasons), 'other'].sort());
  });

  it('includes prom-client default metrics unless told not to', async () => {
    expect((await scrape(new Metrics())).has('process_cpu_user_seconds_total')).toBe(true);
    const without = await scrape(new Metrics({ defaultMetrics: false }));
    expect([...without.keys()].filter((name) => !name.startsWith('sluice_'))).toEqual([]);
  });

  it('keeps its metrics off the prom-client global registry, and two instances apart', async () => {
    const a = new Metrics({ defaultMetrics: false });
    const b = new Metrics({ defaultMetrics: false });
    a.decision('granted', 'connect');
    expect(valueOf(await scrape(b), 'sluice_decisions_total', { reason: 'granted', request: 'connect' })).toBe(0);
    expect(valueOf(await scrape(a), 'sluice_decisions_total', { reason: 'granted', request: 'connect' })).toBe(1);
    expect(globalRegistry.getMetricsAsArray().filter((m) => m.name.startsWith('sluice_'))).toEqual([]);
  });
});

describe('Metrics: labels stay bounded', () => {
  it('decision() has no listener, host or grant label, whatever the caller would like to pass', async () => {
    expect(MetricSpecs.sluice_decisions_total.labelNames).toEqual(['reason', 'request']);
    const m = new Metrics({ defaultMetrics: false });
    const before = family(await scrape(m), 'sluice_decisions_total').samples.length;
    for (let i = 0; i < 1000; i += 1) {
      // @ts-expect-error decision() takes no listener: 1000 listener names cannot become 1000 series.
      m.decision('granted', 'connect', `listener-${i}`);
    }
    const samples = family(await scrape(m), 'sluice_decisions_total').samples;
    expect(samples).toHaveLength(before);
    expect(samples.find((s) => s.labels['reason'] === 'granted' && s.labels['request'] === 'connect')?.value).toBe(1000);
  });

  it('closed() maps any string that is not a close reason to "other"', async () => {
    const m = new Metrics({ defaultMetrics: false });
    for (let i = 0; i < 1000; i += 1) m.closed(`example-${i}.com`);
    m.closed('__proto__');
    const samples = family(await scrape(m), 'sluice_closes_total').samples;
    expect(samples).toHaveLength(Object.keys(CloseReasons).length + 1);
    expect(samples.find((s) => s.labels['reason'] === 'other')?.value).toBe(1001);
  });

  it('connectionOpened() creates one series per listener, however many connections', async () => {
    const m = new Metrics({ defaultMetrics: false });
    for (let i = 0; i < 100; i += 1) m.connectionOpened(i % 3 === 0 ? 'a' : 'b');
    m.tunnelOpened('a');
    const families = await scrape(m);
    for (const name of ['sluice_connections_active', 'sluice_connections_total', 'sluice_tunnels_active'] as const) {
      expect(family(families, name).samples.map((s) => s.labels['listener']).sort(), name).toEqual(['a', 'b']);
    }
    expect(valueOf(families, 'sluice_connections_total', { listener: 'a' })).toBe(34);
    expect(valueOf(families, 'sluice_connections_total', { listener: 'b' })).toBe(66);
  });

  it('pre-creates the configured listeners at 0', async () => {
    const families = await scrape(new Metrics({ defaultMetrics: false, listeners: ['main', 'ci'] }));
    expect(family(families, 'sluice_connections_active').samples).toEqual([
      { name: 'sluice_connections_active', labels: { listener: 'main' }, value: 0 },
      { name: 'sluice_connections_active', labels: { listener: 'ci' }, value: 0 },
    ]);
  });

  it(`caps listener series at ${MAX_LISTENER_SERIES} and counts further names under ${LISTENER_OVERFLOW}`, async () => {
    const m = new Metrics({ defaultMetrics: false });
    for (let i = 0; i < MAX_LISTENER_SERIES + 50; i += 1) m.connectionOpened(`l${i}`);
    m.connectionClosed(`l${MAX_LISTENER_SERIES + 1}`);
    const families = await scrape(m);
    expect(family(families, 'sluice_connections_total').samples).toHaveLength(MAX_LISTENER_SERIES + 1);
    expect(valueOf(families, 'sluice_connections_total', { listener: LISTENER_OVERFLOW })).toBe(50);
    expect(valueOf(families, 'sluice_connections_active', { listener: LISTENER_OVERFLOW })).toBe(49);
    expect(valueOf(families, 'sluice_connections_total', { listener: `l${MAX_LISTENER_SERIES - 1}` })).toBe(1);
  });
});

describe('NoopMetrics', () => {
  it('accepts every call and renders nothing', async () => {
    const m: MetricsSink = new NoopMetrics();
    m.decision('granted', 'connect');
    m.connectionOpened('main');
    m.connectionClosed('main');
    m.tunnelOpened('main');
    m.tunnelClosed('main');
    m.bytes(1, 2);
    m.authorizeSeconds(1e-6);
    m.dialSeconds(0.01);
    m.dnsCache(true);
    m.pacCache(false);
    m.ledger(1, 2, 3);
    m.closed('completed');
    const { contentType, body } = await m.render();
    expect(contentType).toMatch(/^text\/plain/);
    expect(body).toBe('');
  });

  it('has the same methods as Metrics, every one of MetricsSink', () => {
    const sinkMethods = ['decision', 'connectionOpened', 'connectionClosed', 'tunnelOpened', 'tunnelClosed', 'bytes', 'authorizeSeconds', 'dialSeconds', 'dnsCache', 'pacCache', 'ledger', 'closed', 'render'] as const satisfies readonly (keyof MetricsSink)[];
    for (const sink of [new NoopMetrics(), new Metrics({ defaultMetrics: false })]) {
      expect(sinkMethods.filter((name) => typeof sink[name] !== 'function'), sink.constructor.name).toEqual([]);
    }
  });
});

afterAll(() => {
  // collectDefaultMetrics registered nothing globally either.
  expect(globalRegistry.getMetricsAsArray()).toEqual([]);
});
