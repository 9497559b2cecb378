// listeners[].tls, identify: certificate and grants[].clientCertificate in the config (issue 28). What a
// config must not slip through: TLS on a Unix socket (it would be silently meaningless), a certificate
// listener without a client CA (anyone's certificate, or none, would do), a CRL without a CA, two grants
// naming one certificate (which one would act?), a fingerprint that is not a SHA-256, and relative
// paths that resolve against anything but the working directory.
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { parseConfigText } from '../../../src/config/index.js';

const SHA = 'AB:'.repeat(31) + 'CD';

function load(listener: Record<string, unknown>, grants: Record<string, unknown>[] = []): ReturnType<typeof parseConfigText> {
  return parseConfigText(stringify({ listeners: [{ name: 'remote', listen: '127.0.0.1:0', ...listener }], grants }), path.join(os.tmpdir(), 's.yaml'), '/srv/sluice');
}

function issuePaths(result: ReturnType<typeof parseConfigText>): string[] {
  return result.ok ? [] : result.issues.map((i) => i.path);
}

describe('listeners[].tls', () => {
  it('resolves the files against the working directory and defaults minVersion to TLSv1.2', () => {
    const result = load({ tls: { certFile: 'tls/server.pem', keyFile: '/etc/sluice/key.pem', clientCaFile: 'ca.pem', crlFile: 'ca.crl' }, identify: 'certificate' });
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.config.listeners[0]?.tls).toEqual({
      certFile: '/srv/sluice/tls/server.pem',
      keyFile: '/etc/sluice/key.pem',
      clientCaFile: '/srv/sluice/ca.pem',
      crlFile: '/srv/sluice/ca.crl',
      minVersion: 'TLSv1.2',
    });
    expect(result.config.listeners[0]?.identify).toBe('certificate');
  });

  it('refuses TLS on a unix: listener, naming the key', () => {
    const result = parseConfigText(stringify({ listeners: [{ name: 'u', listen: 'unix:/tmp/s.sock', tls: { certFile: 'c', keyFile: 'k' } }] }), path.join(os.tmpdir(), 's.yaml'), '/srv');
    expect(issuePaths(result)).toContain('listeners[0].tls');
  });

  it('refuses identify: certificate without tls.clientCaFile, and a CRL without a CA', () => {
    expect(issuePaths(load({ identify: 'certificate', tls: { certFile: 'c', keyFile: 'k' } }))).toContain('listeners[0].identify');
    expect(issuePaths(load({ identify: 'certificate' }))).toContain('listeners[0].identify');
    expect(issuePaths(load({ tls: { certFile: 'c', keyFile: 'k', crlFile: 'r' } }))).toContain('listeners[0].tls.crlFile');
  });

  it('refuses an unknown key, a missing certFile or keyFile, and a minVersion below TLS 1.2', () => {
    expect(issuePaths(load({ tls: { certFile: 'c', keyFile: 'k', ciphers: 'ALL' } }))).toContain('listeners[0].tls.ciphers');
    expect(issuePaths(load({ tls: { keyFile: 'k' } }))).toContain('listeners[0].tls.certFile');
    expect(issuePaths(load({ tls: { certFile: 'c' } }))).toContain('listeners[0].tls.keyFile');
    expect(issuePaths(load({ tls: { certFile: 'c', keyFile: 'k', minVersion: 'TLSv1.1' } }))).toContain('listeners[0].tls.minVersion');
  });

  it('refuses identify: certificate on a listener bound to one grant (the listener would decide, not the certificate)', () => {
    const result = load({ identify: 'certificate', grant: 'g', tls: { certFile: 'c', keyFile: 'k', clientCaFile: 'ca' } }, [{ id: 'g' }]);
    expect(result.ok).toBe(false);
  });
});

describe('grants[].clientCertificate', () => {
  it('takes a SHA-256 with or without colons, in either case, and keeps it as lower-case hex', () => {
    const result = load({}, [{ id: 'a', clientCertificate: { sha256: SHA } }, { id: 'b', clientCertificate: { sha256: 'ef'.repeat(32) } }]);
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.config.grants[0]?.clientCertificate).toEqual({ sha256: 'ab'.repeat(31) + 'cd' });
    expect(result.config.grants[1]?.clientCertificate).toEqual({ sha256: 'ef'.repeat(32) });
  });

  it('takes a URI SAN, and refuses a CN-like name, a short or SHA-1 fingerprint, and both forms at once', () => {
    expect(load({}, [{ id: 'a', clientCertificate: { uriSan: 'spiffe://example.org/ns/ci/sa/agent' } }]).ok).toBe(true);
    expect(issuePaths(load({}, [{ id: 'a', clientCertificate: { uriSan: 'agent.example.org' } }])).some((p) => p.startsWith('grants[0].clientCertificate'))).toBe(true);
    expect(issuePaths(load({}, [{ id: 'a', clientCertificate: { sha256: 'ab'.repeat(20) } }])).some((p) => p.startsWith('grants[0].clientCertificate'))).toBe(true);
    expect(issuePaths(load({}, [{ id: 'a', clientCertificate: { sha256: 'ef'.repeat(32), uriSan: 'spiffe://x/y' } }])).some((p) => p.startsWith('grants[0].clientCertificate'))).toBe(true);
    expect(issuePaths(load({}, [{ id: 'a', clientCertificate: { cn: 'agent' } }])).some((p) => p.startsWith('grants[0].clientCertificate'))).toBe(true);
  });

  it('refuses two grants naming one certificate (however the fingerprint is written), or one URI', () => {
    const bySha = load({}, [{ id: 'a', clientCertificate: { sha256: SHA } }, { id: 'b', clientCertificate: { sha256: SHA.replaceAll(':', '').toLowerCase() } }]);
    expect(bySha.ok).toBe(false);
    if (!bySha.ok) expect(bySha.issues.find((i) => i.path === 'grants[1].clientCertificate')?.message).toContain('"a"');
    const byUri = load({}, [{ id: 'a', clientCertificate: { uriSan: 'spiffe://x/agent' } }, { id: 'b', clientCertificate: { uriSan: 'spiffe://x/agent' } }]);
    expect(issuePaths(byUri)).toContain('grants[1].clientCertificate');
  });
});
