// Client compatibility matrix for TLS listeners (issue 28): real clients that speak TLS to a proxy,
// each on a token listener over TLS (the token crosses the network encrypted) and on an `identify:
// certificate` listener (the client certificate is the principal, by its URI SAN), each for a CONNECT
// tunnel to an HTTPS origin and a plain http:// request:
// - curl: `--proxy https://…` with `--proxy-cacert`; the token by `--proxy-header` (CONNECT) or
//   `--proxy-user` (absolute form); the certificate by `--proxy-cert` / `--proxy-key`.
// - undici's ProxyAgent with an https:// proxy URL and `proxyTls` (ca; cert and key). undici tunnels an
//   http:// URL with CONNECT too over an HTTPS proxy (`proxyTunnel: false` applies to http:// proxies
//   only): that CONNECT is a mediated tunnel under the http:// rule, each request in it a hop.
// - Python urllib3 2.x: `ProxyManager('https://…', proxy_ssl_context=ctx, proxy_headers=…)`, the
//   certificate by `ctx.load_cert_chain`. For an http:// URL urllib3 forwards to the proxy with the
//   pool's `ssl_context`, not `proxy_ssl_context` (urllib3/urllib3#2577): without `ssl_context=ctx` as well
//   it presents no certificate there. (Python requests and pip cannot present a client certificate
//   to a proxy: not tested.)
// Asserted on what Sluice decided (principal, via, reason) and on what reached the origin, never on a
// client's wording.
import { spawnSync } from 'node:child_process';
import { ProxyAgent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DecisionRecordV1 } from '../../src/audit/index.js';
import { cleanupClients, clientVersion, runClient } from '../support/clients.js';
import { createClientPki, type ClientPki, type IssuedCertificate } from '../support/client-pki.js';
import { curlHeadersAndBody, runCurl } from '../support/curl.js';
import { startHttpOrigin, startHttpsOrigin, type Origin } from '../support/origins.js';
import { startSluice, tokenHash, type TestSluice } from '../support/sluice.js';
import { waitUntil } from '../support/wait.js';

const TOKEN_GRANT = 'remote';
const TOKEN = 'tok-tls-remote-5c1e';
const CERT_GRANT = 'agent';
const AGENT_URI = 'spiffe://sluice.test/agent-a';

/** The Python that has urllib3 (a pyenv one here; /usr/bin/python3 may lack it), found with the runner's own environment. */
function urllib3Python(): { executable: string; version: string } {
  const r = spawnSync('python3', ['-c', 'import sys, urllib3; print(sys.executable); print(urllib3.__version__)'], { encoding: 'utf8', timeout: 15_000 });
  const [executable = '', version = ''] = r.stdout.trim().split('\n');
  // HTTPS proxies (proxy_ssl_context) came in urllib3 1.26: Debian 12's python3-urllib3 (.ci/run installs it).
  const [major = 0, minor = 0] = version.split('.').map(Number);
  if (r.status !== 0 || major < 1 || (major === 1 && minor < 26)) throw new Error(`these tests need Python with urllib3 1.26 or later on PATH (python3 -c 'import urllib3'): ${r.stderr.trim()}`);
  return { executable, version };
}
const PYTHON = urllib3Python();
console.log(`client matrix: ${clientVersion('curl') ?? 'curl not installed'}; undici ProxyAgent on Node ${process.version}; urllib3 ${PYTHON.version} (${PYTHON.executable})`);

