// Client compatibility matrix: headless Chromium (Debian's `chromium`). Chromium cannot send proxy
// credentials from --proxy-server or a PAC answer, so it uses a listener dedicated to its grant. Both
// --proxy-server and --proxy-pac-url (a data: URL) are tested; TLS trust is the origin leaf's SPKI hash
// (--ignore-certificate-errors-spki-list), never --ignore-certificate-errors.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BROWSER_GRANT, CHROMIUM, cleanupClients, clientVersion, GRANT, runChromium, spkiHash, startMatrix, TOKEN, type ChromiumResult, type Matrix } from '../support/clients.js';

const skip = CHROMIUM === undefined && process.env.CI !== 'true';
if (skip) console.log('skipping the Chromium client tests: no chromium binary (apt-get install chromium; under CI=true they run and fail instead)');
else console.log(`client matrix: ${clientVersion('chromium') ?? 'chromium not installed'}`);

// Chromium renders a text/plain response as <pre …>body</pre>.
const PAGE = (text: string): string => `>${text}</pre>`;

// Kill any client still running and remove temporary profiles, clones and HOME after the whole file.
afterAll(cleanupClients);

describe.skipIf(skip)('headless Chromium through Sluice', { timeout: 60_000 }, () => {
  let m: Matrix;
  let trust: string;
  let proxy: string[];
  beforeAll(async () => {
    m = await startMatrix();
    trust = `--ignore-certificate-errors-spki-list=${spkiHash(m.pki.certPem)}`;
    // <-loopback> only matters for loopback literals; app.test is a name that Sluice resolves.
    proxy = [`--proxy-server=http://127.0.0.1:${m.dedicatedPort}`, '--proxy-bypass-list=<-loopback>', trust];
  });
  afterAll(async () => {
    await m?.close();
  });

  const denied = (r: ChromiumResult, host: string): string[] | undefined => r.tunnels.find((t) => t.request.startsWith(`CONNECT ${host}`))?.response;

  it('--proxy-server to a dedicated listener: HTTP page in absolute form', async () => {
    const r = await runChromium(proxy, m.httpUrl('/chromium-http'));
    expect(r.dom).toContain(PAGE('origin:GET:/chromium-http'));
    expect(m.decisionsFor('app.test').find((d) => d.target.endsWith('/chromium-http'))).toMatchObject({ listener: 'browser', principal: BROWSER_GRANT, via: 'listener', reason: 'granted' });
  });

  it('--proxy-server to a dedicated listener: HTTPS page through CONNECT', async () => {
    const start = m.sluice.decisions().length;
    const r = await runChromium(proxy, m.httpsUrl('/chromium-https'));
    expect(r.dom).toContain(PAGE('origin:GET:/chromium-https'));
    const mine = m.sluice.decisions().slice(start).filter((d) => d.canonical === `app.test:${m.https.port}`);
    expect(mine.length).toBeGreaterThan(0);
    expect(mine[0]).toMatchObject({ method: 'CONNECT', principal: BROWSER_GRANT, reason: 'granted' });
  });

  it('HTTP denied: the page is Sluice’s 403 body', async () => {
    const before = m.http.connections;
    const r = await runChromium(proxy, m.deniedHttpUrl('/nope'));
    expect(r.dom).toContain('sluice: 403 destination_not_granted');
    expect(r.dom).toContain(`grant ${BROWSER_GRANT}`);
    expect(m.http.connections).toBe(before);
  });

  // What Chromium renders for a failed load changes with its version (an empty document, its error
  // page): these tests assert what Sluice did, what reached the origin, and the net log's error code.
  it('HTTPS denied: ERR_TUNNEL_CONNECTION_FAILED; the net log holds the CONNECT 403 and its Proxy-Status', async () => {
    const before = m.https.connections;
    const start = m.sluice.decisions().length;
    const r = await runChromium(proxy, m.deniedHttpsUrl('/nope'));
    expect(r.dom).not.toContain('origin:');
    expect(r.loadError).toBe('net::ERR_TUNNEL_CONNECTION_FAILED');
    const mine = m.sluice.decisions().slice(start).filter((d) => d.canonical?.startsWith('deny.test:'));
    expect(mine.length).toBeGreaterThan(0);
    for (const d of mine) expect(d).toMatchObject({ method: 'CONNECT', principal: BROWSER_GRANT, reason: 'destination_not_granted' });
    const reply = denied(r, 'deny.test');
    expect(reply?.[0]).toBe('HTTP/1.1 403 Forbidden');
    expect(reply).toContain('Proxy-Status: sluice; error=http_request_denied; details="destination_not_granted"');
    expect(m.https.connections).toBe(before);
  });

  it('--proxy-pac-url with a data: PAC answering "PROXY 127.0.0.1:<dedicated port>": HTTP, HTTPS and a denial', async () => {
    const pac = `function FindProxyForURL(url, host) { return "PROXY 127.0.0.1:${m.dedicatedPort}"; }`;
    const flags = [`--proxy-pac-url=data:application/x-javascript-config;base64,${Buffer.from(pac).toString('base64')}`, trust];
    const plain = await runChromium(flags, m.httpUrl('/pac-http'));
    expect(plain.dom).toContain(PAGE('origin:GET:/pac-http'));
    const tls = await runChromium(flags, m.httpsUrl('/pac-https'));
    expect(tls.dom).toContain(PAGE('origin:GET:/pac-https'));
    const httpsBefore = m.https.connections;
    const no = await runChromium(flags, m.deniedHttpsUrl('/nope'));
    expect(no.loadError).toBe('net::ERR_TUNNEL_CONNECTION_FAILED');
    expect(m.https.connections).toBe(httpsBefore);
    expect(denied(no, 'deny.test')?.[0]).toBe('HTTP/1.1 403 Forbidden');
    expect(m.decisionsFor('app.test').filter((d) => d.listener === 'browser' && d.reason === 'granted').length).toBeGreaterThan(0);
  });

  it('Chromium cannot carry a token: userinfo in --proxy-server is refused by Chromium (ERR_NO_SUPPORTED_PROXIES)', async () => {
    const start = m.sluice.decisions().length;
    const before = m.https.connections;
    const r = await runChromium([`--proxy-server=http://${GRANT}:${TOKEN}@127.0.0.1:${m.proxyPort}`, trust], m.httpsUrl('/with-creds'));
    expect(r.dom).not.toContain('origin:');
    expect(m.https.connections).toBe(before);
    expect(r.loadError).toBe('net::ERR_NO_SUPPORTED_PROXIES');
    expect(m.sluice.decisions().slice(start).filter((d) => d.listener === 'shared')).toEqual([]);
  });

  it('a token listener answers Chromium 407 (Basic realm="sluice"): headless Chromium gives up, nothing reaches the origin', async () => {
    const before = m.https.connections;
    const start = m.sluice.decisions().length;
    const r = await runChromium([`--proxy-server=http://127.0.0.1:${m.proxyPort}`, trust], m.httpsUrl('/no-token'));
    expect(r.dom).not.toContain('origin:');
    const mine = m.sluice.decisions().slice(start).filter((d) => (d.canonical ?? d.target).startsWith('app.test:'));
    expect(mine.length).toBeGreaterThan(0);
    expect(mine.map((d) => d.reason)).toEqual(mine.map(() => 'token_missing'));
    // Headless has nobody to ask. The page-load error names the auth failure; versions that log no page
    // load error leave the URL request's own, the tunnel failure.
    expect(['net::ERR_INVALID_AUTH_CREDENTIALS', 'net::ERR_TUNNEL_CONNECTION_FAILED']).toContain(r.loadError);
    const reply = r.tunnels.find((t) => t.request.startsWith('CONNECT app.test'))?.response;
    expect(reply?.[0]).toBe('HTTP/1.1 407 Proxy Authentication Required');
    expect(reply).toContain('Proxy-Authenticate: Basic realm="sluice"');
    expect(m.https.connections).toBe(before);
  });
});
