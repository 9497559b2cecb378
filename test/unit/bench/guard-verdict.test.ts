// The judgement of `npm run bench:guard` (bench/guard-verdict.mjs): it reads bench/run.mjs's round lines
// exactly, pairs Sluice with the floor of the same round only, and fails beyond a bound or when a bound
// had nothing to judge. The thresholds file it ships with names only measures and floors the bench has.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../support/sluice-process.js';

interface Round {
  readonly round: number;
  readonly target: string;
  readonly values: Record<string, number>;
  readonly failures: string[];
}
interface Threshold {
  readonly measure: string;
  readonly floor: string;
  readonly min?: number;
  readonly max?: number;
}
interface Judged extends Threshold {
  readonly ratios: number[];
  readonly median: number | null;
  readonly status: 'ok' | 'fail' | 'missing';
}
interface GuardVerdict {
  MEASURES: readonly string[];
  parseRoundLine(line: string): Round | null;
  judge(rounds: readonly Round[], thresholds: readonly Threshold[], options?: { subject?: string; minRounds?: number }): { results: Judged[]; ok: boolean };
}

// A computed specifier: the module is plain JS without types, loaded as bench/guard.mjs loads it.
const guardModule = path.join(REPO_ROOT, 'bench', 'guard-verdict.mjs');
const g = (await import(guardModule)) as GuardVerdict;

// As bench/run.mjs's log() and brief() print them (2026-12-04 quick run).
const SLUICE_1 = '[bench 20:21:33] round 1 sluice-real: p50 308 µs p99 2564 µs, 4456 tunnels/s (222 µs CPU, 21.3 kB, 6.1 µs GC per tunnel), 762 MiB/s';
const FLOOR_1 = '[bench 20:21:20] round 1 netfloor: p50 299 µs p99 2495 µs, 6416 tunnels/s (155 µs CPU, 17.7 kB, 1.4 µs GC per tunnel), 807 MiB/s';

describe('bench:guard verdict', () => {
  it('reads every measure of a round line, and nothing from other lines', () => {
    expect(g.parseRoundLine(SLUICE_1)).toEqual({
      round: 1,
      target: 'sluice-real',
      values: { p50: 308, p99: 2564, rate: 4456, cpuPerTunnel: 222, bulkDown: 762 },
      failures: [],
    });
    // With the upload scenario the line carries both directions; each is read as its own measure.
    expect(g.parseRoundLine(`${SLUICE_1}, up 1724 MiB/s`)?.values).toEqual({ p50: 308, p99: 2564, rate: 4456, cpuPerTunnel: 222, bulkDown: 762, bulkUp: 1724 });
    expect(g.parseRoundLine('[bench 20:21:33] round 1 sluice-real: p50 308 µs p99 2564 µs, up 1724 MiB/s')?.values).toEqual({ p50: 308, p99: 2564, bulkUp: 1724 });
    expect(g.parseRoundLine('[bench 20:21:33] origin: echo 1, bulk 2, http 3; targets netfloor; quick mode, 2 round(s)')).toBeNull();
    expect(g.parseRoundLine('| sluice-real | 308 |')).toBeNull();
  });

  it('keeps a failed scenario as a failure, and its measure absent', () => {
    const r = g.parseRoundLine('[bench 20:21:33] round 2 sluice-real: p50 300 µs p99 900 µs, FAILED bulk: loadgen exited 1');
    expect(r?.values).toEqual({ p50: 300, p99: 900 });
    expect(r?.failures).toEqual(['bulk: loadgen exited 1']);
  });

  const round = (n: number, target: string, values: Record<string, number>): Round => ({ round: n, target, values, failures: [] });

  it('pairs by round and judges the median ratio against min and max bounds', () => {
    const rounds = [
      round(1, 'sluice-real', { rate: 4000, p99: 3000 }),
      round(1, 'netfloor', { rate: 8000, p99: 1000 }),
      round(2, 'sluice-real', { rate: 6000, p99: 1000 }),
      round(2, 'netfloor', { rate: 6000, p99: 1000 }),
      round(3, 'sluice-real', { rate: 3000, p99: 2000 }),
      round(3, 'netfloor', { rate: 5000, p99: 1000 }),
      // a round without its floor pairs with nothing
      round(4, 'sluice-real', { rate: 1, p99: 100_000 }),
    ];
    const v = g.judge(rounds, [
      { measure: 'rate', floor: 'netfloor', min: 0.55 },
      { measure: 'p99', floor: 'netfloor', max: 1.5 },
    ]);
    expect(v.results.map((r) => [r.measure, r.ratios, r.median, r.status])).toEqual([
      ['rate', [0.5, 1, 0.6], 0.6, 'ok'],
      ['p99', [3, 1, 2], 2, 'fail'],
    ]);
    expect(v.ok).toBe(false);
  });

  it('fails a bound it could not measure in at least two rounds', () => {
    const v = g.judge([round(1, 'sluice-real', { bulkDown: 700 }), round(1, 'floor', { bulkDown: 700 })], [{ measure: 'bulkDown', floor: 'floor', min: 0.7 }]);
    expect(v.results[0]?.status).toBe('missing');
    expect(v.ok).toBe(false);
  });

  it('ships thresholds for measures the round lines carry, against floors the guard runs, each with a bound', () => {
    const file = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'bench', 'guard-thresholds.json'), 'utf8')) as { thresholds: Threshold[] };
    expect(file.thresholds.length).toBeGreaterThan(0);
    for (const t of file.thresholds) {
      expect(g.MEASURES).toContain(t.measure);
      expect(['netfloor', 'floor']).toContain(t.floor);
      expect((t.min === undefined) !== (t.max === undefined)).toBe(true);
    }
    expect(new Set(file.thresholds.map((t) => t.measure))).toEqual(new Set(g.MEASURES));
  });
});