// argv: proxy URL, target URL, CA file (for the proxy and the origin), cert file, key file, grant:token
// ('' for none). One JSON line: the status and body, or the exception.
const URLLIB3 = `
import json, ssl, sys, urllib3
proxy, url, cafile, cert, key, userpass = sys.argv[1:7]
ctx = ssl.create_default_context(cafile=cafile)
if cert:
    ctx.load_cert_chain(cert, key)
headers = urllib3.make_headers(proxy_basic_auth=userpass) if userpass else None
# An http:// URL is forwarded to the proxy over a connection urllib3 builds like one to an origin: it
# takes the pool's ssl_context, not proxy_ssl_context (urllib3/urllib3#2577), so the certificate goes there too.
forwarded = {'ssl_context': ctx} if url.startswith('http://') else {}
pm = urllib3.ProxyManager(proxy, proxy_ssl_context=ctx, proxy_headers=headers, ca_certs=cafile, timeout=10.0, retries=False, **forwarded)
try:
    r = pm.request('GET', url)
    print(json.dumps({'status': r.status, 'body': r.data.decode()}))
except Exception as e:
    print(json.dumps({'error': type(e).__name__, 'message': str(e)}))
`;

type Identity = 'token' | 'certificate';
type Mode = 'tunnel' | 'plain';

interface Fetched {
  readonly status: number | undefined;
  readonly body: string | undefined;
  /** Why the client failed, for the assertion message only. */
  readonly error?: string;
}

let pki: ClientPki;
let http: Origin;
let https: Origin;
let sluice: TestSluice;
const ports: Record<Identity, number> = { token: 0, certificate: 0 };

afterAll(cleanupClients);

beforeAll(async () => {
  pki = createClientPki();
  http = await startHttpOrigin();
  https = await startHttpsOrigin({ caPem: pki.serverCa.certPem, caFile: pki.serverCa.certFile, certPem: pki.server.certPem, keyPem: pki.server.keyPem });
  const destinations = [`http://127.0.0.1:${http.port}`, `https://127.0.0.1:${https.port}`];
  const serverFiles = { certFile: pki.server.certFile, keyFile: pki.server.keyFile };
  sluice = await startSluice({
    listeners: [
      { name: 'tls-token', listen: '127.0.0.1:0', identify: 'token', tls: serverFiles },
      { name: 'tls-certificate', listen: '127.0.0.1:0', identify: 'certificate', tls: { ...serverFiles, clientCaFile: pki.clientCa.certFile, crlFile: pki.crlFile } },
    ],
    grants: [
      { id: TOKEN_GRANT, tokenSha256: tokenHash(TOKEN), destinations, allowAddressClasses: ['loopback'] },
      { id: CERT_GRANT, clientCertificate: { uriSan: AGENT_URI }, destinations, allowAddressClasses: ['loopback'] },
    ],
  });
  const portOf = (name: string): number => {
    const address = sluice.app.listeners.find((l) => l.name === name)?.address ?? '';
    return Number(address.slice(address.lastIndexOf(':') + 1));
  };
  ports.token = portOf('tls-token');
  ports.certificate = portOf('tls-certificate');
});

afterAll(async () => {
  await sluice?.close();
  await http?.close();
  await https?.close();
  pki?.cleanup();
});

const proxyUrl = (identity: Identity): string => `https://127.0.0.1:${ports[identity]}`;
const targetUrl = (mode: Mode, path: string): string => (mode === 'tunnel' ? `${https.url}${path}` : `${http.url}${path}`);
const agentCert = (): IssuedCertificate => pki.agentA;

async function viaCurl(identity: Identity, mode: Mode, url: string): Promise<Fetched> {
  const auth =
    identity === 'certificate'
      ? ['--proxy-cert', agentCert().certFile, '--proxy-key', agentCert().keyFile]
      : mode === 'tunnel'
        ? ['--proxy-header', `Proxy-Authorization: Bearer ${TOKEN}`]
        : ['--proxy-user', `${TOKEN_GRANT}:${TOKEN}`];
  const r = await runCurl(['-i', '--max-time', '10', '--proxy', proxyUrl(identity), '--proxy-cacert', pki.serverCa.certFile, ...auth, '--cacert', pki.serverCa.certFile, url]);
  if (r.code !== 0) return { status: undefined, body: undefined, error: `curl exit ${String(r.code)}: ${r.stderr}` };
  const response = curlHeadersAndBody(r.stdout);
  return { status: response.status, body: response.body };
}

