// Client compatibility matrix: Python 3 urllib.request with HTTP_PROXY / HTTPS_PROXY carrying
// grant:token as userinfo. urllib sends Basic on the first request (absolute form for http://, in the
// CONNECT for https://). A denied http:// URL raises HTTPError 403 with Sluice's headers and body; a
// denied https:// URL raises URLError "Tunnel connection failed: 403 Forbidden".
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanupClients, clientVersion, GRANT, runClient, startMatrix, type Matrix } from '../support/clients.js';

console.log(`client matrix: ${clientVersion('python3') ?? 'python3 not installed'}`);

// Fetches argv[1] with the system proxy settings (urllib reads them from the environment) and trusts
// the CA file argv[2]; prints one JSON line describing the outcome.
const SCRIPT = `
import json, ssl, sys, urllib.error, urllib.request
url, cafile = sys.argv[1], sys.argv[2]
ctx = ssl.create_default_context(cafile=cafile)
try:
    with urllib.request.urlopen(url, context=ctx, timeout=10) as r:
        print(json.dumps({'status': r.status, 'body': r.read().decode(), 'headers': {k.lower(): v for k, v in r.headers.items()}}))
except urllib.error.HTTPError as e:
    print(json.dumps({'status': e.code, 'body': e.read().decode(), 'headers': {k.lower(): v for k, v in e.headers.items()}}))
except Exception as e:
    print(json.dumps({'error': type(e).__name__, 'message': str(e)}))
`;

interface Outcome {
  status?: number;
  body?: string;
  headers?: Record<string, string>;
  error?: string;
  message?: string;
}

// Kill any client still running and remove temporary profiles, clones and HOME after the whole file.
afterAll(cleanupClients);

describe('python3 urllib through Sluice', () => {
  let m: Matrix;
  let env: Record<string, string>;
  beforeAll(async () => {
    m = await startMatrix();
    env = { HTTP_PROXY: m.proxyUrl, HTTPS_PROXY: m.proxyUrl };
  });
  afterAll(async () => {
    await m?.close();
  });

  async function urlopen(url: string): Promise<Outcome> {
    const r = await runClient('python3', ['-c', SCRIPT, url, m.pki.caFile], { env });
    expect(r.stderr).toBe('');
    return JSON.parse(r.stdout) as Outcome;
  }

  it('HTTP: HTTP_PROXY=http://grant:token@… (absolute form, Basic on the first request)', async () => {
    const start = m.sluice.decisions().length;
    const r = await urlopen(m.httpUrl('/py-http'));
    expect(r).toMatchObject({ status: 200, body: 'origin:GET:/py-http' });
    expect(m.http.requests.at(-1)?.headers['proxy-authorization']).toBeUndefined();
    expect(m.sluice.decisions().slice(start).map((d) => `${d.method} ${d.reason} ${d.via}`)).toEqual(['GET granted token']);
  });

  it('HTTPS: HTTPS_PROXY=http://grant:token@… (CONNECT, ssl.create_default_context(cafile=…))', async () => {
    const start = m.sluice.decisions().length;
    const r = await urlopen(m.httpsUrl('/py-https'));
    expect(r).toMatchObject({ status: 200, body: 'origin:GET:/py-https' });
    expect(m.sluice.decisions().slice(start).map((d) => `${d.method} ${d.reason} ${d.via} ${d.principal}`)).toEqual([`CONNECT granted token ${GRANT}`]);
  });

  it('HTTP denied: HTTPError 403 carrying Proxy-Status and Sluice’s body', async () => {
    const before = m.http.connections;
    const r = await urlopen(m.deniedHttpUrl('/nope'));
    expect(r.status).toBe(403);
    expect(r.headers?.['proxy-status']).toBe('sluice; error=http_request_denied; details="destination_not_granted"');
    expect(r.body).toContain('sluice: 403 destination_not_granted');
    expect(m.http.connections).toBe(before);
  });

  it('HTTPS denied: URLError "Tunnel connection failed: 403 Forbidden"', async () => {
    const before = m.https.connections;
    const r = await urlopen(m.deniedHttpsUrl('/nope'));
    expect(r).toEqual({ error: 'URLError', message: '<urlopen error Tunnel connection failed: 403 Forbidden>' });
    expect(m.https.connections).toBe(before);
    expect(m.decisionsFor('deny.test').at(-1)).toMatchObject({ method: 'CONNECT', reason: 'destination_not_granted' });
  });
});
