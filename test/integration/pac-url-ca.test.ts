// A PAC URL served over https by a server whose certificate chains to the enterprise CA (issue 17,
// item 8): trusted with route.pac.caFile, refused without it, and caFile never turns off the name check
// (RFC 9110 section 4.3.4: the certificate must name the host the URL names). A PAC that cannot be
// fetched fails every hop closed with pac_unavailable; the origin sees nothing (scenario 7).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { curlHeadersAndBody, runCurl } from '../support/curl.js';
import { startHttpOrigin, startHttpsOrigin, type Origin } from '../support/origins.js';
import { createTestPki } from '../support/pki.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';

const TOKEN = 'tok-pac-ca';

describe('route.pac.url over https with route.pac.caFile', () => {
  let origin: Origin;
  const cleanups: (() => Promise<void>)[] = [];
  let dir: string;

  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-pac-ca-'));
    return () => fs.rmSync(dir, { recursive: true, force: true });
  });
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  /** An https PAC server on 127.0.0.1 whose leaf certificate names `names`, signed by the test CA. */
  async function startPacServer(names: string[]): Promise<{ url: string; caFile: string; server: Origin }> {
    const pki = createTestPki(names);
    const server = await startHttpsOrigin(pki, {
      handler: (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/x-ns-proxy-autoconfig' });
        res.end('function FindProxyForURL(url, host) { return "DIRECT"; }');
      },
    });
    cleanups.push(() => server.close());
    return { url: `https://127.0.0.1:${server.port}/proxy.pac`, caFile: pki.caFile, server };
  }

  async function sluiceWith(pac: Record<string, unknown>): Promise<TestSluice> {
    origin = await startHttpOrigin();
    cleanups.push(() => origin.close());
    const s = await startSluice(
      {
        route: { mode: 'pac', pac },
        grants: [{ id: 'p', tokenSha256: tokenHash(TOKEN), destinations: [`http://direct.test:${origin.port}`], allowAddressClasses: ['loopback'] }],
      },
      { lookup: tableLookup({ 'direct.test': ['127.0.0.1'] }) },
    );
    cleanups.push(() => s.close());
    return s;
  }

  async function get(s: TestSluice): Promise<ReturnType<typeof curlHeadersAndBody>> {
    return curlHeadersAndBody((await runCurl(['-i', '--proxy', `http://p:${TOKEN}@127.0.0.1:${s.port}`, `http://direct.test:${origin.port}/x`])).stdout);
  }

  it('loads the PAC when caFile names the CA that signed the server certificate', async () => {
    const pac = await startPacServer(['127.0.0.1']);
    const s = await sluiceWith({ url: pac.url, caFile: pac.caFile });
    const r = await get(s);
    expect(r.status).toBe(200);
    expect(r.body).toBe('origin:GET:/x');
    expect(pac.server.requests.map((q) => q.url)).toEqual(['/proxy.pac']);
  });

  it('fails closed with pac_unavailable without caFile: the system roots do not know the enterprise CA', async () => {
    const pac = await startPacServer(['127.0.0.1']);
    const s = await sluiceWith({ url: pac.url });
    const r = await get(s);
    expect(r.status).toBe(502);
    expect(r.headers['proxy-status']).toContain('details="pac_unavailable"');
    expect(origin.connections).toBe(0);
    // The handshake failed, so no PAC request was ever made.
    expect(pac.server.requests).toEqual([]);
  });

  it('still checks the name: a certificate from the CA for another host is refused', async () => {
    const pac = await startPacServer(['pac.other.test']);
    const s = await sluiceWith({ url: pac.url, caFile: pac.caFile });
    const r = await get(s);
    expect(r.status).toBe(502);
    expect(r.headers['proxy-status']).toContain('details="pac_unavailable"');
    expect(origin.connections).toBe(0);
  });

  it('refuses a caFile that holds no certificate as a config error naming route.pac', async () => {
    const pac = await startPacServer(['127.0.0.1']);
    const bogus = path.join(dir, 'not-a-ca.pem');
    fs.writeFileSync(bogus, 'hello\n');
    await expect(sluiceWith({ url: pac.url, caFile: bogus })).rejects.toThrow(/route\.pac: caFile holds no PEM certificate/);
  });
});
