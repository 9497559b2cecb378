// Client compatibility matrix: Node's fetch with undici's EnvHttpProxyAgent as the global dispatcher,
// in a child `node --input-type=module -e …` configured only by HTTP_PROXY / HTTPS_PROXY (grant:token
// as userinfo, sent as Basic on the first request) and NODE_EXTRA_CA_CERTS.
// undici tunnels http:// URLs with CONNECT too unless the agent is built with { proxyTunnel: false }:
// a CONNECT whose destination only http://host:port grants is a mediated tunnel (issue 17), each request
// inside it a hop checked against that rule; a tcp:// rule makes it an opaque tunnel instead.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { cleanupClients, GRANT, REPO_ROOT, runClient, startMatrix, type Matrix } from '../support/clients.js';

const UNDICI_VERSION = (JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'node_modules/undici/package.json'), 'utf8')) as { version: string }).version;
console.log(`client matrix: Node ${process.version}, undici ${UNDICI_VERSION}`);

// argv[1]: EnvHttpProxyAgent options as JSON; argv[2..]: URLs. One JSON line per URL.
const SCRIPT = `
import { EnvHttpProxyAgent, setGlobalDispatcher } from 'undici';
setGlobalDispatcher(new EnvHttpProxyAgent(JSON.parse(process.argv[1])));
for (const url of process.argv.slice(2)) {
  try {
    const r = await fetch(url, { signal: AbortSignal.timeout(10000) });
    console.log(JSON.stringify({ url, status: r.status, body: await r.text(), proxyStatus: r.headers.get('proxy-status') }));
  } catch (e) {
    const causes = [];
    for (let c = e; c !== undefined && c !== null; c = c.cause) causes.push(String(c));
    console.log(JSON.stringify({ url, error: causes.join(' <- ') }));
  }
}
`;

interface Outcome {
  url: string;
  status?: number;
  body?: string;
  proxyStatus?: string | null;
  error?: string;
}

async function nodeFetch(m: Matrix, agentOptions: Record<string, unknown>, urls: string[]): Promise<Outcome[]> {
  const env = { HTTP_PROXY: m.proxyUrl, HTTPS_PROXY: m.proxyUrl, NODE_EXTRA_CA_CERTS: m.pki.caFile };
  const r = await runClient(process.execPath, ['--input-type=module', '-e', SCRIPT, JSON.stringify(agentOptions), ...urls], { env });
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  return r.stdout.trim().split('\n').map((line) => JSON.parse(line) as Outcome);
}

// Kill any client still running and remove temporary profiles, clones and HOME after the whole file.
afterAll(cleanupClients);

describe('Node fetch + undici EnvHttpProxyAgent through Sluice (grant with http:// and https:// rules)', () => {
  let m: Matrix;
  beforeAll(async () => {
    m = await startMatrix();
  });
  afterAll(async () => {
    await m?.close();
  });

  it('HTTPS works with the default agent: CONNECT with Basic from HTTPS_PROXY userinfo', async () => {
    const start = m.sluice.decisions().length;
    const [r] = await nodeFetch(m, {}, [m.httpsUrl('/node-https')]);
    expect(r).toMatchObject({ status: 200, body: 'origin:GET:/node-https' });
    expect(m.sluice.decisions().slice(start).map((d) => `${d.method} ${d.reason} ${d.via} ${d.principal}`)).toEqual([`CONNECT granted token ${GRANT}`]);
  });

  it('HTTP works with { proxyTunnel: false }: absolute form, the origin never sees Proxy-Authorization', async () => {
    const start = m.sluice.decisions().length;
    const [r] = await nodeFetch(m, { proxyTunnel: false }, [m.httpUrl('/node-http')]);
    expect(r).toMatchObject({ status: 200, body: 'origin:GET:/node-http' });
    expect(m.http.requests.at(-1)?.headers['proxy-authorization']).toBeUndefined();
    expect(m.sluice.decisions().slice(start).map((d) => `${d.method} ${d.reason} ${d.via}`)).toEqual(['GET granted token']);
  });

  it('HTTP with the default agent is a CONNECT tunnel, mediated under the http:// rule: each request inside is a hop', async () => {
    const start = m.sluice.decisions().length;
    const [r] = await nodeFetch(m, {}, [m.httpUrl('/node-tunnel')]);
    expect(r).toMatchObject({ status: 200, body: 'origin:GET:/node-tunnel' });
    expect(m.http.requests.at(-1)?.headers['proxy-authorization']).toBeUndefined();
    expect(m.sluice.decisions().slice(start).map((d) => `${d.method} ${d.reason} ${d.rule ?? ''}`)).toEqual([
      `CONNECT granted http://app.test:${m.http.port}`,
      `GET granted http://app.test:${m.http.port}`,
    ]);
  });

  it('denied: HTTP (proxyTunnel: false) returns Sluice’s 403 response; HTTPS fails with the CONNECT status 403', async () => {
    const [plain, tls] = await nodeFetch(m, { proxyTunnel: false }, [m.deniedHttpUrl('/nope'), m.deniedHttpsUrl('/nope')]);
    expect(plain?.status).toBe(403);
    expect(plain?.proxyStatus).toBe('sluice; error=http_request_denied; details="destination_not_granted"');
    expect(plain?.body).toContain('sluice: 403 destination_not_granted');
    expect(tls?.error).toContain('fetch failed');
    expect(tls?.error).toContain('Proxy response (403) !== 200 when HTTP Tunneling');
    expect(m.decisionsFor('deny.test').map((d) => `${d.method} ${d.reason}`)).toEqual(['GET destination_not_granted', 'CONNECT destination_not_granted']);
  });
});

describe('Node fetch + undici EnvHttpProxyAgent through Sluice (grant with a tcp:// rule for the HTTP origin)', () => {
  let m: Matrix;
  beforeAll(async () => {
    m = await startMatrix({ extraDestinations: ({ http }) => [`tcp://app.test:${http}`] });
  });
  afterAll(async () => {
    await m?.close();
  });

  it('HTTP and HTTPS both work with the default agent (http:// tunneled by CONNECT under the tcp:// rule)', async () => {
    const [plain, tls] = await nodeFetch(m, {}, [m.httpUrl('/node-http'), m.httpsUrl('/node-https')]);
    expect(plain).toMatchObject({ status: 200, body: 'origin:GET:/node-http' });
    expect(tls).toMatchObject({ status: 200, body: 'origin:GET:/node-https' });
    expect(m.decisionsFor('app.test').map((d) => `${d.method} ${d.reason} ${d.rule ?? ''}`)).toEqual([
      `CONNECT granted tcp://app.test:${m.http.port}`,
      `CONNECT granted https://app.test:${m.https.port}`,
    ]);
  });
});
