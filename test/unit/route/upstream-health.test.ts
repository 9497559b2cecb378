// Failover back-off of one upstream proxy (src/route/upstream-health.ts). Threat: a dead corporate proxy
// that every hop waits on (no back-off), a back-off that grows without bound or never resets, a burst
// of concurrent failures that jumps straight to the maximum, and a table that PAC answers naming
// endless proxies grow without bound.
import { describe, expect, it } from 'vitest';
import { UPSTREAM_BACKOFF_MAX_MS, UpstreamHealth, UpstreamHealthTable } from '../../../src/route/index.js';

function clock(): { now: () => number; advance: (ms: number) => void } {
  let t = 5000;
  return { now: () => t, advance: (ms) => void (t += ms) };
}

describe('UpstreamHealth', () => {
  it('is up until a connection failure, then backs off 1 s', () => {
    const c = clock();
    const h = new UpstreamHealth('http://a.test:3128', c.now);
    expect(h.isUp).toBe(true);
    expect(h.isBackingOff).toBe(false);
    h.markFailed('upstream_unreachable');
    expect(h.isUp).toBe(false);
    expect(h.isBackingOff).toBe(true);
    expect(h.retryInMs).toBe(1000);
    c.advance(999);
    expect(h.isBackingOff).toBe(true);
    c.advance(1);
    expect(h.isBackingOff).toBe(false);
    // Still not known to be up: only a hop through it says so.
    expect(h.isUp).toBe(false);
  });

  it('doubles the back-off per failed check up to 60 s, and a success resets it', () => {
    const c = clock();
    const h = new UpstreamHealth('http://a.test:3128', c.now);
    const seen: number[] = [];
    for (let i = 0; i < 9; i++) {
      h.markFailed('upstream_timeout');
      seen.push(h.retryInMs);
      c.advance(h.retryInMs);
    }
    expect(seen).toEqual([1000, 2000, 4000, 8000, 16000, 32000, UPSTREAM_BACKOFF_MAX_MS, UPSTREAM_BACKOFF_MAX_MS, UPSTREAM_BACKOFF_MAX_MS]);
    h.markUp();
    expect(h.isUp).toBe(true);
    h.markFailed('upstream_unreachable');
    expect(h.retryInMs).toBe(1000);
  });

  it('counts concurrent failures within one back-off once', () => {
    const c = clock();
    const h = new UpstreamHealth('http://a.test:3128', c.now);
    for (let i = 0; i < 50; i++) h.markFailed('upstream_unreachable');
    expect(h.retryInMs).toBe(1000);
  });
});

describe('UpstreamHealthTable', () => {
  it('shares one health per proxy label and reports each for the gauge', () => {
    const t = new UpstreamHealthTable(clock().now);
    const a = t.for('http://a.test:3128');
    expect(t.for('http://a.test:3128')).toBe(a);
    a.markFailed('upstream_unreachable');
    t.for('http://b.test:3128');
    expect(t.snapshot()).toEqual([
      { upstream: 'http://a.test:3128', isUp: false },
      { upstream: 'http://b.test:3128', isUp: true },
    ]);
  });

  it('stays bounded when PAC answers name endless proxies', () => {
    const t = new UpstreamHealthTable(clock().now, { initialMs: 1000, maxMs: 60_000 }, 3);
    for (let i = 0; i < 10; i++) t.for(`http://p${i}.test:3128`);
    expect(t.snapshot().map((s) => s.upstream)).toEqual(['http://p7.test:3128', 'http://p8.test:3128', 'http://p9.test:3128']);
  });
});
