// Specifies the resolver: static hosts first, then the injected LookupAll port, answers cached within their
// TTL (RFC 1035 §3.2.1, RFC 2181 §8) capped by cacheMaxTtlMs, concurrent lookups of one name shared, and
// every lookup bounded by timeoutMs. A stub port and a fake clock stand in for DNS and time.
import { describe, expect, it } from 'vitest';
import { ProxyError } from '../../../src/core/errors.js';
import type { LookupAll, LookupAnswer } from '../../../src/core/ports.js';
import { Resolver, type ResolverOptions } from '../../../src/resolve/resolver.js';
import { withTimeout } from '../../support/wait.js';

const a = (address: string, ttlSeconds = 60): LookupAnswer => ({ address, family: address.includes(':') ? 6 : 4, ttlSeconds });

interface Harness {
  readonly resolver: Resolver;
  readonly calls: string[];
  advance(ms: number): void;
}

function harness(answer: (host: string, signal: AbortSignal) => Promise<readonly LookupAnswer[]>, options: Partial<ResolverOptions> = {}): Harness {
  let nowMs = 1_000;
  const calls: string[] = [];
  const lookup: LookupAll = (host, signal) => {
    calls.push(host);
    return answer(host, signal);
  };
  const resolver = new Resolver(lookup, { timeoutMs: 2000, cacheMaxEntries: 100, cacheMaxTtlMs: 300_000, hosts: new Map(), ...options }, () => nowMs);
  return { resolver, calls, advance: (ms) => void (nowMs += ms) };
}

const answers = (list: readonly LookupAnswer[]) => (): Promise<readonly LookupAnswer[]> => Promise.resolve(list);

/** Never answers on its own; rejects only when the resolver's signal aborts, as the LookupAll contract requires. */
const silent = (_host: string, signal: AbortSignal): Promise<readonly LookupAnswer[]> =>
  new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true }));

describe('Resolver: sources', () => {
  it('answers from static dns.hosts without calling the lookup port', async () => {
    const h = harness(answers([a('93.184.216.34')]), { hosts: new Map([['api.internal.test', [a('127.0.0.2', 0)]]]) });
    expect(await h.resolver.resolve('api.internal.test')).toEqual({ ok: true, value: { answers: [a('127.0.0.2', 0)], source: 'hosts', ttlMs: Infinity } });
    expect(h.calls).toEqual([]);
  });

  it('asks the lookup port for every other name and keeps answer order', async () => {
    const h = harness(answers([a('2606:4700::1111'), a('93.184.216.34')]));
    expect(await h.resolver.resolve('a.test')).toEqual({ ok: true, value: { answers: [a('2606:4700::1111'), a('93.184.216.34')], source: 'dns', ttlMs: 60000 } });
    expect(h.calls).toEqual(['a.test']);
  });
});

describe('Resolver: cache', () => {
  it('serves a cached answer within its TTL and asks again once it has expired', async () => {
    const h = harness(answers([a('93.184.216.34', 30)]));
    await h.resolver.resolve('a.test');
    h.advance(29_999);
    expect(await h.resolver.resolve('a.test')).toEqual(expect.objectContaining({ value: expect.objectContaining({ source: 'cache' }) }));
    h.advance(1);
    expect(await h.resolver.resolve('a.test')).toEqual(expect.objectContaining({ value: expect.objectContaining({ source: 'dns' }) }));
    expect(h.calls).toEqual(['a.test', 'a.test']);
  });

  it('uses the smallest TTL of the answer set', async () => {
    const h = harness(answers([a('93.184.216.34', 60), a('93.184.216.35', 5)]));
    await h.resolver.resolve('a.test');
    h.advance(5_000);
    await h.resolver.resolve('a.test');
    expect(h.calls).toHaveLength(2);
  });

  it('does not cache a TTL of 0 (RFC 1035 §3.2.1: use only for the transaction in progress)', async () => {
    const h = harness(answers([a('93.184.216.34', 0)]));
    await h.resolver.resolve('a.test');
    await h.resolver.resolve('a.test');
    expect(h.calls).toHaveLength(2);
  });

  it('caps a long TTL at cacheMaxTtlMs', async () => {
    const h = harness(answers([a('93.184.216.34', 86_400)]), { cacheMaxTtlMs: 10_000 });
    await h.resolver.resolve('a.test');
    h.advance(9_999);
    await h.resolver.resolve('a.test');
    expect(h.calls).toHaveLength(1);
    h.advance(1);
    await h.resolver.resolve('a.test');
    expect(h.calls).toHaveLength(2);
  });

  it('caches nothing when cacheMaxEntries is 0', async () => {
    const h = harness(answers([a('93.184.216.34')]), { cacheMaxEntries: 0 });
    await h.resolver.resolve('a.test');
    await h.resolver.resolve('a.test');
    expect(h.calls).toHaveLength(2);
  });

  it('does not cache failures', async () => {
    let fail = true;
    const h = harness(() => (fail ? Promise.reject(new ProxyError('ERR_DNS_FAILED', 'servfail')) : Promise.resolve([a('93.184.216.34')])));
    expect(await h.resolver.resolve('a.test')).toEqual(expect.objectContaining({ ok: false, reason: 'dns_failed' }));
    fail = false;
    expect(await h.resolver.resolve('a.test')).toEqual(expect.objectContaining({ ok: true }));
    expect(h.calls).toHaveLength(2);
  });

  it('keeps names apart', async () => {
    const h = harness((host) => Promise.resolve([a(host === 'a.test' ? '93.184.216.34' : '93.184.216.35')]));
    const [first, second] = await Promise.all([h.resolver.resolve('a.test'), h.resolver.resolve('b.test')]);
    expect(first).toEqual(expect.objectContaining({ value: expect.objectContaining({ answers: [a('93.184.216.34')] }) }));
    expect(second).toEqual(expect.objectContaining({ value: expect.objectContaining({ answers: [a('93.184.216.35')] }) }));
  });
});

