// Chaining under a real corporate proxy (Squid 5, Basic auth via basic_ncsa_auth): tunnels and plain
// HTTP travel through it with the canonical host name, the decision is recorded as unattested, and a
// route Sluice cannot honour (407, dead proxy, untrusted TLS) fails closed with no direct attempt
// (principles A2, A6 in docs/principles.md; docs/scenarios.md scenario 7). In CI Squid is installed by
// .ci/run, so these never skip there.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTestPki } from '../support/pki.js';
import { startHttpOrigin, startHttpsOrigin, type Origin } from '../support/origins.js';
import { runCurl, curlHeadersAndBody, expectBothRefused } from '../support/curl.js';
import { squidAvailable, startSquid, waitForLog, type Squid } from '../support/squid.js';
import { startTlsFront, TLS_FRONT_NAMES, type TlsFront } from '../support/tls-front.js';
import { unusedPort } from '../support/ports.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';

const TOKEN = 'tok-upstream';
const ORIGIN_PKI = createTestPki(['origin.test']);
const FRONT_PKI = createTestPki(TLS_FRONT_NAMES);

describe.skipIf(!squidAvailable() && process.env.CI !== 'true')('upstream proxy route through a real Squid', () => {
  let http: Origin;
  let https: Origin;
  let squid: Squid;
  let front: TlsFront;
  let dir: string;
  let goodCreds: string;
  let badCreds: string;
  const started: TestSluice[] = [];

  beforeAll(async () => {
    http = await startHttpOrigin();
    https = await startHttpsOrigin(ORIGIN_PKI);
    squid = await startSquid({ hosts: { 'origin.test': '127.0.0.1' }, users: { alice: 's3cret' } });
    front = await startTlsFront(FRONT_PKI, squid.port);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-upstream-'));
    goodCreds = path.join(dir, 'good.txt');
    badCreds = path.join(dir, 'bad.txt');
    fs.writeFileSync(goodCreds, 'alice:s3cret\n');
    fs.writeFileSync(badCreds, 'alice:wrong\n');
  });
  afterAll(async () => {
    await Promise.all(started.map((s) => s.close()));
    await front?.close();
    await squid?.close();
    await http?.close();
    await https?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  async function sluiceWith(proxy: Record<string, unknown>, grant: Record<string, unknown> = {}, local: Record<string, string[]> = {}): Promise<TestSluice> {
    const s = await startSluice(
      {
        route: { mode: 'proxy', proxy },
        grants: [{ id: 'g', tokenSha256: tokenHash(TOKEN), destinations: [`https://origin.test:${https.port}`, `http://origin.test:${http.port}`], ...grant }],
      },
      // Behind a corporate proxy the destination usually does not resolve locally: empty table by default.
      { lookup: tableLookup(local) },
    );
    started.push(s);
    return s;
  }
  const via = (s: TestSluice): string => `http://g:${TOKEN}@127.0.0.1:${s.port}`;

  it('tunnels HTTPS through Squid with the canonical name, unattested, and curl verifies the origin end to end', async () => {
    const s = await sluiceWith({ url: squid.url, credentialsFile: goodCreds });
    const result = await runCurl(['--proxy', via(s), '--cacert', ORIGIN_PKI.caFile, `https://ORIGIN.test.:${https.port}/tunnel`]);
    expect(result.stdout).toBe('origin:GET:/tunnel');
    await waitForLog(squid, (entries) => entries.some((e) => e.method === 'CONNECT' && e.url === `origin.test:${https.port}` && e.status === 200));
    expect(s.decisions().at(-1)).toMatchObject({ reason: 'granted', route: `proxy ${squid.url}`, upstream: squid.url, attested: false, pinned: null });
  });

  it('forwards plain HTTP through Squid in absolute form, never passing the client token to Squid or the origin', async () => {
    const s = await sluiceWith({ url: squid.url, credentialsFile: goodCreds });
    const result = await runCurl(['--proxy', via(s), `http://origin.test:${http.port}/plain?x=1`]);
    expect(result.stdout).toBe('origin:GET:/plain?x=1');
    // Squid strips query strings from its log (strip_query_terms).
    const entries = await waitForLog(squid, (e) => e.some((x) => x.method === 'GET' && x.url.startsWith(`http://origin.test:${http.port}/plain`)));
    expect(entries.find((x) => x.url.includes('/plain'))?.user).toBe('alice');
    expect(http.requests.at(-1)?.headers['proxy-authorization']).toBeUndefined();
    expect(JSON.stringify(http.requests)).not.toContain(TOKEN);
  });

  it('ends the hop with upstream_auth_required on a 407 and the origin sees nothing', async () => {
    const s = await sluiceWith({ url: squid.url, credentialsFile: badCreds });
    const before = https.connections + http.connections;
    await expectBothRefused(via(s), `https://origin.test:${https.port}/`, ORIGIN_PKI.caFile, `http://origin.test:${http.port}/`, 'upstream_auth_required');
    expect(https.connections + http.connections).toBe(before);
  });

  it('answers 502 upstream_unreachable for a dead upstream and never tries the origin directly', async () => {
    const dead = await unusedPort();
    const s = await sluiceWith({ url: `http://127.0.0.1:${dead}` }, {}, { 'origin.test': ['127.0.0.1'] });
    const before = https.connections + http.connections;
    const r = curlHeadersAndBody((await runCurl(['-i', '--proxy', via(s), `http://origin.test:${http.port}/`])).stdout);
    // origin.test resolves locally to loopback here, which this grant does not allow: denied before any dial.
    expect(r.headers['proxy-status']).toContain('details="address_class_denied"');
    const s2 = await sluiceWith({ url: `http://127.0.0.1:${dead}` });
    const t = curlHeadersAndBody((await runCurl(['-i', '--proxy', via(s2), '--cacert', ORIGIN_PKI.caFile, `https://origin.test:${https.port}/`])).stdout);
    expect(t.blocks[0]?.status).toBe(502);
    expect(t.blocks[0]?.headers['proxy-status']).toContain('details="upstream_unreachable"');
    const p = curlHeadersAndBody((await runCurl(['-i', '--proxy', via(s2), `http://origin.test:${http.port}/`])).stdout);
    expect(p.status).toBe(502);
    expect(p.headers['proxy-status']).toContain('details="upstream_unreachable"');
    expect(https.connections + http.connections).toBe(before);
  });

  it('refuses a grant that requires an attested address on an upstream route', async () => {
    const s = await sluiceWith({ url: squid.url, credentialsFile: goodCreds }, { requireAttestedAddress: true });
    const r = curlHeadersAndBody((await runCurl(['-i', '--proxy', via(s), `http://origin.test:${http.port}/`])).stdout);
    expect(r.status).toBe(403);
    expect(r.headers['proxy-status']).toContain('details="route_unattested"');
  });

  it('with sendResolvedAddress sends the checked IP upstream, so the decision is attested and pinned', async () => {
    const s = await sluiceWith({ url: squid.url, credentialsFile: goodCreds, sendResolvedAddress: true }, { allowAddressClasses: ['loopback'], requireAttestedAddress: true }, { 'origin.test': ['127.0.0.1'] });
    const result = await runCurl(['--proxy', via(s), '--cacert', ORIGIN_PKI.caFile, `https://origin.test:${https.port}/pinned`]);
    expect(result.stdout).toBe('origin:GET:/pinned');
    await waitForLog(squid, (entries) => entries.some((e) => e.method === 'CONNECT' && e.url === `127.0.0.1:${https.port}`));
    expect(s.decisions().at(-1)).toMatchObject({ reason: 'granted', attested: true, pinned: '127.0.0.1' });
    const unresolvable = await sluiceWith({ url: squid.url, credentialsFile: goodCreds, sendResolvedAddress: true });
    const r = curlHeadersAndBody((await runCurl(['-i', '--proxy', via(unresolvable), `http://origin.test:${http.port}/`])).stdout);
    expect(r.headers['proxy-status']).toContain('details="dns_no_address"');
  });

  it('reaches Squid through an HTTPS upstream verified with caFile, and fails with upstream_tls_failed without it', async () => {
    const trusted = await sluiceWith({ url: `https://127.0.0.1:${front.port}`, credentialsFile: goodCreds, caFile: FRONT_PKI.caFile, inspectsTls: true });
    const ok = await runCurl(['--proxy', via(trusted), '--cacert', ORIGIN_PKI.caFile, `https://origin.test:${https.port}/over-tls`]);
    expect(ok.stdout).toBe('origin:GET:/over-tls');
    expect(trusted.decisions().at(-1)).toMatchObject({ attested: false, credentialObserving: true });
    const plainOk = await runCurl(['--proxy', via(trusted), `http://origin.test:${http.port}/over-tls-plain`]);
    expect(plainOk.stdout).toBe('origin:GET:/over-tls-plain');
    const untrusted = await sluiceWith({ url: `https://127.0.0.1:${front.port}`, credentialsFile: goodCreds });
    const bad = curlHeadersAndBody((await runCurl(['-i', '--proxy', via(untrusted), '--cacert', ORIGIN_PKI.caFile, `https://origin.test:${https.port}/`])).stdout);
    expect(bad.blocks[0]?.headers['proxy-status']).toContain('details="upstream_tls_failed"');
    const badPlain = curlHeadersAndBody((await runCurl(['-i', '--proxy', via(untrusted), `http://origin.test:${http.port}/`])).stdout);
    expect(badPlain.headers['proxy-status']).toContain('details="upstream_tls_failed"');
  });
});
