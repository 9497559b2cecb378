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
    expect(await h.resolver.resolve('api.internal.test')).toEqual({ ok: true, value: { answers: [a('127.0.0.2', 0)], source: 'hosts' } });
    expect(h.calls).toEqual([]);
  });

  it('asks the lookup port for every other name and keeps answer order', async () => {
    const h = harness(answers([a('2606:4700::1111'), a('93.184.216.34')]));
    expect(await h.resolver.resolve('a.test')).toEqual({ ok: true, value: { answers: [a('2606:4700::1111'), a('93.184.216.34')], source: 'dns' } });
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