describe('Resolver: concurrency', () => {
  it('shares one lookup between concurrent resolutions of one name', async () => {
    let release: (list: readonly LookupAnswer[]) => void = () => undefined;
    const h = harness(() => new Promise((resolve) => (release = resolve)));
    const pending = Array.from({ length: 5 }, () => h.resolver.resolve('a.test'));
    release([a('93.184.216.34')]);
    const results = await Promise.all(pending);
    expect(h.calls).toEqual(['a.test']);
    for (const result of results) expect(result).toEqual(results[0]);
  });
});

/** A lookup port whose answers the test releases name by name. */
function held(): { answer: (host: string) => Promise<readonly LookupAnswer[]>; release(host: string): void } {
  const waiting = new Map<string, (list: readonly LookupAnswer[]) => void>();
  return {
    answer: (host) => new Promise((resolve) => waiting.set(host, resolve)),
    release: (host) => waiting.get(host)?.([a('93.184.216.34', 0)]),
  };
}

describe('Resolver: each principal’s share of the lookups in flight (review 2026-12 finding 7)', () => {
  it('refuses a principal its own lookup_limit_reached past its share, while another principal still starts lookups', async () => {
    const port = held();
    const h = harness(port.answer, { maxConcurrentLookups: 8, maxConcurrentLookupsPerGrant: 3 });
    const flood = ['s1', 's2', 's3'].map((n) => h.resolver.resolve(`${n}.slow.test`, 'attacker'));
    expect(await h.resolver.resolve('s4.slow.test', 'attacker')).toEqual({ ok: false, reason: 'lookup_limit_reached', detail: '3 lookups of this grant in flight' });
    expect(h.resolver.lookupsInFlight('attacker')).toBe(3);
    const victim = h.resolver.resolve('b.test', 'victim');
    expect(h.calls).toEqual(['s1.slow.test', 's2.slow.test', 's3.slow.test', 'b.test']);
    port.release('b.test');
    expect(await victim).toEqual(expect.objectContaining({ ok: true }));
    expect(h.resolver.lookupsInFlight('victim')).toBe(0);
    for (const n of ['s1', 's2', 's3']) port.release(`${n}.slow.test`);
    await Promise.all(flood);
  });

  it('gives the share back when a lookup settles, whether it answered, failed or timed out', async () => {
    const h = harness((host, signal) => (host === 'hang.test' ? silent(host, signal) : host === 'fail.test' ? Promise.reject(new Error('x')) : answers([a('93.184.216.34', 0)])()), {
      timeoutMs: 30,
      maxConcurrentLookupsPerGrant: 1,
    });
    expect(await h.resolver.resolve('hang.test', 'p')).toEqual(expect.objectContaining({ reason: 'dns_timeout' }));
    expect(await h.resolver.resolve('fail.test', 'p')).toEqual(expect.objectContaining({ reason: 'dns_failed' }));
    expect(await h.resolver.resolve('ok.test', 'p')).toEqual(expect.objectContaining({ ok: true }));
    expect(h.resolver.lookupsInFlight('p')).toBe(0);
  });

  it('charges a lookup to the principal that started it: joining one in flight costs nothing and is never refused', async () => {
    const port = held();
    const h = harness(port.answer, { maxConcurrentLookups: 2, maxConcurrentLookupsPerGrant: 1 });
    const first = h.resolver.resolve('shared.test', 'a');
    const joinedByB = h.resolver.resolve('shared.test', 'b');
    const joinedByA = h.resolver.resolve('shared.test', 'a'); // a is at its share, but this adds no lookup
    expect(h.resolver.lookupsInFlight('a')).toBe(1);
    expect(h.resolver.lookupsInFlight('b')).toBe(0);
    const own = h.resolver.resolve('own.test', 'b');
    expect(h.calls).toEqual(['shared.test', 'own.test']);
    // The process cap (2) is reached: a third name is dns_busy for anyone still under its share…
    expect(await h.resolver.resolve('third.test', 'c')).toEqual(expect.objectContaining({ reason: 'dns_busy' }));
    // …and a principal at its share hears about its own limit first.
    expect(await h.resolver.resolve('third.test', 'a')).toEqual(expect.objectContaining({ reason: 'lookup_limit_reached' }));
    port.release('shared.test');
    port.release('own.test');
    const results = await Promise.all([first, joinedByB, joinedByA, own]);
    expect(results.every((r) => r.ok)).toBe(true);
    expect([h.resolver.lookupsInFlight('a'), h.resolver.lookupsInFlight('b')]).toEqual([0, 0]);
  });

  it('needs no share for answers from dns.hosts or the cache, and none without a principal', async () => {
    const h = harness(answers([a('93.184.216.34', 60)]), { hosts: new Map([['fixed.test', [a('127.0.0.2', 0)]]]), maxConcurrentLookupsPerGrant: 1 });
    await h.resolver.resolve('cached.test', 'p');
    const again = await Promise.all([h.resolver.resolve('cached.test', 'p'), h.resolver.resolve('fixed.test', 'p'), h.resolver.resolve('cached.test', 'p')]);
    expect(again.map((r) => r.ok && r.value.source)).toEqual(['cache', 'hosts', 'cache']);
    expect(h.calls).toEqual(['cached.test']);
  });

  it('keeps the latest answers for PAC builtins, evicting the oldest one by one rather than all at once', async () => {
    const h = harness((host) => Promise.resolve([a(host === 'victim.test' ? '10.1.2.3' : '93.184.216.34', 0)]));
    await h.resolver.resolve('victim.test', 'victim');
    for (let i = 0; i < 1000; i += 1) await h.resolver.resolve(`churn${i}.test`, 'attacker');
    expect(h.resolver.peek('victim.test')).toEqual([a('10.1.2.3', 0)]);
    for (let i = 1000; i < 1100; i += 1) await h.resolver.resolve(`churn${i}.test`, 'attacker');
    expect(h.resolver.peek('victim.test')).toBeNull();
    expect(h.resolver.peek('churn1099.test')).toEqual([a('93.184.216.34', 0)]);
  });
});

