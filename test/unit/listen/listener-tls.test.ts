// The client certificate as Sluice maps it to a grant (issue 28): its SHA-256 and its URI SANs, read from
// Node's subjectAltName string. The attack is CVE-2021-44532: a SAN value holding ", URI:…" that a naive
// split on ", " reads as a second entry, so a certificate for one identity smuggles in another. Node
// quotes such a value as a JSON string; uriSans must split outside quotes only, and never take a DNS,
// IP or other entry for a URI.
import { createHash, generateKeyPairSync, X509Certificate } from 'node:crypto';
import type tls from 'node:tls';
import forge from 'node-forge';
import { describe, expect, it } from 'vitest';
import { presentedCertificate, uriSans } from '../../../src/listen/index.js';

describe('uriSans', () => {
  it.each([
    ['no subjectAltName', undefined, []],
    ['an empty one', '', []],
    ['one URI', 'URI:spiffe://sluice.test/agent', ['spiffe://sluice.test/agent']],
    ['DNS and IP entries are passed over', 'DNS:agent.sluice.test, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1, URI:spiffe://sluice.test/a', ['spiffe://sluice.test/a']],
    ['two URI entries are two URIs', 'URI:spiffe://sluice.test/a, URI:spiffe://sluice.test/b', ['spiffe://sluice.test/a', 'spiffe://sluice.test/b']],
    // CVE-2021-44532: one quoted entry, one URI, whatever it holds.
    ['a quoted URI holding ", URI:spiffe://evil" is one URI', 'URI:"spiffe://sluice.test/a, URI:spiffe://evil"', ['spiffe://sluice.test/a, URI:spiffe://evil']],
    ['as Node writes it, the comma escaped inside the quotes', 'DNS:a.test, URI:"spiffe://sluice.test/a\\u002c URI:spiffe://evil", IP Address:127.0.0.1', ['spiffe://sluice.test/a, URI:spiffe://evil']],
    ['a quoted DNS entry holding ", URI:spiffe://evil" is no URI', 'DNS:"a.test, URI:spiffe://evil", DNS:b.test', []],
    ['an escaped quote inside a quoted URI does not end it', 'URI:"spiffe://sluice.test/a\\", URI:spiffe://evil", DNS:c.test', ['spiffe://sluice.test/a", URI:spiffe://evil']],
    ['a URI after a quoted entry is still read', 'DNS:"a.test, b", URI:spiffe://sluice.test/after', ['spiffe://sluice.test/after']],
    ['an unterminated quote yields nothing more', 'URI:spiffe://sluice.test/a, URI:"spiffe://evil, URI:spiffe://worse', ['spiffe://sluice.test/a']],
  ] as const)('%s', (_name, san, uris) => {
    expect(uriSans(san)).toEqual(uris);
  });
});

type AltName = { type: 2 | 6; value: string } | { type: 7; ip: string };

/** A self-signed certificate with these SANs (forge writes the value bytes as given, commas and all). */
function certificateWith(altNames: AltName[]): X509Certificate {
  const { privateKey: pem } = generateKeyPairSync('rsa', { modulusLength: 2048, privateKeyEncoding: { type: 'pkcs8', format: 'pem' }, publicKeyEncoding: { type: 'spki', format: 'pem' } });
  const key = forge.pki.privateKeyFromPem(pem) as forge.pki.rsa.PrivateKey;
  const cert = forge.pki.createCertificate();
  cert.publicKey = forge.pki.rsa.setPublicKey(key.n, key.e);
  cert.serialNumber = '01';
  cert.validity.notBefore = new Date(Date.now() - 60_000);
  cert.validity.notAfter = new Date(Date.now() + 86_400_000);
  cert.setSubject([{ name: 'commonName', value: 'spiffe://sluice.test/cn-is-not-a-san' }]);
  cert.setIssuer(cert.subject.attributes);
  cert.setExtensions(altNames.length === 0 ? [] : [{ name: 'subjectAltName', altNames }]);
  cert.sign(key, forge.md.sha256.create());
  return new X509Certificate(forge.pki.certificateToPem(cert));
}

/** What presentedCertificate reads of a TLS socket: only its verified peer certificate. */
const socketPresenting = (x509: X509Certificate | undefined): tls.TLSSocket => ({ getPeerX509Certificate: () => x509 }) as unknown as tls.TLSSocket;

describe('presentedCertificate', () => {
  it('reads a smuggling URI SAN from a real certificate as the one URI it is (Node quotes it; CVE-2021-44532)', () => {
    const x509 = certificateWith([
      { type: 2, value: 'agent.sluice.test' },
      { type: 6, value: 'spiffe://sluice.test/a, URI:spiffe://evil' },
      { type: 7, ip: '127.0.0.1' },
    ]);
    // Node quotes the entry and escapes its comma: \u002c inside a JSON string.
    expect(x509.subjectAltName).toContain('URI:"spiffe://sluice.test/a\\u002c URI:spiffe://evil"');
    expect(presentedCertificate(socketPresenting(x509))?.uris).toEqual(['spiffe://sluice.test/a, URI:spiffe://evil']);
  });

  it('is the SHA-256 of the DER certificate in lower-case hex and every URI SAN, never the CN', () => {
    const x509 = certificateWith([{ type: 6, value: 'spiffe://sluice.test/a' }, { type: 2, value: 'spiffe.sluice.test' }, { type: 6, value: 'spiffe://sluice.test/b' }]);
    expect(presentedCertificate(socketPresenting(x509))).toEqual({
      sha256: createHash('sha256').update(x509.raw).digest('hex'),
      uris: ['spiffe://sluice.test/a', 'spiffe://sluice.test/b'],
    });
  });

  it('a certificate without a subjectAltName has a SHA-256 and no URI', () => {
    const x509 = certificateWith([]);
    expect(presentedCertificate(socketPresenting(x509))?.uris).toEqual([]);
  });

  it('is null when the client sent no certificate', () => {
    expect(presentedCertificate(socketPresenting(undefined))).toBeNull();
  });
});
