// Client compatibility matrix: GNU Wget with http_proxy / https_proxy. Credentials as userinfo in the
// proxy URL or as --proxy-user/--proxy-password; wget sends Basic on the first request either way (no
// 407 round trip). A denial shows Sluice's 403 (-S prints its headers, --content-on-error its body).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanupClients, clientVersion, GRANT, runClient, startMatrix, TOKEN, type ClientResult, type Matrix } from '../support/clients.js';

console.log(`client matrix: ${clientVersion('wget') ?? 'wget not installed'}`);

/** wget printing the body on stdout and the response headers (-S) on stderr, with one try and a timeout. */
function wget(args: string[], env: Record<string, string>): Promise<ClientResult> {
  return runClient('wget', ['-S', '-O', '-', '--tries=1', '--timeout=10', ...args], { env });
}

// Kill any client still running and remove temporary profiles, clones and HOME after the whole file.
afterAll(cleanupClients);

describe('wget through Sluice', () => {
  let m: Matrix;
  let bare: string;
  beforeAll(async () => {
    m = await startMatrix();
    bare = `http://127.0.0.1:${m.proxyPort}`;
  });
  afterAll(async () => {
    await m?.close();
  });

  it('HTTP: http_proxy=http://grant:token@… sends Basic on the first request', async () => {
    const start = m.sluice.decisions().length;
    const r = await wget([m.httpUrl('/wget-http')], { http_proxy: m.proxyUrl });
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('origin:GET:/wget-http');
    expect(m.http.requests.at(-1)?.headers['proxy-authorization']).toBeUndefined();
    expect(m.sluice.decisions().slice(start).map((d) => `${d.method} ${d.reason} ${d.via}`)).toEqual(['GET granted token']);
  });

  it('HTTPS: https_proxy=http://grant:token@… tunnels with CONNECT (--ca-certificate)', async () => {
    const start = m.sluice.decisions().length;
    const r = await wget(['--ca-certificate', m.pki.caFile, m.httpsUrl('/wget-https')], { https_proxy: m.proxyUrl });
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('origin:GET:/wget-https');
    expect(m.sluice.decisions().slice(start).map((d) => `${d.method} ${d.reason} ${d.via}`)).toEqual(['CONNECT granted token']);
  });

  it('--proxy-user/--proxy-password with a proxy URL without userinfo, HTTP and HTTPS', async () => {
    const creds = ['--proxy-user', GRANT, '--proxy-password', TOKEN];
    const plain = await wget([...creds, m.httpUrl('/wget-user')], { http_proxy: bare });
    expect(plain.code).toBe(0);
    expect(plain.stdout).toBe('origin:GET:/wget-user');
    const tls = await wget([...creds, '--ca-certificate', m.pki.caFile, m.httpsUrl('/wget-user')], { https_proxy: bare });
    expect(tls.code).toBe(0);
    expect(tls.stdout).toBe('origin:GET:/wget-user');
    expect(m.decisionsFor('app.test').at(-1)).toMatchObject({ method: 'CONNECT', principal: GRANT, via: 'token' });
  });

  it('HTTP denied: ERROR 403 (exit 8), Proxy-Status in -S, Sluice’s body with --content-on-error', async () => {
    const before = m.http.connections;
    const r = await wget(['--content-on-error', m.deniedHttpUrl('/nope')], { http_proxy: m.proxyUrl });
    expect(r.code).toBe(8);
    expect(r.stderr).toContain('ERROR 403: Forbidden.');
    expect(r.stderr).toContain('Proxy-Status: sluice; error=http_request_denied; details="destination_not_granted"');
    expect(r.stdout).toContain('sluice: 403 destination_not_granted');
    expect(m.http.connections).toBe(before);
  });

  it('HTTPS denied: "Proxy tunneling failed: Forbidden" (exit 4)', async () => {
    const before = m.https.connections;
    const r = await wget(['--ca-certificate', m.pki.caFile, m.deniedHttpsUrl('/nope')], { https_proxy: m.proxyUrl });
    expect(r.code).toBe(4);
    expect(r.stderr).toContain('Proxy tunneling failed: Forbidden');
    expect(m.https.connections).toBe(before);
    expect(m.decisionsFor('deny.test').at(-1)).toMatchObject({ method: 'CONNECT', reason: 'destination_not_granted' });
  });

  it('no credentials: ERROR 407 with Proxy-Authenticate: Basic realm="sluice" (wget has nothing to retry with)', async () => {
    const r = await wget([m.httpUrl('/anon')], { http_proxy: bare });
    expect(r.code).toBe(8);
    expect(r.stderr).toContain('ERROR 407: Proxy Authentication Required.');
    expect(r.stderr).toContain('Proxy-Authenticate: Basic realm="sluice"');
  });
});