async function viaUndici(identity: Identity, _mode: Mode, url: string): Promise<Fetched> {
  const agent = new ProxyAgent({
    uri: proxyUrl(identity),
    // The listener's certificate names 127.0.0.1 and localhost; an IP address is no TLS server name (RFC 6066 §3).
    proxyTls: { ca: pki.serverCa.certPem, servername: 'localhost', ...(identity === 'certificate' ? { cert: agentCert().certPem, key: agentCert().keyPem } : {}) },
    requestTls: { ca: pki.serverCa.certPem },
    ...(identity === 'token' ? { token: `Bearer ${TOKEN}` } : {}),
  });
  try {
    const r = await request(url, { dispatcher: agent, signal: AbortSignal.timeout(10_000) });
    return { status: r.statusCode, body: await r.body.text() };
  } catch (error) {
    return { status: undefined, body: undefined, error: String(error) };
  } finally {
    await agent.close();
  }
}

async function viaUrllib3(identity: Identity, _mode: Mode, url: string): Promise<Fetched> {
  const cert = identity === 'certificate' ? [agentCert().certFile, agentCert().keyFile] : ['', ''];
  const userpass = identity === 'token' ? `${TOKEN_GRANT}:${TOKEN}` : '';
  const r = await runClient(PYTHON.executable, ['-c', URLLIB3, proxyUrl(identity), url, pki.serverCa.certFile, ...cert, userpass]);
  try {
    const out = JSON.parse(r.stdout) as { status?: number; body?: string; error?: string; message?: string };
    return { status: out.status, body: out.body, ...(out.error === undefined ? {} : { error: `${out.error}: ${out.message ?? ''}` }) };
  } catch {
    return { status: undefined, body: undefined, error: `python exit ${String(r.code)}: ${r.stderr}` };
  }
}

const CLIENTS = { curl: viaCurl, undici: viaUndici, urllib3: viaUrllib3 } as const;
type Client = keyof typeof CLIENTS;

/** The hops each client makes, as `METHOD rule`: undici tunnels even an http:// URL (a mediated tunnel). */
function expectedHops(client: Client, mode: Mode): string[] {
  if (mode === 'tunnel') return [`CONNECT https://127.0.0.1:${https.port}`];
  const get = `GET http://127.0.0.1:${http.port}`;
  return client === 'undici' ? [`CONNECT http://127.0.0.1:${http.port}`, get] : [get];
}

const cases = (Object.keys(CLIENTS) as Client[]).flatMap((client) =>
  (['token', 'certificate'] as const).flatMap((identity) => (['tunnel', 'plain'] as const).map((mode) => [client, identity, mode] as const)),
);

describe('real clients through a TLS listener', () => {
  it.each(cases)('%s on the %s listener: %s', async (client, identity, mode) => {
    const path = `/${client}-${identity}-${mode}`;
    const origin = mode === 'tunnel' ? https : http;
    const from = sluice.decisions().length;
    const fetched = await CLIENTS[client](identity, mode, targetUrl(mode, path));
    expect(fetched, fetched.error).toMatchObject({ status: 200, body: `origin:GET:${path}` });

    // What reached the origin: the request, and never a Proxy-Authorization.
    const reached = origin.requests.filter((r) => r.url === path);
    expect(reached).toHaveLength(1);
    expect(reached[0]?.headers['proxy-authorization']).toBeUndefined();

    // What Sluice decided: every hop granted, for the listener's principal, identified the listener's way.
    const hops = expectedHops(client, mode);
    await waitUntil(() => sluice.decisions().length >= from + hops.length, { timeoutMs: 3000, label: `${hops.length} decision(s)` });
    const decisions: DecisionRecordV1[] = sluice.decisions().slice(from);
    expect(decisions.map((d) => `${d.method} ${d.rule ?? ''}`)).toEqual(hops);
    const listener = identity === 'token' ? 'tls-token' : 'tls-certificate';
    const principal = identity === 'token' ? TOKEN_GRANT : CERT_GRANT;
    for (const d of decisions) expect(d).toMatchObject({ listener, decision: 'allow', reason: 'granted', principal, via: identity });
  });
});
