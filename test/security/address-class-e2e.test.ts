// Threat: SSRF into loopback, private and link-local space by spelling a forbidden address so that a
// naive string check passes (WHATWG IPv4 number forms, IPv4-mapped/NAT64 IPv6, trailing-dot names).
// Sources: smokescreen's classifier and its GHSA-8rmm-gm28-pj8q, RFC 4291 §2.5.5, RFC 6052, WHATWG URL
// §3.5 (IPv4 parser). Even an unrestricted grant may not reach those classes without allowing them, and
// the origin must see no connection at all.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import net from 'node:net';
import { startHttpOrigin, type Origin } from '../support/origins.js';
import { runCurl, curlHeadersAndBody } from '../support/curl.js';
import { openConnectTunnel } from '../support/raw-client.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';

const TOKEN = 'tok-ssrf';

describe('address classes end to end', () => {
  let origin: Origin;
  let sluice: TestSluice;
  let loopbackGranted: TestSluice;

  beforeAll(async () => {
    origin = await startHttpOrigin();
    const lookup = tableLookup({ localhost: ['127.0.0.1', '::1'], 'rebind.test': ['127.0.0.1'], 'meta.test': ['169.254.169.254'] });
    sluice = await startSluice({ grants: [{ id: 'u', tokenSha256: tokenHash(TOKEN), unrestricted: true }] }, { lookup });
    loopbackGranted = await startSluice(
      { grants: [{ id: 'u', tokenSha256: tokenHash(TOKEN), unrestricted: true, allowAddressClasses: ['loopback'] }] },
      { lookup },
    );
  });
  afterAll(async () => {
    await sluice?.close();
    await loopbackGranted?.close();
    await origin?.close();
  });

  const spellings = (port: number): string[] => [
    `http://127.0.0.1:${port}/`,
    `http://127.1:${port}/`,
    `http://0x7f.1:${port}/`,
    `http://2130706433:${port}/`,
    `http://0177.0.0.1:${port}/`,
    `http://localhost:${port}/`,
    `http://localhost.:${port}/`,
    `http://[::1]:${port}/`,
    `http://[::ffff:7f00:1]:${port}/`,
    `http://[::ffff:127.0.0.1]:${port}/`,
    `http://[64:ff9b::7f00:1]:${port}/`,
    `http://[::127.0.0.1]:${port}/`,
  ];

  it('refuses every loopback spelling in absolute form with 403 address_class_denied and no origin connection', async () => {
    const before = origin.connections;
    for (const url of spellings(origin.port)) {
      const result = await runCurl(['-i', '--globoff', '--proxy', `http://u:${TOKEN}@127.0.0.1:${sluice.port}`, url]);
      const response = curlHeadersAndBody(result.stdout);
      expect.soft(response.status, url).toBe(403);
      expect.soft(response.headers['proxy-status'], url).toContain('details="address_class_denied"');
    }
    expect(origin.connections).toBe(before);
  });

  it('refuses the same spellings as CONNECT targets', async () => {
    const before = origin.connections;
    const auth = { 'Proxy-Authorization': `Bearer ${TOKEN}` };
    for (const target of ['127.1', '0x7f.1', '2130706433', 'localhost.', '[::ffff:7f00:1]', '[64:ff9b::7f00:1]']) {
      const tunnel = await openConnectTunnel(sluice.port, `${target}:${origin.port}`, auth);
      expect.soft(tunnel.status, target).toBe(403);
      tunnel.socket.destroy();
    }
    expect(origin.connections).toBe(before);
  });

  it('never dials 0.0.0.0 (Linux routes it to loopback), even with every class granted', async () => {
    const result = await runCurl(['-i', '--proxy', `http://u:${TOKEN}@127.0.0.1:${loopbackGranted.port}`, `http://0:${origin.port}/`]);
    expect(curlHeadersAndBody(result.stdout).headers['proxy-status']).toContain('details="address_class_denied"');
  });

  it('refuses cloud metadata (169.254.169.254, link_local) by name without ever dialing it', async () => {
    const result = await runCurl(['-i', '--proxy', `http://u:${TOKEN}@127.0.0.1:${sluice.port}`, 'http://meta.test/latest/meta-data/']);
    expect(curlHeadersAndBody(result.stdout).status).toBe(403);
    expect(sluice.decisions().at(-1)).toMatchObject({ reason: 'address_class_denied', addresses: [{ address: '169.254.169.254', class: 'link_local', allowed: false }] });
  });

  it('reaches loopback once the grant allows the class', async () => {
    const result = await runCurl(['--proxy', `http://u:${TOKEN}@127.0.0.1:${loopbackGranted.port}`, `http://127.1:${origin.port}/ok`]);
    expect(result.stdout).toBe('origin:GET:/ok');
  });

  it('refuses Sluice itself (class self) by every spelling, whatever the grant allows', async () => {
    for (const host of ['127.0.0.1', '127.1', 'localhost', '[::ffff:127.0.0.1]', '127.0.0.2']) {
      const result = await runCurl(['-i', '--globoff', '--proxy', `http://u:${TOKEN}@127.0.0.1:${loopbackGranted.port}`, `http://${host}:${loopbackGranted.port}/`]);
      expect.soft(curlHeadersAndBody(result.stdout).headers['proxy-status'], host).toContain('details="address_self"');
    }
  });
});

describe('a name with a mixed answer set', () => {
  it('dials only the allowed address, never the forbidden one listed first', async () => {
    const good = await startHttpOrigin();
    // A trap on 127.0.0.2 at the same port: the forbidden answer. It must never see a connection.
    const trap = net.createServer((s) => s.destroy());
    let trapped = 0;
    trap.on('connection', () => (trapped += 1));
    await new Promise<void>((resolve) => trap.listen(good.port, '127.0.0.2', resolve));
    const sluice = await startSluice(
      { grants: [{ id: 'm', tokenSha256: tokenHash(TOKEN), destinations: [`http://mixed.test:${good.port}`], allowAddresses: ['127.0.0.1/32'] }] },
      { lookup: tableLookup({ 'mixed.test': ['127.0.0.2', '127.0.0.1'] }) },
    );
    try {
      const result = await runCurl(['--proxy', `http://m:${TOKEN}@127.0.0.1:${sluice.port}`, `http://mixed.test:${good.port}/x`]);
      expect(result.stdout).toBe('origin:GET:/x');
      expect(trapped).toBe(0);
      expect(sluice.decisions().at(-1)).toMatchObject({
        pinned: '127.0.0.1',
        addresses: [
          { address: '127.0.0.2', class: 'loopback', allowed: false },
          { address: '127.0.0.1', class: 'loopback', allowed: true },
        ],
      });
    } finally {
      await sluice.close();
      await good.close();
      await new Promise<void>((resolve) => trap.close(() => resolve()));
    }
  });
});
