// route.pac.credentialProxies and the PAC URL's scheme (review 2026-12-04 finding 10, issue 24): with
// credentials on route.pac, the config must name the proxies a PAC answer may send them to, and the PAC
// may not come over http://, where anyone on the path can rewrite which proxies it names. Both are
// key-path issues, so `sluice check-config`, `sluice start` and a reload all refuse the config (exit 2).
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { canonicalProxyHostPort, parseConfigText, type ConfigIssue } from '../../../src/config/index.js';

const base = { listeners: [{ name: 'shared', listen: '127.0.0.1:0', identify: 'token' }], grants: [{ id: 'a', destinations: ['https://a.test'] }] };

function parse(pac: Record<string, unknown>): { issues: readonly ConfigIssue[]; pac: unknown } {
  const parsed = parseConfigText(stringify({ ...base, route: { mode: 'pac', pac } }), '/cfg/sluice.yaml', '/cfg');
  return parsed.ok ? { issues: [], pac: parsed.config.route.pac } : { issues: parsed.issues, pac: undefined };
}
const paths = (pac: Record<string, unknown>): string[] => parse(pac).issues.map((i) => i.path);

describe('route.pac.credentialProxies is required with credentials', () => {
  it.each([
    ['credentialsFile (Basic)', { credentialsFile: './creds.txt' }],
    ['auth ntlm', { auth: 'ntlm', credentialsFile: './creds.txt' }],
    ['auth negotiate (the service’s own Kerberos credentials)', { auth: 'negotiate' }],
    ['auth auto (may choose Negotiate without a file)', { auth: 'auto' }],
  ])('%s without the list is an error at route.pac.credentialProxies', (_name, settings) => {
    const { issues } = parse({ file: './corp.pac', ...settings });
    expect(issues).toEqual([
      { path: 'route.pac.credentialProxies', message: 'required when route.pac.credentialsFile or route.pac.auth is set: the proxies your PAC may send credentials to' },
    ]);
  });

  it('is accepted with the list, and optional without credentials', () => {
    expect(paths({ file: './corp.pac', credentialsFile: './creds.txt', credentialProxies: ['proxy.corp.example:8080'] })).toEqual([]);
    expect(paths({ file: './corp.pac', auth: 'negotiate', credentialProxies: ['proxy.corp.example:8080'] })).toEqual([]);
    expect(paths({ file: './corp.pac' })).toEqual([]);
  });

  it('an empty list is an error (credentials that could go nowhere are a mistake, not a setting)', () => {
    expect(paths({ file: './corp.pac', credentialsFile: './creds.txt', credentialProxies: [] })).toEqual(['route.pac.credentialProxies']);
  });

  it('is reported next to other errors of the file, not instead of them', () => {
    const parsed = parseConfigText(
      stringify({ ...base, listeners: [{ name: 'bad name!', listen: '127.0.0.1:0' }], route: { mode: 'pac', pac: { file: './corp.pac', credentialsFile: './c' } } }),
      '/cfg/sluice.yaml',
      '/cfg',
    );
    expect(parsed.ok ? [] : parsed.issues.map((i) => i.path)).toEqual(expect.arrayContaining(['listeners[0].name', 'route.pac.credentialProxies']));
  });
});

describe('entries are canonicalized as the proxy of a PAC answer is', () => {
  it.each([
    ['Proxy.CORP.example:8080', 'proxy.corp.example:8080'],
    ['127.0.0.1:3128', '127.0.0.1:3128'],
    ['127.1:3128', '127.0.0.1:3128'],
    ['0x7f.0.0.1:3128', '127.0.0.1:3128'],
    ['[::1]:3128', '[::1]:3128'],
    ['[0:0:0:0:0:0:0:1]:3128', '[::1]:3128'],
    ['[FE80::A]:80', '[fe80::a]:80'],
    ['bücher.example:8080', 'xn--bcher-kva.example:8080'],
    [' proxy.corp.example:8080 ', 'proxy.corp.example:8080'],
  ])('%s → %s', (entry, canonical) => {
    expect(parse({ file: './corp.pac', credentialsFile: './c', credentialProxies: [entry] }).pac).toMatchObject({ credentialProxies: [canonical] });
  });

  it.each([
    ['proxy.corp.example'],
    ['proxy.corp.example:0'],
    ['proxy.corp.example:65536'],
    ['http://proxy.corp.example:8080'],
    ['user@proxy.corp.example:8080'],
    ['proxy.corp.example:8080/path'],
    ['::1:3128'],
    ['[fe80::1%eth0]:3128'],
    ['proxy.corp.example.:8080'],
    [':8080'],
    [''],
  ])('refuses %j at route.pac.credentialProxies[0]', (entry) => {
    const { issues } = parse({ file: './corp.pac', credentialsFile: './c', credentialProxies: [entry] });
    expect(issues).toEqual([{ path: 'route.pac.credentialProxies[0]', message: expect.stringContaining('expected host:port or [IPv6]:port') }]);
  });

  it('canonicalProxyHostPort is null for what it refuses', () => {
    expect(canonicalProxyHostPort('proxy:8080')).toBe('proxy:8080');
    expect(canonicalProxyHostPort('proxy')).toBeNull();
  });
});

describe('an http:// PAC URL with credentials', () => {
  const message = 'an http:// PAC URL can be altered on the path, and the proxies it names would receive the credentials: use https:// or a file';

  it.each([
    ['credentialsFile', { credentialsFile: './creds.txt' }],
    ['auth ntlm', { auth: 'ntlm', credentialsFile: './creds.txt' }],
    ['auth negotiate', { auth: 'negotiate' }],
  ])('is an error at route.pac.url (%s), even with the list', (_name, settings) => {
    const { issues } = parse({ url: 'http://wpad.corp.example/proxy.pac', credentialProxies: ['proxy.corp.example:8080'], ...settings });
    expect(issues).toEqual([{ path: 'route.pac.url', message }]);
  });

  it('is an error whatever the scheme’s case', () => {
    expect(paths({ url: 'HTTP://wpad.corp.example/proxy.pac', credentialsFile: './c', credentialProxies: ['p:1'] })).toEqual(['route.pac.url']);
  });

  it('names both keys when the list is missing too', () => {
    expect(paths({ url: 'http://wpad.corp.example/proxy.pac', credentialsFile: './c' }).sort()).toEqual(['route.pac.credentialProxies', 'route.pac.url']);
  });

  it('is accepted without credentials, and https:// is accepted with them', () => {
    expect(paths({ url: 'http://wpad.corp.example/proxy.pac' })).toEqual([]);
    expect(paths({ url: 'https://wpad.corp.example/proxy.pac', credentialsFile: './c', credentialProxies: ['p:1'] })).toEqual([]);
  });
});
