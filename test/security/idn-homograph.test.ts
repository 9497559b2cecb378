// Threat: IDN homographs and compatibility spellings. A sandbox names a host with look-alike letters
// (Cyrillic "е" U+0435 for Latin "e": the homograph attack, CVE-2017-5060) or with full-width and other
// compatibility characters ("ｅｘａｍｐｌｅ.com", "example。com"), hoping that policy compares one string
// and the dialer resolves another. Sluice canonicalizes every host once with the WHATWG URL host parser,
// which applies UTS #46 §4 processing (mapping, NFC, Transitional_Processing=false, CheckBidi,
// CheckJoiners) and then RFC 3492 Punycode, so policy only ever sees the A-label (RFC 5890 §2.3.2.1).
// Consequences, each asserted below: a compatibility spelling that UTS #46 maps to an allowed name IS
// that name and is allowed; a look-alike in another script is a different A-label and is refused; bytes
// outside ASCII never reach policy raw (RFC 9112 §3.2: the request-target is ASCII). Sluice does not
// judge whether a granted name is confusable with another: that is the grant issuer's job (threat-model.md).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authorize, canonicalize, compileAuthoritySet, parseDestinationRule, type AuthoritySet } from '../../src/authority/index.js';
import type { LookupAll } from '../../src/core/index.js';
import { ProxyError } from '../../src/core/index.js';
import { createTestPki, type TestPki } from '../support/pki.js';
import { startHttpOrigin, startHttpsOrigin, type Origin } from '../support/origins.js';
import { curlHeadersAndBody, proxyFreeEnv, runCurl } from '../support/curl.js';
import { rawRequest } from '../support/raw-client.js';
import { startSluice, tokenHash, type TestSluice } from '../support/sluice.js';

const TOKEN = 'tok-idn';
const AUTH = `Basic ${Buffer.from(`idn:${TOKEN}`).toString('base64')}`;

function keyOf(authority: string): string {
  const verdict = canonicalize(authority, 443);
  return verdict.ok ? verdict.value.key : `refused: ${verdict.reason}`;
}

function ruleSet(rules: readonly string[]): AuthoritySet {
  const compiled = compileAuthoritySet(rules, false);
  if (!compiled.ok) throw new Error(JSON.stringify(compiled.issues));
  return compiled.value;
}

function decisionFor(set: AuthoritySet, authority: string): string {
  const dest = canonicalize(authority, 443);
  if (!dest.ok) return dest.reason;
  const verdict = authorize(set, 'connect', dest.value);
  return verdict.ok ? `granted by ${verdict.value.text}` : verdict.reason;
}

describe('canonicalization maps per UTS #46, then encodes Punycode, before policy', () => {
  it.each([
    ['bücher.example', 'xn--bcher-kva.example:443'], // UTS #46 valid; RFC 3492 A-label
    ['BÜCHER.Example.', 'xn--bcher-kva.example:443'], // case folded (UTS #46 mapping), trailing dot dropped
    ['xn--bcher-kva.example', 'xn--bcher-kva.example:443'], // an A-label is already canonical
    ['ｅｘａｍｐｌｅ.com', 'example.com:443'], // full-width Latin U+FF45… maps to ASCII (UTS #46 "mapped")
    ['ＥＸＡＭＰＬＥ．ＣＯＭ', 'example.com:443'], // full-width capitals and full stop U+FF0E
    ['example。com', 'example.com:443'], // ideographic full stop U+3002: UTS #46 maps it to "."
    ['exa\u00ADmple.com', 'example.com:443'], // soft hyphen U+00AD is "ignored" (deleted) by UTS #46
    ['еxample.com', 'xn--xample-2of.com:443'], // Cyrillic е U+0435: another name, another A-label
    ['аpple.com', 'xn--pple-43d.com:443'], // Cyrillic а U+0430
    ['faß.de', 'xn--fa-hia.de:443'], // nontransitional: ß stays ß, it is not folded to "ss"
  ])('%s canonicalizes to %s', (raw, key) => {
    expect(keyOf(raw)).toBe(key);
  });

  it.each([
    ['xn--a.example', 'invalid Punycode in an A-label'],
    ['ex\u200Dample.com', 'ZERO WIDTH JOINER outside its CONTEXTJ rule (RFC 5892 Appendix A.2)'],
    ['%65xample.com', 'percent-encoding, which the URL parser would silently decode'],
    ['example.com：443', 'full-width colon U+FF1A, which would map to ":" inside the host'],
    ['ex ample.com', 'a space'],
    ['a..example', 'an empty label'],
  ])('refuses %s (%s) as destination_malformed', (raw) => {
    expect(keyOf(raw)).toBe('refused: destination_malformed');
  });

  it('compiles destination rules with the same canonicalizer as traffic', () => {
    const unicodeRule = parseDestinationRule('https://bücher.example');
    expect(unicodeRule.ok && unicodeRule.value.text).toBe('https://xn--bcher-kva.example:443');
    const fullWidthRule = parseDestinationRule('https://ｅｘａｍｐｌｅ.com');
    expect(fullWidthRule.ok && fullWidthRule.value.text).toBe('https://example.com:443');
    const cyrillicRule = parseDestinationRule('https://еxample.com');
    expect(cyrillicRule.ok && cyrillicRule.value.text).toBe('https://xn--xample-2of.com:443');
  });
});

