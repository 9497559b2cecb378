// Specifies destination rules (`scheme://host-pattern[:port]`) and authorize(): which canonical
// destinations a grant's authority set admits for CONNECT and absolute-form hops (docs/pipeline.md;
// principles A5, A6 in docs/principles.md).
import { describe, expect, it } from 'vitest';
import { authorize, compileAuthoritySet, type AuthoritySet } from '../../../src/authority/authority-set.js';
import { canonicalize } from '../../../src/authority/canonical-destination.js';
import { parseDestinationRule } from '../../../src/authority/destination-rule.js';
import type { CanonicalDestination, RequestKind } from '../../../src/core/types.js';
import { ok } from '../../../src/core/verdict.js';

function compile(rules: readonly string[], unrestricted = false): AuthoritySet {
  const compiled = compileAuthoritySet(rules, unrestricted);
  if (!compiled.ok) throw new Error(`rules did not compile: ${JSON.stringify(compiled.issues)}`);
  return compiled.value;
}

function dest(authority: string): CanonicalDestination {
  const verdict = canonicalize(authority);
  if (!verdict.ok) throw new Error(`${authority}: ${verdict.detail}`);
  return verdict.value;
}

/** The text of the matched rule, or the denial reason. */
function decide(set: AuthoritySet, kind: RequestKind, authority: string): string {
  const verdict = authorize(set, kind, dest(authority));
  return verdict.ok ? verdict.value.text : verdict.reason;
}

describe('parseDestinationRule', () => {
  it.each([
    ['https://api.github.com', { scheme: 'https', host: 'api.github.com', isWildcard: false, port: 443, text: 'https://api.github.com:443' }],
    ['HTTPS://API.GitHub.com/', { scheme: 'https', host: 'api.github.com', isWildcard: false, port: 443, text: 'https://api.github.com:443' }],
    ['http://api.internal.test:8080', { scheme: 'http', host: 'api.internal.test', isWildcard: false, port: 8080, text: 'http://api.internal.test:8080' }],
    ['ws://a.test', { scheme: 'ws', host: 'a.test', isWildcard: false, port: 80, text: 'ws://a.test:80' }],
    ['https://*.example.com', { scheme: 'https', host: 'example.com', isWildcard: true, port: 443, text: 'https://*.example.com:443' }],
    ['wss://*.a.test.:8443', { scheme: 'wss', host: 'a.test', isWildcard: true, port: 8443, text: 'wss://*.a.test:8443' }],
    ['tcp://db.test:5432', { scheme: 'tcp', host: 'db.test', isWildcard: false, port: 5432, text: 'tcp://db.test:5432' }],
    ['tcp://[::1]:5432', { scheme: 'tcp', host: '::1', isWildcard: false, port: 5432, text: 'tcp://[::1]:5432' }],
    ['https://[::ffff:127.0.0.1]', { scheme: 'https', host: '127.0.0.1', isWildcard: false, port: 443, text: 'https://127.0.0.1:443' }],
    ['https://bücher.example', { scheme: 'https', host: 'xn--bcher-kva.example', isWildcard: false, port: 443, text: 'https://xn--bcher-kva.example:443' }],
  ])('parses %j with the traffic canonicalizer', (raw, rule) => {
    expect(parseDestinationRule(raw)).toEqual(ok(rule));
  });

  it.each([
    ['tcp without a port', 'tcp://db.test'], // tcp has no default port
    ['two wildcards', 'https://*.*.a'],
    ['a partial-label wildcard', 'https://a*.b'],
    ['a wildcard not first', 'https://a.*.b'],
    ['a bare wildcard', 'https://*'],
    ['a wildcard over an IPv4 address', 'https://*.1.2.3.4'],
    ['a wildcard over an IPv4 number', 'https://*.0x7f'],
    ['a wildcard over an IPv6 address', 'https://*.[::1]'],
    ['a path', 'https://a.test/path'],
    ['a query', 'https://a.test?x=1'],
    ['a fragment', 'https://a.test#f'],
    ['userinfo', 'https://u@a.test'],
    ['an unknown scheme', 'ftp://a.test'],
    ['no scheme', 'a.test'],
    ['port 0', 'https://a.test:0'],
    ['an empty port', 'https://a.test:'],
    ['an empty host', 'https://'],
  ])('refuses %s: %j', (_what, raw) => {
    expect(parseDestinationRule(raw)).toEqual(expect.objectContaining({ ok: false, reason: 'destination_malformed' }));
  });

  it('reports every bad rule with its index at compile time', () => {
    const compiled = compileAuthoritySet(['https://ok.test', 'bad', 'https://*.*.x'], false);
    expect(compiled.ok).toBe(false);
    if (!compiled.ok) expect(compiled.issues.map((i) => i.index)).toEqual([1, 2]);
  });
});

