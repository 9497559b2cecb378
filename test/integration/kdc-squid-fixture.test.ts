// Proves the real proxy-authentication fixtures issue 18 is tested against: a throwaway MIT realm
// (test/support/kdc.ts) and a Squid parent that demands Negotiate (Kerberos via SPNEGO, RFC 4559 with
// RFC 7235 proxy auth), NTLM and Basic (test/support/squid.ts), driven by the real curl binary (built with
// GSS-API, SPNEGO and NTLM). The threats: a client with no ticket, an expired ticket, a ticket for another
// service, or a forged token must all get 407 and reach no origin; only a real ticket passes and is logged
// with its principal. In CI the packages are installed by .ci/run, so these never skip there.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestPki } from '../support/pki.js';
import { startHttpOrigin, startHttpsOrigin, type Origin } from '../support/origins.js';
import { curlHeadersAndBody, runCurl, type CurlResult } from '../support/curl.js';
import { kdcAvailable, startKdc, type Kdc } from '../support/kdc.js';
import { squidAvailable, startSquid, type Squid, type SquidLogEntry } from '../support/squid.js';
import { waitUntil, withTimeout } from '../support/wait.js';

const ORIGIN_PKI = createTestPki(['origin.test']);

/** Writes `request` on a fresh connection and resolves with everything read until the peer closes. */
function rawRequest(port: number, request: string): Promise<string> {
  return withTimeout(
    new Promise<string>((resolve, reject) => {
      const socket = net.connect({ port, host: '127.0.0.1' }, () => socket.write(request));
      let data = '';
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => (data += chunk));
      socket.once('end', () => resolve(data));
      socket.once('error', reject);
    }),
    5000,
    'raw request through Squid',
  );
}
const available = kdcAvailable() && squidAvailable();

