// SOCKS5 (RFC 1928, credentials RFC 1929) on the same pipeline as HTTP CONNECT, driven by real curl
// with socks5h:// (names resolved by Sluice) and socks5:// (addresses): allowed, denied, address-class
// cases, the reply codes, and BIND/UDP refused.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import net from 'node:net';
import { createTestPki, type TestPki } from '../support/pki.js';
import { startHttpsOrigin, startHttpOrigin, type Origin } from '../support/origins.js';
import { runCurl } from '../support/curl.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';

const TOKEN = 'tok-socks';

describe('SOCKS5 listener', () => {
  let pki: TestPki;
  let https: Origin;
  let http: Origin;
  let sluice: TestSluice;

  beforeAll(async () => {
    pki = createTestPki(['allowed.test']);
    https = await startHttpsOrigin(pki);
    http = await startHttpOrigin();
    sluice = await startSluice(
      {
        listeners: [
          { name: 'socks', listen: '127.0.0.1:0', identify: 'token', protocol: 'socks5' },
          { name: 'socks-a', listen: '127.0.0.1:0', grant: 's', protocol: 'socks5' },
        ],
        grants: [{ id: 's', tokenSha256: tokenHash(TOKEN), destinations: [`https://allowed.test:${https.port}`, `tcp://allowed.test:${http.port}`], allowAddressClasses: ['loopback'] }],
      },
      { lookup: tableLookup({ 'allowed.test': ['127.0.0.1'], 'denied.test': ['127.0.0.1'], 'private.test': ['10.0.0.1'] }) },
    );
  });
  afterAll(async () => {
    await sluice?.close();
    await https?.close();
    await http?.close();
  });
  const port = (name: string): number => Number(sluice.app.listeners.find((l) => l.name === name)?.address.split(':').at(-1));

  it('tunnels HTTPS for socks5h://grant:token@ with the name resolved by Sluice', async () => {
    const r = await runCurl(['--proxy', `socks5h://s:${TOKEN}@127.0.0.1:${port('socks')}`, '--cacert', pki.caFile, `https://allowed.test:${https.port}/socks`]);
    expect(r.stdout).toBe('origin:GET:/socks');
    expect(sluice.decisions().at(-1)).toMatchObject({ method: 'SOCKS5', reason: 'granted', canonical: `allowed.test:${https.port}`, principal: 's' });
  });

  it('refuses a destination outside the grant (reply 0x02) before the origin sees a connection', async () => {
    const before = https.connections;
    const r = await runCurl(['--proxy', `socks5h://s:${TOKEN}@127.0.0.1:${port('socks')}`, '--cacert', pki.caFile, `https://denied.test:${https.port}/`]);
    expect(r.code).toBe(97);
    expect(r.stderr).toContain('(2)'); // curl prints the SOCKS5 reply code: 0x02, not allowed by ruleset
    expect(https.connections).toBe(before);
    expect(sluice.decisions().at(-1)).toMatchObject({ reason: 'destination_not_granted' });
  });

  it('refuses private addresses without the class, by name and by address (socks5://)', async () => {
    await runCurl(['--proxy', `socks5h://s:${TOKEN}@127.0.0.1:${port('socks')}`, `http://private.test:${http.port}/`]);
    expect(sluice.decisions().at(-1)).toMatchObject({ reason: 'destination_not_granted' });
    const byAddress = await runCurl(['--proxy', `socks5://s:${TOKEN}@127.0.0.1:${port('socks')}`, `http://127.0.0.2:${http.port}/`]);
    expect(byAddress.code).not.toBe(0);
  });

  it('refuses bad credentials at authentication', async () => {
    const r = await runCurl(['--proxy', `socks5h://s:wrong@127.0.0.1:${port('socks')}`, `http://allowed.test:${http.port}/`]);
    expect(r.code).not.toBe(0);
    expect(sluice.decisions().at(-1)).toMatchObject({ reason: 'token_invalid' });
  });

  it('acts for its grant on a dedicated SOCKS5 listener without credentials', async () => {
    const r = await runCurl(['--proxy', `socks5h://127.0.0.1:${port('socks-a')}`, `http://allowed.test:${http.port}/dedicated`]);
    expect(r.stdout).toBe('origin:GET:/dedicated');
    expect(sluice.decisions().at(-1)).toMatchObject({ via: 'listener', principal: 's' });
  });

  it('refuses BIND and UDP ASSOCIATE with reply 0x07', async () => {
    for (const cmd of [0x02, 0x03]) {
      const answer = await new Promise<Buffer>((resolve, reject) => {
        const s = net.connect(port('socks-a'), '127.0.0.1');
        const chunks: Buffer[] = [];
        s.on('data', (c: Buffer) => chunks.push(c));
        s.on('error', reject);
        s.on('close', () => resolve(Buffer.concat(chunks)));
        s.write(Buffer.from([5, 1, 0]));
        s.write(Buffer.from([5, cmd, 0, 1, 127, 0, 0, 1, 0, 80]));
        setTimeout(() => s.destroy(), 3000).unref();
      });
      expect([...answer.subarray(0, 2)]).toEqual([5, 0]);
      expect(answer[3]).toBe(7);
    }
  });
});