describe('policy compares A-labels only', () => {
  const set = ruleSet(['https://xn--bcher-kva.example', 'https://example.com', 'https://*.xn--bcher-kva.example', 'https://fass.de']);

  it.each([
    ['bücher.example:443', 'granted by https://xn--bcher-kva.example:443'],
    ['BÜCHER.EXAMPLE:443', 'granted by https://xn--bcher-kva.example:443'],
    ['ｅｘａｍｐｌｅ.com:443', 'granted by https://example.com:443'],
    ['example。com:443', 'granted by https://example.com:443'],
    ['www.bücher.example:443', 'granted by https://*.xn--bcher-kva.example:443'],
  ])('%s is the granted name: %s', (authority, expected) => {
    expect(decisionFor(set, authority)).toBe(expected);
  });

  it.each([
    'еxample.com:443', // Cyrillic е
    'exаmple.com:443', // Cyrillic а
    'examp1e.com:443', // digit one for l: plain ASCII, simply another name
    'bucher.example:443', // diacritic dropped: another name
    'www.bucher.example:443',
    'faß.de:443', // nontransitional ß is not fass.de
    'ｅｘａｍｐｌｅ.com:8443', // the right name on another port
  ])('%s is not granted', (authority) => {
    expect(decisionFor(set, authority)).toBe('destination_not_granted');
  });

  it('a rule spelled with a look-alike does not grant the real name, and the reverse', () => {
    expect(decisionFor(ruleSet(['https://еxample.com']), 'example.com:443')).toBe('destination_not_granted');
    expect(decisionFor(ruleSet(['https://еxample.com']), 'еxample.com:443')).toBe('granted by https://xn--xample-2of.com:443');
  });
});