describe.skipIf(!available && process.env.CI !== 'true')('KDC and Kerberos-protected Squid fixtures (real krb5kdc, squid, curl)', () => {
  let kdc: Kdc;
  let squid: Squid;
  let http: Origin;
  let https: Origin;
  /** `HTTP/localhost` key: curl derives the SPN from the proxy host name, so the proxy is `localhost`. */
  let proxy: string;
  let otherKeytab: string;
  let scratch: string | undefined;

  beforeAll(async () => {
    kdc = await startKdc();
    const keytab = await kdc.addService('HTTP/localhost');
    // A service Squid does not hold: a ticket for it must not open Squid.
    otherKeytab = await kdc.addService('HTTP/other.krb.test');
    await kdc.addUser('alice', 'alice-pw-1');
    await kdc.addUser('bob', 'bob-pw-2', { maxLifeSeconds: 2 });
    http = await startHttpOrigin();
    https = await startHttpsOrigin(ORIGIN_PKI);
    squid = await startSquid({
      hosts: { 'origin.test': '127.0.0.1' },
      negotiate: { keytab, krb5Config: kdc.krb5Config },
      ntlm: true,
      users: { carol: 'carol-pw' },
    });
    proxy = `http://localhost:${squid.port}`;
  });
  afterAll(async () => {
    await squid?.close();
    await kdc?.close();
    await http?.close();
    await https?.close();
  });
  afterEach(() => {
    if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
    scratch = undefined;
  });
  const ccache = (name: string): string => {
    scratch ??= mkdtempSync(join(tmpdir(), 'sluice-kdc-test-'));
    return join(scratch, name);
  };
  /** curl's environment for this realm, with no *_proxy variables. */
  const env = (extra: NodeJS.ProcessEnv): NodeJS.ProcessEnv =>
    Object.fromEntries(Object.entries(kdc.env(extra)).filter(([key]) => !/_proxy$/i.test(key)));
  const negotiate = (cc: string, args: string[], extra: NodeJS.ProcessEnv = {}): Promise<CurlResult> =>
    runCurl(['-i', '-4', '--proxy', proxy, '--proxy-negotiate', '--proxy-user', ':', ...args], { env: env({ KRB5CCNAME: `FILE:${cc}`, ...extra }) });
  const find = (entries: SquidLogEntry[], method: string, prefix: string): SquidLogEntry | undefined =>
    entries.find((e) => e.method === method && e.url.startsWith(prefix));

  it('offers Negotiate, then NTLM, then Basic in its 407, and dials nothing for an anonymous request', async () => {
    const before = http.requests.length;
    const res = await runCurl(['-i', '-4', '--proxy', proxy, `http://origin.test:${http.port}/anon`]);
    const parsed = curlHeadersAndBody(res.stdout);
    expect(parsed.status).toBe(407);
    const offers = parsed.all.filter((line) => /^proxy-authenticate:/i.test(line)).map((line) => line.split(':')[1]?.trim().split(' ')[0]);
    expect(offers).toEqual(['Negotiate', 'NTLM', 'Basic']);
    expect(squid.config).toMatch(/negotiate_kerberos_auth -k \S+ -s GSS_C_NO_NAME/);
    expect(http.requests.length).toBe(before);
  });

  it('kinit gives a valid ticket; a wrong password is refused without writing a ticket', async () => {
    const good = ccache('alice.cc');
    await kdc.kinit('alice', 'alice-pw-1', good);
    expect(await kdc.ticketValid(good)).toBe(true);
    expect(statSync(good).mode & 0o077).toBe(0);
    const bad = ccache('wrong.cc');
    await expect(kdc.kinit('alice', 'not-her-password', bad)).rejects.toThrow(/kinit alice@SLUICE\.TEST failed.*(incorrect|preauth)/i);
    expect(await kdc.ticketValid(bad)).toBe(false);
  });

  it('with a ticket, curl --proxy-negotiate tunnels (CONNECT) and forwards plain HTTP; Squid logs alice@SLUICE.TEST', async () => {
    const cc = ccache('alice.cc');
    await kdc.kinit('alice', 'alice-pw-1', cc);

    const tunnel = await negotiate(cc, ['--cacert', ORIGIN_PKI.caFile, `https://origin.test:${https.port}/tunnel`]);
    expect(tunnel.stderr).toBe('');
    const t = curlHeadersAndBody(tunnel.stdout);
    // curl sends the Negotiate token with its first CONNECT (no 407 round trip): established, then the origin.
    expect(t.blocks.map((b) => b.status)).toEqual([200, 200]);
    expect(t.body).toBe('origin:GET:/tunnel');

    const plain = await negotiate(cc, [`http://origin.test:${http.port}/plain`]);
    const p = curlHeadersAndBody(plain.stdout);
    expect(p.status).toBe(200);
    expect(p.body).toBe('origin:GET:/plain');
    // Squid authenticated the request itself and must not pass the Negotiate token on to the origin.
    expect(http.requests.at(-1)?.headers['proxy-authorization']).toBeUndefined();

    const entries = await squid.waitForLog((all) => find(all, 'CONNECT', `origin.test:${https.port}`)?.status === 200 && find(all, 'GET', `http://origin.test:${http.port}/plain`)?.status === 200);
    expect(find(entries, 'CONNECT', `origin.test:${https.port}`)).toMatchObject({ user: 'alice@SLUICE.TEST', result: 'TCP_TUNNEL' });
    expect(find(entries, 'GET', `http://origin.test:${http.port}/plain`)).toMatchObject({ user: 'alice@SLUICE.TEST', serverAddress: '127.0.0.1' });
  });

  it('a client keytab (KRB5_CLIENT_KTNAME) works with no ticket cache, and the password still works after the export', async () => {
    const keytab = await kdc.userKeytab('alice');
    expect(statSync(keytab).mode & 0o777).toBe(0o600);
    const cc = ccache('from-keytab.cc');
    const res = await negotiate(cc, [`http://origin.test:${http.port}/keytab`], { KRB5_CLIENT_KTNAME: keytab });
    expect(curlHeadersAndBody(res.stdout).body).toBe('origin:GET:/keytab');
    await kdc.kinit('alice', 'alice-pw-1', ccache('after-export.cc'));
  });

  it('without a ticket (empty ccache) curl gets 407 for a request and for a CONNECT, and no origin is dialed', async () => {
    const before = { http: http.requests.length, https: https.requests.length };
    const cc = ccache('empty.cc');
    const plain = await negotiate(cc, [`http://origin.test:${http.port}/noticket`]);
    expect(curlHeadersAndBody(plain.stdout).status).toBe(407);
    const tunnel = await negotiate(cc, ['-o', '/dev/null', '-w', '%{http_connect}', '--cacert', ORIGIN_PKI.caFile, `https://origin.test:${https.port}/noticket`]);
    expect(tunnel.stdout.trim().endsWith('407')).toBe(true);
    expect(tunnel.code).not.toBe(0);
    expect({ http: http.requests.length, https: https.requests.length }).toEqual(before);
  });

  it('a forged Negotiate token and a ticket for another service are refused with 407', async () => {
    const forged = await runCurl(['-i', '-4', '--proxy', proxy, '--proxy-header', `Proxy-Authorization: Negotiate ${Buffer.from('not a real AP-REQ').toString('base64')}`, `http://origin.test:${http.port}/forged`]);
    expect(curlHeadersAndBody(forged.stdout).status).toBe(407);

    // The host name other.krb.test (pinned to 127.0.0.1 by --resolve) makes curl ask for HTTP/other.krb.test,
    // a real ticket Squid's keytab cannot decrypt.
    expect(otherKeytab).not.toBe('');
    const cc = ccache('alice.cc');
    await kdc.kinit('alice', 'alice-pw-1', cc);
    const res = await runCurl(
      ['-i', '--resolve', `other.krb.test:${squid.port}:127.0.0.1`, '--proxy', `http://other.krb.test:${squid.port}`, '--proxy-negotiate', '--proxy-user', ':', `http://origin.test:${http.port}/otherspn`],
      { env: env({ KRB5CCNAME: `FILE:${cc}` }) },
    );
    expect(curlHeadersAndBody(res.stdout).status).toBe(407);
    expect(http.requests.some((r) => r.url === '/forged' || r.url === '/otherspn')).toBe(false);
  });

  it('a ticket with a 2 s lifetime works, then expires (ticketValid polled), then curl gets 407 and no origin is dialed', async () => {
    const cc = ccache('bob.cc');
    const kinitAtMs = Date.now();
    await kdc.kinit('bob', 'bob-pw-2', cc);
    // The principal's -maxlife caps the ticket whatever kinit asked for.
    const expiresAt = await kdc.ticketExpiresAt(cc);
    expect(expiresAt).not.toBeNull();
    expect(expiresAt! - kinitAtMs).toBeLessThanOrEqual(3000);
    const fresh = await negotiate(cc, [`http://origin.test:${http.port}/fresh`]);
    expect(curlHeadersAndBody(fresh.stdout).status).toBe(200);
    await waitUntil(async () => !(await kdc.ticketValid(cc)), { timeoutMs: 10_000, label: 'bob ticket expired' });
    const stale = await negotiate(cc, [`http://origin.test:${http.port}/stale`]);
    expect(curlHeadersAndBody(stale.stdout).status).toBe(407);
    expect(http.requests.some((r) => r.url === '/stale')).toBe(false);
    const entries = await squid.waitForLog((all) => find(all, 'GET', `http://origin.test:${http.port}/stale`) !== undefined);
    expect(find(entries, 'GET', `http://origin.test:${http.port}/fresh`)?.user).toBe('bob@SLUICE.TEST');
    expect(find(entries, 'GET', `http://origin.test:${http.port}/stale`)).toMatchObject({ status: 407, serverAddress: null });
  });

  it('the kerberos binding Sluice uses (SPN HTTP@localhost, SPNEGO) gets a token Squid accepts; no ticket or an expired one is refused in the client', async () => {
    const kerberos = (await import('kerberos')).default;
    const saved = { config: process.env['KRB5_CONFIG'], ccache: process.env['KRB5CCNAME'] };
    // MIT reads KRB5_CONFIG and KRB5CCNAME from the calling process's environment.
    const step = async (cc: string): Promise<string> => {
      Object.assign(process.env, { KRB5_CONFIG: kdc.krb5Config, KRB5CCNAME: `FILE:${cc}` });
      const client = await kerberos.initializeClient('HTTP@localhost', { mechOID: kerberos.GSS_MECH_OID_SPNEGO });
      return client.step('');
    };
    try {
      const cc = ccache('binding.cc');
      await kdc.kinit('alice', 'alice-pw-1', cc);
      const token = await step(cc);
      const reply = await rawRequest(squid.port, `GET http://origin.test:${http.port}/binding HTTP/1.1\r\nHost: origin.test:${http.port}\r\nProxy-Authorization: Negotiate ${token}\r\nConnection: close\r\n\r\n`);
      expect(reply).toMatch(/^HTTP\/1\.1 200 /);
      expect(reply.endsWith('origin:GET:/binding')).toBe(true);
      await expect(step(ccache('binding-empty.cc'))).rejects.toThrow(/credentials/i);
      await kdc.addUser('erin', 'erin-pw-3', { maxLifeSeconds: 1 });
      const short = ccache('binding-short.cc');
      await kdc.kinit('erin', 'erin-pw-3', short);
      await waitUntil(async () => !(await kdc.ticketValid(short)), { timeoutMs: 10_000, label: 'erin ticket expired' });
      await expect(step(short)).rejects.toThrow(/expired/i);
    } finally {
      for (const [key, value] of [['KRB5_CONFIG', saved.config], ['KRB5CCNAME', saved.ccache]] as const) {
        if (value === undefined) delete process.env[key];
        else process.env[key] = value;
      }
    }
  });

  it('curl --proxy-ntlm completes the connection-bound NTLM handshake for a request and a CONNECT', async () => {
    const ntlm = ['-i', '-4', '--proxy', proxy, '--proxy-ntlm', '--proxy-user', 'dave:dave-pw'];
    const plain = await runCurl([...ntlm, `http://origin.test:${http.port}/ntlm`]);
    const p = curlHeadersAndBody(plain.stdout);
    expect(p.status).toBe(200);
    expect(p.body).toBe('origin:GET:/ntlm');
    const tunnel = await runCurl([...ntlm, '--cacert', ORIGIN_PKI.caFile, `https://origin.test:${https.port}/ntlm-tunnel`]);
    expect(curlHeadersAndBody(tunnel.stdout).body).toBe('origin:GET:/ntlm-tunnel');
    // The handshake is type-1 → 407 with the challenge → type-3 on the same connection → 200.
    const ok = (e: SquidLogEntry): boolean => e.status === 200 && e.user !== null;
    const entries = await squid.waitForLog((all) => all.some((e) => e.method === 'GET' && e.url.endsWith('/ntlm') && ok(e)) && all.some((e) => e.method === 'CONNECT' && ok(e) && /dave/.test(e.user ?? '')));
    expect(entries.find((e) => e.method === 'GET' && e.url.endsWith('/ntlm') && ok(e))?.user).toMatch(/dave/);
  });

  it('Basic still works beside Negotiate and NTLM, and a wrong Basic password gets 407', async () => {
    const ok = await runCurl(['-i', '-4', '--proxy', proxy, '--proxy-user', 'carol:carol-pw', `http://origin.test:${http.port}/basic`]);
    expect(curlHeadersAndBody(ok.stdout).body).toBe('origin:GET:/basic');
    const bad = await runCurl(['-i', '-4', '--proxy', proxy, '--proxy-user', 'carol:wrong', `http://origin.test:${http.port}/basic-bad`]);
    expect(curlHeadersAndBody(bad.stdout).status).toBe(407);
  });

  it('refuses names and passwords that could smuggle a second kadmin query, naming the bad value', async () => {
    await expect(kdc.addUser('mallory delprinc alice', 'pw')).rejects.toThrow(/invalid principal/);
    await expect(kdc.addUser('mallory', 'pw\ndelprinc -force alice')).rejects.toThrow(/invalid password/);
    await expect(kdc.addService('HTTP/localhost@EVIL.TEST')).rejects.toThrow(/not in realm SLUICE\.TEST/);
    // kadmin.local exits 0 when a query fails: its message must still surface, password masked.
    await expect(kdc.addUser('alice', 'replaced-pw')).rejects.toThrow(/already exists/);
    await expect(kdc.addUser('alice', 'replaced-pw')).rejects.not.toThrow(/replaced-pw/);
    // alice is untouched.
    await kdc.kinit('alice', 'alice-pw-1', ccache('still-there.cc'));
  });
});

