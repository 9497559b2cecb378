// A CRL's nextUpdate, read so a TLS listener can warn before its CRL stops being current (past it, every
// client certificate handshake fails: CRL_HAS_EXPIRED). What the reader must not do: throw on a file it
// cannot read (OpenSSL decides whether the CRL is usable), take thisUpdate for nextUpdate, or pick the
// later of two CRLs when the earlier one is what will fail first.
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { crlNextUpdate, earliestCrlNextUpdate, expiryWarnings, loadListenerTls } from '../../../src/listen/index.js';
import { createClientPki, type ClientPki } from '../../support/client-pki.js';

const HOUR_MS = 3_600_000;
let pki: ClientPki;

beforeAll(() => {
  pki = createClientPki();
});
afterAll(() => pki?.cleanup());

/** nextUpdate is written in whole seconds (UTCTime). */
const seconds = (d: Date): number => Math.floor(d.getTime() / 1000) * 1000;

describe('earliestCrlNextUpdate', () => {
  it('reads nextUpdate (not thisUpdate) of a v2 CRL, and null for a CRL without one', () => {
    const when = new Date(Date.now() + 5 * HOUR_MS);
    expect(earliestCrlNextUpdate(fs.readFileSync(pki.writeCrl(pki.clientCa, [], 'in-5h', when), 'utf8'))).toBe(seconds(when));
    expect(earliestCrlNextUpdate(fs.readFileSync(pki.writeCrl(pki.clientCa, [pki.revoked], 'none', null), 'utf8'))).toBeNull();
  });

  it('takes the earliest of several CRLs in one file (the first to fail is the one that matters)', () => {
    const soon = new Date(Date.now() + 2 * HOUR_MS);
    const later = new Date(Date.now() + 50 * HOUR_MS);
    const text = fs.readFileSync(pki.writeCrl(pki.clientCa, [], 'later', later), 'utf8') + fs.readFileSync(pki.writeCrl(pki.otherCa, [], 'soon', soon), 'utf8');
    expect(earliestCrlNextUpdate(text)).toBe(seconds(soon));
  });

  it('is null, never an error, for what it cannot read', () => {
    expect(earliestCrlNextUpdate('not a CRL')).toBeNull();
    expect(earliestCrlNextUpdate('-----BEGIN X509 CRL-----\nAAAA\n-----END X509 CRL-----\n')).toBeNull();
    expect(crlNextUpdate(Buffer.from([0x30, 0x84, 0xff, 0xff, 0xff, 0xff]))).toBeNull();
    expect(crlNextUpdate(Buffer.alloc(0))).toBeNull();
  });
});

describe('expiryWarnings for a TLS listener', () => {
  const files = (crlFile: string) => ({ certFile: pki.server.certFile, keyFile: pki.server.keyFile, clientCaFile: pki.clientCa.certFile, crlFile, minVersion: 'TLSv1.2' as const });

  it('warns a day ahead of a CRL’s nextUpdate, and once it has passed, and not before', () => {
    const now = Date.now();
    const loaded = loadListenerTls(files(pki.writeCrl(pki.clientCa, [], 'warn', new Date(now + 3 * HOUR_MS))));
    // The test PKI's server certificate lives 2 days, so its own warning comes too: only the CRL's are read here.
    const crl = (at: number): string[] => expiryWarnings('remote', loaded, at).filter((w) => w.includes('crlFile'));
    expect(crl(now)).toEqual([expect.stringMatching(/^listener remote: a CRL of listeners\[\]\.tls\.crlFile stops being current .* in 3 hour\(s\)/)]);
    expect(crl(now + 4 * HOUR_MS)).toEqual([expect.stringContaining('CRL_HAS_EXPIRED')]);
    expect(crl(now - 2 * 24 * HOUR_MS)).toEqual([]);
    expect(expiryWarnings('remote', loaded, now)).toContainEqual(expect.stringMatching(/^listener remote: its TLS certificate .* expires on/));
  });
});