describe('end to end through Sluice', () => {
  let pki: TestPki;
  let tlsOrigin: Origin;
  let httpOrigin: Origin;
  let sluice: TestSluice;
  const looked: string[] = [];

  beforeAll(async () => {
    pki = createTestPki(['xn--bcher-kva.example', 'example.com']);
    tlsOrigin = await startHttpsOrigin(pki);
    httpOrigin = await startHttpOrigin();
    const lookup: LookupAll = async (host) => {
      looked.push(host);
      if (host === 'xn--bcher-kva.example' || host === 'example.com' || host === 'xn--xample-2of.com') return [{ address: '127.0.0.1', family: 4, ttlSeconds: 0 }];
      throw new ProxyError('ERR_DNS_NO_ADDRESS', 'name has no address');
    };
    sluice = await startSluice(
      {
        grants: [
          {
            id: 'idn',
            tokenSha256: tokenHash(TOKEN),
            destinations: [`https://xn--bcher-kva.example:${tlsOrigin.port}`, `https://example.com:${tlsOrigin.port}`, `http://xn--bcher-kva.example:${httpOrigin.port}`],
            allowAddressClasses: ['loopback'],
          },
        ],
      },
      { lookup },
    );
  });
  afterAll(async () => {
    await sluice?.close();
    await tlsOrigin?.close();
    await httpOrigin?.close();
  });

  // curl converts IDNs with libidn2 (UTS #46 nontransitional) before anything goes on the wire; it needs a UTF-8 locale.
  const curl = (url: string): ReturnType<typeof runCurl> =>
    runCurl(['-i', '--proxy', `http://idn:${TOKEN}@127.0.0.1:${sluice.port}`, '--cacert', pki.caFile, url], { env: { ...proxyFreeEnv(), LC_ALL: 'C.UTF-8' } });

  it('reaches bücher.example through a grant for https://xn--bcher-kva.example (curl sends the A-label)', async () => {
    const result = await curl(`https://bücher.example:${tlsOrigin.port}/idn`);
    const response = curlHeadersAndBody(result.stdout);
    expect(response.status).toBe(200);
    expect(response.body).toBe('origin:GET:/idn');
    expect(sluice.decisions().at(-1)).toMatchObject({ reason: 'granted', canonical: `xn--bcher-kva.example:${tlsOrigin.port}`, rule: `https://xn--bcher-kva.example:${tlsOrigin.port}` });
  });

  it('reaches ｅｘａｍｐｌｅ.com through the grant for example.com: UTS #46 maps it to that very name', async () => {
    const result = await curl(`https://ｅｘａｍｐｌｅ.com:${tlsOrigin.port}/fw`);
    expect(curlHeadersAndBody(result.stdout).body).toBe('origin:GET:/fw');
    expect(sluice.decisions().at(-1)).toMatchObject({ reason: 'granted', canonical: `example.com:${tlsOrigin.port}` });
  });

  it('refuses the Cyrillic еxample.com with 403 destination_not_granted before resolving or dialing it', async () => {
    const connections = tlsOrigin.connections;
    looked.length = 0;
    const result = await curl(`https://еxample.com:${tlsOrigin.port}/homograph`);
    const response = curlHeadersAndBody(result.stdout);
    expect(response.blocks[0]?.status).toBe(403);
    expect(response.blocks[0]?.headers['proxy-status']).toBe('sluice; error=http_request_denied; details="destination_not_granted"');
    expect(sluice.decisions().at(-1)).toMatchObject({ reason: 'destination_not_granted', canonical: `xn--xample-2of.com:${tlsOrigin.port}` });
    expect(looked).toEqual([]);
    expect(tlsOrigin.connections).toBe(connections);
  });

  it.each([
    ['CONNECT bücher.example (raw UTF-8)', (p: number) => `CONNECT bücher.example:${p} HTTP/1.1\r\nHost: bücher.example:${p}\r\nProxy-Authorization: ${AUTH}\r\n\r\n`],
    ['CONNECT ｅｘａｍｐｌｅ.com (raw UTF-8)', (p: number) => `CONNECT ｅｘａｍｐｌｅ.com:${p} HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${AUTH}\r\n\r\n`],
    ['GET http://bücher.example/ (raw UTF-8)', (p: number) => `GET http://bücher.example:${p}/ HTTP/1.1\r\nHost: bücher.example:${p}\r\nProxy-Authorization: ${AUTH}\r\n\r\n`],
  ])('answers %s with 400 request_malformed: non-ASCII targets are never reinterpreted', async (_name, request) => {
    const before = tlsOrigin.connections + httpOrigin.connections;
    looked.length = 0;
    const res = await rawRequest(sluice.port, Buffer.from(request(tlsOrigin.port), 'utf8'), { untilClose: true });
    expect(res.text).toMatch(/^HTTP\/1\.1 400 /);
    expect(res.text).toContain('Proxy-Status: sluice; error=http_request_error; details="request_malformed"');
    expect(res.closed).toBe(true);
    expect(looked).toEqual([]);
    expect(tlsOrigin.connections + httpOrigin.connections).toBe(before);
  });

  it('refuses a raw UTF-8 Host header next to the A-label URI (it is not the same name) with 400 host_mismatch', async () => {
    const before = httpOrigin.connections;
    const port = httpOrigin.port;
    const request = `GET http://xn--bcher-kva.example:${port}/ HTTP/1.1\r\nHost: bücher.example:${port}\r\nProxy-Authorization: ${AUTH}\r\nConnection: close\r\n\r\n`;
    const res = await rawRequest(sluice.port, Buffer.from(request, 'utf8'), { untilClose: true });
    expect(res.text).toMatch(/^HTTP\/1\.1 400 /);
    expect(res.text).toContain('details="host_mismatch"');
    expect(httpOrigin.connections).toBe(before);
  });

  it('forwards the A-label URI with an A-label Host, and the origin sees only the A-label', async () => {
    const port = httpOrigin.port;
    const res = await rawRequest(sluice.port, `GET http://XN--BCHER-KVA.example.:${port}/a HTTP/1.1\r\nHost: xn--bcher-kva.example:${port}\r\nProxy-Authorization: ${AUTH}\r\nConnection: close\r\n\r\n`, { untilClose: true });
    expect(res.text).toMatch(/^HTTP\/1\.1 200 /);
    expect(httpOrigin.requests.at(-1)?.headers.host).toBe(`xn--bcher-kva.example:${port}`);
  });
});
