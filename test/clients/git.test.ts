// Client compatibility matrix: `git clone` (smart HTTP, served by `git http-backend`) through
// http_proxy / https_proxy with grant:token as userinfo. git's libcurl defaults to
// http.proxyAuthMethod=anyauth: it asks without credentials first and answers Sluice's 407
// (Proxy-Authenticate: Basic realm="sluice") with Basic, then keeps sending Basic.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { createTestPki } from '../support/pki.js';
import { cleanupClients, clientVersion, GRANT, runClient, startGitOrigin, startMatrix, tempDir, type ClientResult, type GitOrigin, type Matrix } from '../support/clients.js';

console.log(`client matrix: ${clientVersion('git') ?? 'git not installed'}`);

// Kill any client still running and remove temporary profiles, clones and HOME after the whole file.
afterAll(cleanupClients);

describe('git clone through Sluice', () => {
  let m: Matrix;
  let plain: GitOrigin;
  let tls: GitOrigin;
  let work: string;
  beforeAll(async () => {
    plain = await startGitOrigin();
    tls = await startGitOrigin(createTestPki(['app.test', 'deny.test']));
    m = await startMatrix({ extraDestinations: () => [`http://app.test:${plain.port}`, `https://app.test:${tls.port}`] });
    work = tempDir('git-clone');
  });
  afterAll(async () => {
    await m?.close();
    await plain?.close();
    await tls?.close();
    if (work !== undefined) fs.rmSync(work, { recursive: true, force: true });
  });

  let n = 0;
  function clone(url: string, config: string[] = []): Promise<ClientResult & { dir: string }> {
    n += 1;
    const dir = path.join(work, `clone-${n}`);
    const env = {
      http_proxy: m.proxyUrl,
      https_proxy: m.proxyUrl,
      GIT_SSL_CAINFO: m.pki.caFile,
      GIT_TERMINAL_PROMPT: '0',
      GIT_CONFIG_NOSYSTEM: '1',
    };
    return runClient('git', [...config, 'clone', '--quiet', url, dir], { env, timeoutMs: 30_000 }).then((r) => ({ ...r, dir }));
  }

  it('HTTP: http_proxy=http://grant:token@… clones; git answers the 407 challenge with Basic', async () => {
    const start = m.sluice.decisions().length;
    const r = await clone(`http://app.test:${plain.port}/repo.git`);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(fs.readFileSync(path.join(r.dir, 'README'), 'utf8')).toBe('readme\n');
    expect(plain.requests.map((q) => q.method)).toEqual(expect.arrayContaining(['GET', 'POST']));
    expect(plain.requests.some((q) => q.proxyAuthorization)).toBe(false);
    const mine = m.sluice.decisions().slice(start);
    expect(mine[0]).toMatchObject({ method: 'GET', reason: 'token_missing', status: 407 });
    expect(mine.slice(1).every((d) => d.reason === 'granted' && d.principal === GRANT)).toBe(true);
    expect(mine.slice(1).map((d) => d.method)).toContain('POST');
  });

  it('HTTPS: https_proxy=http://grant:token@… clones through CONNECT (GIT_SSL_CAINFO)', async () => {
    const start = m.sluice.decisions().length;
    const r = await clone(`https://app.test:${tls.port}/repo.git`);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(fs.readFileSync(path.join(r.dir, 'README'), 'utf8')).toBe('readme\n');
    const mine = m.sluice.decisions().slice(start).map((d) => `${d.method} ${d.reason}`);
    expect(mine[0]).toBe('CONNECT token_missing');
    expect(mine.slice(1)).toContain('CONNECT granted');
  });

  it('-c http.proxyAuthMethod=basic sends Basic on the first request (no 407 round trip)', async () => {
    const start = m.sluice.decisions().length;
    const r = await clone(`http://app.test:${plain.port}/repo.git`, ['-c', 'http.proxyAuthMethod=basic']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const mine = m.sluice.decisions().slice(start);
    expect(mine.length).toBeGreaterThan(0);
    expect(mine.every((d) => d.reason === 'granted' && d.via === 'token')).toBe(true);
  });

  it('HTTP denied: "The requested URL returned error: 403", with Sluice’s body as a remote: line', async () => {
    const before = plain.connections;
    const r = await clone(`http://deny.test:${plain.port}/repo.git`);
    expect(r.code).toBe(128);
    expect(r.stderr).toContain('remote: sluice: 403 destination_not_granted');
    expect(r.stderr).toContain('The requested URL returned error: 403');
    expect(plain.connections).toBe(before);
  });

  it('HTTPS denied: "CONNECT tunnel failed, response 403"', async () => {
    const before = tls.connections;
    const r = await clone(`https://deny.test:${tls.port}/repo.git`);
    expect(r.code).toBe(128);
    expect(r.stderr).toContain('CONNECT tunnel failed, response 403');
    expect(tls.connections).toBe(before);
    expect(m.decisionsFor('deny.test').at(-1)).toMatchObject({ method: 'CONNECT', reason: 'destination_not_granted' });
  });
});
