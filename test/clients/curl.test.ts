// Client compatibility matrix: curl. HTTP through the proxy in absolute form, HTTPS through CONNECT,
// credentials in the proxy URL (Basic), a Bearer token in --proxy-header, the 407 challenge flow
// (--proxy-anyauth), and SOCKS5 with socks5h://grant:token@. Denials show Sluice's 403.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanupClients, clientVersion, GRANT, runClient, startMatrix, TOKEN, type ClientResult, type Matrix } from '../support/clients.js';
import { curlHeadersAndBody } from '../support/curl.js';

console.log(`client matrix: ${clientVersion('curl') ?? 'curl not installed'}`);

/** curl with no ~/.curlrc (-q), no proxy variables, and a bounded run time. */
function curl(args: string[]): Promise<ClientResult> {
  return runClient('curl', ['-q', '--silent', '--show-error', '--max-time', '10', ...args]);
}

// Kill any client still running and remove temporary profiles, clones and HOME after the whole file.
afterAll(cleanupClients);

describe('curl through Sluice', () => {
  let m: Matrix;
  beforeAll(async () => {
    m = await startMatrix();
  });
  afterAll(async () => {
    await m?.close();
  });

  it('HTTP: -x http://grant:token@… sends absolute form with Basic credentials; the origin never sees them', async () => {
    const r = await curl(['-x', m.proxyUrl, m.httpUrl('/curl-http')]);
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('origin:GET:/curl-http');
    expect(m.http.requests.at(-1)?.headers['proxy-authorization']).toBeUndefined();
    expect(m.decisionsFor('app.test').at(-1)).toMatchObject({ method: 'GET', principal: GRANT, via: 'token', reason: 'granted' });
  });

  it('HTTPS: -x http://grant:token@… tunnels with CONNECT; TLS is end to end (--cacert)', async () => {
    const r = await curl(['-x', m.proxyUrl, '--cacert', m.pki.caFile, m.httpsUrl('/curl-https')]);
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('origin:GET:/curl-https');
    expect(m.decisionsFor('app.test').at(-1)).toMatchObject({ method: 'CONNECT', principal: GRANT, via: 'token', reason: 'granted' });
  });

  it('HTTP denied: 403 with Proxy-Status and a one-line body, before the origin sees a connection', async () => {
    const before = m.http.connections;
    const r = await curl(['-i', '-x', m.proxyUrl, m.deniedHttpUrl('/nope')]);
    const res = curlHeadersAndBody(r.stdout);
    expect(res.status).toBe(403);
    expect(res.headers['proxy-status']).toContain('details="destination_not_granted"');
    expect(res.body).toContain('sluice: 403 destination_not_granted');
    expect(m.http.connections).toBe(before);
    expect(m.decisionsFor('deny.test').at(-1)).toMatchObject({ reason: 'destination_not_granted', status: 403 });
  });

  it('HTTPS denied: CONNECT answered 403 (curl exit 56, %{http_connect} = 403)', async () => {
    const before = m.https.connections;
    const r = await curl(['-w', '%{http_connect}', '-o', '/dev/null', '-x', m.proxyUrl, '--cacert', m.pki.caFile, m.deniedHttpsUrl('/nope')]);
    expect(r.code).toBe(56);
    expect(r.stdout).toBe('403');
    expect(r.stderr).toContain('CONNECT tunnel failed, response 403');
    expect(m.https.connections).toBe(before);
    expect(m.decisionsFor('deny.test').at(-1)).toMatchObject({ method: 'CONNECT', reason: 'destination_not_granted' });
  });

  it('HTTPS denied with -v shows the Proxy-Status of the CONNECT reply', async () => {
    const r = await curl(['-v', '-o', '/dev/null', '-x', m.proxyUrl, '--cacert', m.pki.caFile, m.deniedHttpsUrl('/nope')]);
    expect(r.stderr).toMatch(/< HTTP\/1\.1 403/);
    expect(r.stderr).toMatch(/< Proxy-Status: .*destination_not_granted/i);
  });

  it('--proxy-header "Proxy-Authorization: Bearer <token>" identifies the grant, HTTP and HTTPS', async () => {
    const bearer = ['-x', `http://127.0.0.1:${m.proxyPort}`, '--proxy-header', `Proxy-Authorization: Bearer ${TOKEN}`];
    const plain = await curl([...bearer, m.httpUrl('/bearer-http')]);
    expect(plain.stderr).toBe('');
    expect(plain.stdout).toBe('origin:GET:/bearer-http');
    expect(m.http.requests.at(-1)?.headers['proxy-authorization']).toBeUndefined();
    expect(m.decisionsFor('app.test').at(-1)).toMatchObject({ method: 'GET', principal: GRANT, via: 'token' });
    const tls = await curl([...bearer, '--cacert', m.pki.caFile, m.httpsUrl('/bearer-https')]);
    expect(tls.stderr).toBe('');
    expect(tls.stdout).toBe('origin:GET:/bearer-https');
    expect(m.decisionsFor('app.test').at(-1)).toMatchObject({ method: 'CONNECT', principal: GRANT, via: 'token' });
  });

  it('no credentials: 407 with Proxy-Authenticate: Basic realm="sluice"', async () => {
    const r = await curl(['-i', '-x', `http://127.0.0.1:${m.proxyPort}`, m.httpUrl('/anon')]);
    const res = curlHeadersAndBody(r.stdout);
    expect(res.status).toBe(407);
    expect(res.headers['proxy-authenticate']).toBe('Basic realm="sluice"');
    expect(res.headers['proxy-status']).toContain('details="token_missing"');
  });

  it('the 407 challenge flow (--proxy-anyauth: first request without credentials, then Basic) works, HTTP and HTTPS', async () => {
    const anyauth = ['-x', `http://127.0.0.1:${m.proxyPort}`, '--proxy-user', `${GRANT}:${TOKEN}`, '--proxy-anyauth'];
    const start = m.sluice.decisions().length;
    const plain = await curl([...anyauth, m.httpUrl('/anyauth-http')]);
    expect(plain.stderr).toBe('');
    expect(plain.stdout).toBe('origin:GET:/anyauth-http');
    const tls = await curl([...anyauth, '--cacert', m.pki.caFile, m.httpsUrl('/anyauth-https')]);
    expect(tls.stderr).toBe('');
    expect(tls.stdout).toBe('origin:GET:/anyauth-https');
    const reasons = m.sluice.decisions().slice(start).map((d) => `${d.method} ${d.reason}`);
    expect(reasons).toEqual(['GET token_missing', 'GET granted', 'CONNECT token_missing', 'CONNECT granted']);
  });

  it('SOCKS5: socks5h://grant:token@… carries HTTPS with the name resolved by Sluice', async () => {
    const r = await curl(['-x', `socks5h://${GRANT}:${TOKEN}@127.0.0.1:${m.socksPort}`, '--cacert', m.pki.caFile, m.httpsUrl('/socks-https')]);
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('origin:GET:/socks-https');
    expect(m.decisionsFor('app.test').at(-1)).toMatchObject({ method: 'SOCKS5', principal: GRANT, reason: 'granted' });
  });

  it('SOCKS5 carries no scheme: plain HTTP over socks5h to a destination only an http:// rule grants is mediated, each request a hop', async () => {
    const start = m.sluice.decisions().length;
    const r = await curl(['-x', `socks5h://${GRANT}:${TOKEN}@127.0.0.1:${m.socksPort}`, m.httpUrl('/socks-http')]);
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('origin:GET:/socks-http');
    expect(m.sluice.decisions().slice(start).map((d) => `${d.method} ${d.reason} ${d.rule ?? ''}`)).toEqual([
      `SOCKS5 granted http://app.test:${m.http.port}`,
      `GET granted http://app.test:${m.http.port}`,
    ]);
  });

  it('SOCKS5 denied: reply 0x02 (not allowed by ruleset), curl exit 97', async () => {
    const before = m.https.connections;
    const r = await curl(['-x', `socks5h://${GRANT}:${TOKEN}@127.0.0.1:${m.socksPort}`, '--cacert', m.pki.caFile, m.deniedHttpsUrl('/nope')]);
    expect(r.code).toBe(97);
    expect(r.stderr).toContain('(2)');
    expect(m.https.connections).toBe(before);
    expect(m.decisionsFor('deny.test').at(-1)).toMatchObject({ method: 'SOCKS5', reason: 'destination_not_granted' });
  });
});

describe('curl through Sluice: plain HTTP over SOCKS5 with a tcp:// rule', () => {
  let m: Matrix;
  beforeAll(async () => {
    m = await startMatrix({ extraDestinations: ({ http }) => [`tcp://app.test:${http}`] });
  });
  afterAll(async () => {
    await m?.close();
  });

  it('socks5h://grant:token@… reaches the HTTP origin when the grant has tcp://host:port', async () => {
    const r = await curl(['-x', `socks5h://${GRANT}:${TOKEN}@127.0.0.1:${m.socksPort}`, m.httpUrl('/socks-http')]);
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('origin:GET:/socks-http');
    expect(m.decisionsFor('app.test').at(-1)).toMatchObject({ method: 'SOCKS5', principal: GRANT, reason: 'granted', rule: expect.stringMatching(/^tcp:/) });
  });
});