describe('authorize: host patterns', () => {
  const set = compile(['https://*.a.test', 'https://exact.test', 'https://[::1]:8443', 'https://10.0.0.1']);

  it.each([
    ['x.a.test:443', 'https://*.a.test:443'],
    ['x.y.a.test:443', 'https://*.a.test:443'], // any depth of subdomain
    ['X.A.TEST.:443', 'https://*.a.test:443'], // traffic is canonicalized before matching
    ['exact.test:443', 'https://exact.test:443'],
    ['[0:0::1]:8443', 'https://[::1]:8443'],
    ['0xa000001:443', 'https://10.0.0.1:443'], // any IPv4 spelling reaches the one canonical rule
    ['[::ffff:10.0.0.1]:443', 'https://10.0.0.1:443'],
  ])('admits %s by %s', (authority, rule) => {
    expect(decide(set, 'connect', authority)).toBe(rule);
  });

  it.each([
    ['a.test:443', '*.a.test means subdomains only'],
    ['xa.test:443', 'matching stops at label boundaries'],
    ['a.test.evil.test:443', 'a suffix must end the name'],
    ['x.a.test.evil.test:443', 'a suffix must end the name'],
    ['sub.exact.test:443', 'an exact rule does not admit subdomains'],
    ['exact.test:8443', 'ports must match'],
    ['x.a.test:444', 'ports must match for wildcards too'],
    ['[::1]:443', 'ports must match for literals'],
    ['10.0.0.2:443', 'a literal admits only itself'],
  ])('refuses %s (%s)', (authority) => {
    expect(decide(set, 'connect', authority)).toBe('destination_not_granted');
  });
});

describe('authorize: request kinds (docs/pipeline.md: CONNECT by https/wss/tcp, absolute-form by http/ws)', () => {
  const set = compile(['https://s.test', 'wss://w.test', 'tcp://t.test:22', 'http://h.test', 'ws://p.test']);

  it.each([
    ['connect', 's.test:443', 'https://s.test:443'],
    ['connect', 'w.test:443', 'wss://w.test:443'],
    ['connect', 't.test:22', 'tcp://t.test:22'],
    ['forward', 'h.test:80', 'http://h.test:80'],
    ['forward', 'p.test:80', 'ws://p.test:80'],
    ['connect', 'h.test:80', 'destination_not_granted'], // an http rule does not open a raw tunnel
    ['connect', 'p.test:80', 'destination_not_granted'],
    ['forward', 's.test:443', 'destination_not_granted'], // https is never forwarded in absolute form
    ['forward', 't.test:22', 'destination_not_granted'],
  ] as const)('%s to %s → %s', (kind, authority, expected) => {
    expect(decide(set, kind, authority)).toBe(expected);
  });

  it('an https rule and an http rule for one host:port stay separate', () => {
    const both = compile(['https://a.test:8080', 'http://a.test:8080']);
    expect(decide(both, 'connect', 'a.test:8080')).toBe('https://a.test:8080');
    expect(decide(both, 'forward', 'a.test:8080')).toBe('http://a.test:8080');
  });
});

describe('authorize: unrestricted and empty sets', () => {
  it('unrestricted admits any destination of any kind (address classes still apply later)', () => {
    const set = compile([], true);
    for (const authority of ['a.test:1', '127.0.0.1:22', '[::1]:443']) {
      expect(decide(set, 'connect', authority)).toBe('unrestricted');
      expect(decide(set, 'forward', authority)).toBe('unrestricted');
    }
  });

  it('an empty set admits nothing', () => {
    expect(decide(compile([]), 'connect', 'a.test:443')).toBe('destination_not_granted');
  });
});

describe('authorize: scale', () => {
  it('compiles 10,000 rules and matches by lookup, not by scan', () => {
    const rules = Array.from({ length: 10_000 }, (_, i) => (i % 2 === 0 ? `https://h${i}.test` : `https://*.w${i}.test:8443`));
    const set = compile(rules);
    expect(set.rules).toHaveLength(10_000);
    expect(decide(set, 'connect', 'h9998.test:443')).toBe('https://h9998.test:443');
    expect(decide(set, 'connect', 'deep.x.w9999.test:8443')).toBe('https://*.w9999.test:8443');
    expect(decide(set, 'connect', 'h9999.test:443')).toBe('destination_not_granted');
    const started = performance.now();
    for (let i = 0; i < 10_000; i++) authorize(set, 'connect', dest(`x.w${(i % 5000) * 2 + 1}.test:8443`));
    expect(performance.now() - started).toBeLessThan(2000);
  });
});

describe('parseDestinationRule: near misses a grant file could contain', () => {
  // A rule whose scheme Sluice never proxies would never match: say so when the grant loads instead of
  // silently granting nothing. Mutant 507 skipped the scheme check; the port keeps this from failing later.
  it('refuses an unknown scheme even with an explicit port', () => {
    expect(parseDestinationRule('ftp://a.test:21')).toEqual(expect.objectContaining({ ok: false, reason: 'destination_malformed' }));
  });

  // The whole rule must be scheme://authority. Mutant 493 (RULE without ^) read the first as https://a.test,
  // mutant 494 (without $) read the second as https://a.test and dropped the rest.
  it.each([
    ['text before the scheme', '1https://a.test'],
    ['a second rule after a line break', 'https://a.test\nhttps://b.test'],
  ])('refuses %s: %j', (_what, raw) => {
    expect(parseDestinationRule(raw)).toEqual(expect.objectContaining({ ok: false, reason: 'destination_malformed' }));
  });
});
