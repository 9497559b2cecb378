// TLS at Sluice behind a real haproxy in TCP mode (issue 28, docs/remote-sandboxes.md): haproxy sends
// the PROXY v2 header (send-proxy-v2) and passes the TLS bytes through untouched, so the handshake, the
// client certificate and the token all reach Sluice, and haproxy never sees a token. What must hold: the
// principal is the certificate's (or the token's) grant, the audit source is the client's own address
// that haproxy carried (the client connects from 127.0.0.2, haproxy from 127.0.0.1), and a client
// certificate from another CA still fails the handshake at Sluice.
// Skipped only when haproxy is not installed (.ci/run installs it).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClientPki, type ClientPki } from '../support/client-pki.js';
import { runCurl } from '../support/curl.js';
import { startHttpOrigin, type Origin } from '../support/origins.js';
import { unusedPort } from '../support/ports.js';
import { startSluice, tokenHash, type TestSluice } from '../support/sluice.js';
import { killGroup } from '../support/sluice-process.js';
import { waitUntil } from '../support/wait.js';

const HAPROXY = '/usr/sbin/haproxy';
const hasHaproxy = fs.existsSync(HAPROXY) && spawnSync(HAPROXY, ['-v']).status === 0;
const TOKEN = 'tok-haproxy-tls-83c1';

describe.skipIf((!hasHaproxy && process.env['CI'] !== 'true') || process.platform !== 'linux')('TLS at Sluice behind haproxy in TCP mode (send-proxy-v2)', () => {
  let pki: ClientPki;
  let origin: Origin;
  let sluice: TestSluice;
  let haproxy: ChildProcess | null = null;
  let dir: string;
  const front: Record<string, number> = {};

  beforeAll(async () => {
    pki = createClientPki();
    origin = await startHttpOrigin();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-haproxy-tls-'));
    const server = { certFile: pki.server.certFile, keyFile: pki.server.keyFile };
    const behindLb = { proxyProtocol: { trustedSources: ['127.0.0.1/32'] } };
    const destinations = [`http://127.0.0.1:${origin.port}`, `https://127.0.0.1:${origin.port}`];
    sluice = await startSluice({
      listeners: [
        { name: 'tls-token', listen: '127.0.0.1:0', identify: 'token', tls: server, ...behindLb },
        { name: 'tls-cert', listen: '127.0.0.1:0', identify: 'certificate', tls: { ...server, clientCaFile: pki.clientCa.certFile }, ...behindLb },
      ],
      grants: [
        { id: 'by-token', tokenSha256: tokenHash(TOKEN), destinations, allowAddressClasses: ['loopback'] },
        { id: 'by-cert', clientCertificate: { uriSan: 'spiffe://sluice.test/agent-a' }, destinations, allowAddressClasses: ['loopback'] },
      ],
    });
    const port = (name: string): number => {
      const address = sluice.app.listeners.find((l) => l.name === name)?.address ?? '';
      return Number(address.slice(address.lastIndexOf(':') + 1));
    };
    front['tls-token'] = await unusedPort();
    front['tls-cert'] = await unusedPort();
    const cfg = path.join(dir, 'haproxy.cfg');
    fs.writeFileSync(
      cfg,
      [
        'defaults',
        '  mode tcp',
        '  timeout connect 2s',
        '  timeout client 10s',
        '  timeout server 10s',
        ...['tls-token', 'tls-cert'].flatMap((name) => [`frontend fe-${name}`, `  bind 127.0.0.1:${front[name]}`, `  default_backend be-${name}`, `backend be-${name}`, `  server s 127.0.0.1:${port(name)} send-proxy-v2`]),
        '',
      ].join('\n'),
    );
    const checked = spawnSync(HAPROXY, ['-c', '-f', cfg], { encoding: 'utf8' });
    if (checked.status !== 0) throw new Error(`haproxy -c: ${checked.stdout}${checked.stderr}`);
    haproxy = spawn(HAPROXY, ['-db', '-f', cfg], { cwd: dir, stdio: 'ignore', detached: true });
    // haproxy is up once both frontends accept a connection.
    const accepts = (port: number): Promise<boolean> =>
      new Promise((resolve) => {
        const socket = net.connect(port, '127.0.0.1');
        socket.once('connect', () => {
          socket.destroy();
          resolve(true);
        });
        socket.once('error', () => resolve(false));
      });
    await waitUntil(async () => (await accepts(front['tls-token']!)) && (await accepts(front['tls-cert']!)), { timeoutMs: 10_000, label: 'haproxy accepts on both frontends' });
  }, 60_000);

  afterAll(async () => {
    if (haproxy !== null) killGroup(haproxy);
    await sluice?.close();
    await origin?.close();
    pki?.cleanup();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const curl = (name: string, extra: string[], pathName: string) =>
    runCurl(['--interface', '127.0.0.2', '-p', '-x', `https://127.0.0.1:${front[name]}`, '--proxy-cacert', pki.serverCa.certFile, ...extra, '-o', '/dev/null', '-w', '%{http_code}', `http://127.0.0.1:${origin.port}${pathName}`], { timeoutMs: 15_000 });

  it('a token over TLS through haproxy: the grant of the token, audited with the client’s own address', async () => {
    const from = sluice.decisions().length;
    const r = await curl('tls-token', ['--proxy-header', `Proxy-Authorization: Bearer ${TOKEN}`], '/via-lb-token');
    expect(r.stdout).toBe('200');
    expect(origin.requests.some((q) => q.url === '/via-lb-token' && q.headers['proxy-authorization'] === undefined)).toBe(true);
    await waitUntil(() => sluice.decisions().length > from, { timeoutMs: 3000, label: 'the decision' });
    expect(sluice.decisions().slice(from)[0]).toMatchObject({ listener: 'tls-token', decision: 'allow', principal: 'by-token', via: 'token', source: '127.0.0.2' });
  });

  it('a client certificate through haproxy: the grant that names it, audited with the client’s own address', async () => {
    const from = sluice.decisions().length;
    const r = await curl('tls-cert', ['--proxy-cert', pki.agentA.certFile, '--proxy-key', pki.agentA.keyFile], '/via-lb-cert');
    expect(r.stdout).toBe('200');
    await waitUntil(() => sluice.decisions().length > from, { timeoutMs: 3000, label: 'the decision' });
    expect(sluice.decisions().slice(from)[0]).toMatchObject({ listener: 'tls-cert', decision: 'allow', principal: 'by-cert', via: 'certificate', source: '127.0.0.2' });
  });

  it('a certificate from another CA with the same URI SAN fails the handshake at Sluice, behind haproxy too', async () => {
    const from = sluice.decisions().length;
    const r = await curl('tls-cert', ['--proxy-cert', pki.foreign.certFile, '--proxy-key', pki.foreign.keyFile], '/forged');
    expect(r.stdout).not.toBe('200');
    expect(origin.requests.some((q) => q.url === '/forged')).toBe(false);
    await waitUntil(() => sluice.decisions().length > from, { timeoutMs: 3000, label: 'the refusal' });
    expect(sluice.decisions().slice(from)[0]).toMatchObject({ listener: 'tls-cert', decision: 'deny', reason: 'tls_handshake_failed', principal: null, source: '127.0.0.2' });
  });
});