describe('Resolver: failures are verdicts, never throws', () => {
  it('a lookup that never answers yields dns_timeout within timeoutMs', async () => {
    const h = harness(silent, { timeoutMs: 50 });
    const started = performance.now();
    const result = await withTimeout(h.resolver.resolve('slow.test'), 2_000, 'resolve of a silent name');
    expect(result).toEqual({ ok: false, reason: 'dns_timeout', detail: 'no answer within 50 ms' });
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it.each([
    ['ERR_DNS_TIMEOUT', 'dns_timeout'],
    ['ERR_DNS_NO_ADDRESS', 'dns_no_address'],
    ['ERR_DNS_FAILED', 'dns_failed'],
  ] as const)('ProxyError %s → %s', async (code, reason) => {
    const h = harness(() => Promise.reject(new ProxyError(code, 'stub')));
    expect(await h.resolver.resolve('a.test')).toEqual(expect.objectContaining({ ok: false, reason }));
  });

  it('an empty answer list is dns_no_address', async () => {
    const h = harness(answers([]));
    expect(await h.resolver.resolve('a.test')).toEqual(expect.objectContaining({ ok: false, reason: 'dns_no_address' }));
  });

  it('an unexpected error is dns_failed with its message', async () => {
    const h = harness(() => Promise.reject(new TypeError('boom')));
    expect(await h.resolver.resolve('a.test')).toEqual({ ok: false, reason: 'dns_failed', detail: 'boom' });
  });
});