describe.skipIf(!kdcAvailable() && process.env.CI !== 'true')('KDC fixture lifecycle', () => {
  let kdc: Kdc | undefined;
  afterEach(async () => {
    await kdc?.close();
    kdc = undefined;
  });

  const refuses = (port: number): Promise<boolean> =>
    new Promise((resolve) => {
      const socket = net.connect({ port, host: '127.0.0.1' });
      const timer = setTimeout(() => (socket.destroy(), resolve(false)), 2000);
      socket.once('connect', () => (clearTimeout(timer), socket.destroy(), resolve(false)));
      socket.once('error', () => (clearTimeout(timer), resolve(true)));
    });

  it('runs a named realm on loopback only, and close() (twice) stops krb5kdc and removes its files', async () => {
    kdc = await startKdc({ realm: 'OTHER.TEST' });
    expect(kdc.realm).toBe('OTHER.TEST');
    expect(kdc.principal('u')).toBe('u@OTHER.TEST');
    expect(kdc.env()['KRB5_CONFIG']).toBe(kdc.krb5Config);
    expect(kdc.env()['KRB5CCNAME']).toContain(kdc.dir); // never the machine's /tmp/krb5cc_<uid>
    const dir = kdc.dir;
    const port = kdc.port;
    expect(await refuses(port)).toBe(false);
    await Promise.all([kdc.close(), kdc.close()]);
    await kdc.close();
    expect(await refuses(port)).toBe(true);
    expect(existsSync(dir)).toBe(false);
  });
});
