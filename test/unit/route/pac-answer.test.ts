// The PAC answer grammar (Netscape PAC return value, as Chromium's ProxyList reads it): what parses to
// which entries, and what is refused with pac_failed rather than guessed at.
import { describe, expect, it } from 'vitest';
import { MAX_PAC_ANSWER_CHARS, MAX_PAC_ENTRIES, parsePacAnswer, type PacEntry } from '../../../src/route/pac-answer.js';

const direct: PacEntry = { kind: 'direct' };
const proxy = (host: string, port: number, text: string, tls = false): PacEntry => ({ kind: 'proxy', tls, host, port, text });

describe('parsePacAnswer: accepted answers', () => {
  it.each<[string, readonly PacEntry[]]>([
    ['DIRECT', [direct]],
    ['direct', [direct]],
    ['  DIRECT  ', [direct]],
    ['PROXY proxy.corp:3128', [proxy('proxy.corp', 3128, 'PROXY proxy.corp:3128')]],
    ['proxy Proxy.CORP:3128', [proxy('proxy.corp', 3128, 'PROXY proxy.corp:3128')]],
    ['PROXY proxy.corp', [proxy('proxy.corp', 80, 'PROXY proxy.corp:80')]],
    ['HTTP proxy.corp:8080', [proxy('proxy.corp', 8080, 'HTTP proxy.corp:8080')]],
    ['HTTPS secure.corp', [proxy('secure.corp', 443, 'HTTPS secure.corp:443', true)]],
    ['https secure.corp:8443', [proxy('secure.corp', 8443, 'HTTPS secure.corp:8443', true)]],
    ['PROXY 10.0.0.1:3128', [proxy('10.0.0.1', 3128, 'PROXY 10.0.0.1:3128')]],
    ['PROXY [2001:db8::1]:3128', [proxy('2001:db8::1', 3128, 'PROXY [2001:db8::1]:3128')]],
    ['PROXY [2001:DB8::1]', [proxy('2001:db8::1', 80, 'PROXY [2001:db8::1]:80')]],
    ['PROXY p_1-a.corp:65535', [proxy('p_1-a.corp', 65535, 'PROXY p_1-a.corp:65535')]],
    ['PROXY\ta:3128', [proxy('a', 3128, 'PROXY a:3128')]],
    ['PROXY a:3128; PROXY b:3128; DIRECT', [proxy('a', 3128, 'PROXY a:3128'), proxy('b', 3128, 'PROXY b:3128'), direct]],
    ['PROXY a:3128;DIRECT;', [proxy('a', 3128, 'PROXY a:3128'), direct]],
    [' ; PROXY a:1 ;; DIRECT ', [proxy('a', 1, 'PROXY a:1'), direct]],
    ['SOCKS s:1080; DIRECT', [{ kind: 'unsupported', text: 'SOCKS s:1080' }, direct]],
    ['SOCKS5 s', [{ kind: 'unsupported', text: 'SOCKS5 s:1080' }]],
    ['socks4 S:9', [{ kind: 'unsupported', text: 'SOCKS4 s:9' }]],
    ['QUIC q.corp:443; HTTPS h:443', [{ kind: 'unsupported', text: 'QUIC q.corp:443' }, proxy('h', 443, 'HTTPS h:443', true)]],
  ])('%j', (answer, entries) => {
    expect(parsePacAnswer(answer)).toEqual({ ok: true, value: entries });
  });

  it(`accepts ${MAX_PAC_ENTRIES} entries`, () => {
    const answer = parsePacAnswer(Array(MAX_PAC_ENTRIES).fill('DIRECT').join('; '));
    expect(answer.ok && answer.value.length).toBe(MAX_PAC_ENTRIES);
  });
});

describe('parsePacAnswer: refused with pac_failed', () => {
  it.each<[string, unknown]>([
    ['a number', 42],
    ['null', null],
    ['undefined', undefined],
    ['an object', { toString: () => 'DIRECT' }],
    ['an array', ['DIRECT']],
    ['an empty string', ''],
    ['only whitespace', '   '],
    ['only separators', ' ; ; '],
    ['an unknown keyword', 'DIRECTLY'],
    ['FTP', 'FTP a:1'],
    ['DIRECT with an argument', 'DIRECT x'],
    ['PROXY without a host', 'PROXY'],
    ['SOCKS without a host', 'SOCKS'],
    ['two hosts', 'PROXY a b'],
    ['a non-numeric port', 'PROXY a:b'],
    ['port 0', 'PROXY a:0'],
    ['port 65536', 'PROXY a:65536'],
    ['a six-digit port', 'PROXY a:123456'],
    ['a negative port', 'PROXY a:-1'],
    ['an empty port', 'PROXY a:'],
    ['full-width digits', 'PROXY a:３１２８'],
    ['a path', 'PROXY a/b:1'],
    ['userinfo', 'PROXY user@a:1'],
    ['a URL', 'PROXY http://a:1'],
    ['unbracketed IPv6', 'PROXY 2001:db8::1'],
    ['an unclosed bracket', 'PROXY [2001:db8::1'],
    ['a bracketed name', 'PROXY [proxy.corp]:1'],
    ['an IPv6 zone', 'PROXY [fe80::1%eth0]:1'],
    ['an empty label', 'PROXY a..b:1'],
    ['a leading dot', 'PROXY .a:1'],
    ['two ports', 'PROXY a:1:2'],
    ['a non-ASCII host', 'PROXY é.corp:1'],
    ['a 254-character host', `PROXY ${'a.'.repeat(127)}a:1`],
    ['a bad SOCKS host', 'SOCKS a/b:1'],
    ['garbage after good entries', 'PROXY a:1; DIRECT; garbage'],
    ['too many entries', Array(MAX_PAC_ENTRIES + 1).fill('DIRECT').join(';')],
    ['an overlong answer', `PROXY ${'a'.repeat(MAX_PAC_ANSWER_CHARS)}:1`],
  ])('%s', (_name, answer) => {
    const parsed = parsePacAnswer(answer);
    expect(parsed).toMatchObject({ ok: false, reason: 'pac_failed' });
    expect(parsed.ok ? '' : parsed.detail).not.toBe('');
  });
});
