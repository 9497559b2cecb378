// Threat: proxy loops and SSRF into Sluice's own control plane. A sandbox asks Sluice to CONNECT to, or
// forward to, one of Sluice's own listeners (a loop that multiplies connections until the limits fall:
// RFC 9110 §7.6.3 Via exists to detect this), its admin API (issue or revoke grants from inside the
// sandbox), or its metrics port, spelling the address so that a string check misses it (WHATWG URL IPv4
// number forms, IPv4-mapped IPv6 per RFC 4291 §2.5.5.2, `localhost`, and 0.0.0.0/`[::]`, which Linux
// dials as loopback). Every address of those ports is class `self`, which no grant can allow: even an
// unrestricted grant that allows loopback, every other class and 0.0.0.0/0 gets 403 address_self
// (RFC 9209 proxy_loop_detected), and the listener sees no second connection.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import diagnostics from 'node:diagnostics_channel';
import type net from 'node:net';
import os from 'node:os';
import { unusedPort } from '../support/ports.js';
import { openConnectTunnel, rawRequest } from '../support/raw-client.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';

const TOKEN = 'tok-loop';
const AUTH = `Basic ${Buffer.from(`u:${TOKEN}`).toString('base64')}`;

/** Counts connections accepted by every server in this process, by listening port. */
const accepted = new Map<number, number>();
function onServerSocket(message: unknown): void {
  const socket = (message as { socket: net.Socket & { server?: net.Server } }).socket;
  const address = socket.server?.address();
  if (address !== null && typeof address === 'object') accepted.set(address.port, (accepted.get(address.port) ?? 0) + 1);
}

const portOf = (address: string | null | undefined): number => Number(address?.slice(address.lastIndexOf(':') + 1));

/** Every spelling of "this host" we try; the host's own interface addresses are added at run time. */
const SPELLINGS = ['127.0.0.1', '127.1', '0x7f000001', '2130706433', '0177.0.0.1', '127.0.0.2', 'localhost', 'loop.test', '[::1]', '[::ffff:127.0.0.1]', '[::ffff:7f00:1]', '[64:ff9b::7f00:1]', '0.0.0.0', '0', '[::]'];

function interfaceAddresses(): string[] {
  const out: string[] = [];
  for (const infos of Object.values(os.networkInterfaces())) {
    for (const info of infos ?? []) if (!info.internal && info.family === 'IPv4') out.push(info.address);
  }
  return out.slice(0, 2);
}

describe('Sluice never connects to itself', () => {
  let sluice: TestSluice;
  let targets: { name: string; port: number }[];
  let spellings: string[];

  beforeAll(async () => {
    diagnostics.subscribe('net.server.socket', onServerSocket);
    sluice = await startSluice(
      {
        listeners: [
          { name: 'shared', listen: '127.0.0.1:0', identify: 'token' },
          { name: 'sandbox', listen: '127.0.0.1:0', grant: 'u' },
        ],
        admin: { listen: '127.0.0.1:0', tokenSha256: tokenHash('admin-token'), metrics: '127.0.0.1:0' },
        grants: [
          {
            id: 'u',
            tokenSha256: tokenHash(TOKEN),
            unrestricted: true,
            allowAddressClasses: ['private', 'loopback', 'link_local', 'cgnat', 'reserved', 'host'],
            allowAddresses: ['0.0.0.0/0', '::/0'],
          },
        ],
      },
      { lookup: tableLookup({ localhost: ['127.0.0.1', '::1'], 'loop.test': ['127.0.0.1'] }) },
    );
    // A dedicated listener opened at run time through the control plane is Sluice's own too.
    const issued = await sluice.app.control.issueGrant({ unrestricted: true, allowAddressClasses: ['loopback'], listen: '127.0.0.1:0' });
    if (!issued.ok) throw new Error(`issueGrant failed: ${JSON.stringify(issued)}`);
    targets = [
      { name: 'the token listener', port: sluice.port },
      { name: 'a dedicated listener', port: portOf(sluice.app.listeners.find((l) => l.name === 'sandbox')?.address) },
      { name: 'a run-time dedicated listener', port: portOf(issued.value.grant.listen) },
      { name: 'the admin API', port: portOf(sluice.app.adminAddress) },
      { name: 'the metrics port', port: portOf(sluice.app.metricsAddress) },
    ];
    spellings = [...SPELLINGS, ...interfaceAddresses()];
  });
  afterAll(async () => {
    diagnostics.unsubscribe('net.server.socket', onServerSocket);
    await sluice?.close();
  });

  it('knows the real ports of every listener it must protect', () => {
    for (const t of targets) expect(t.port, t.name).toBeGreaterThan(0);
    expect(new Set(targets.map((t) => t.port)).size).toBe(targets.length);
  });

  it.each(['the token listener', 'a dedicated listener', 'a run-time dedicated listener', 'the admin API', 'the metrics port'])(
    'CONNECT to %s by every spelling is 403 address_self, and it sees no connection',
    async (name) => {
      const target = targets.find((t) => t.name === name);
      if (target === undefined) throw new Error(name);
      const before = new Map(accepted);
      let clientConnections = 0;
      for (const host of spellings) {
        const tunnel = await openConnectTunnel(sluice.port, `${host}:${target.port}`, { 'Proxy-Authorization': AUTH });
        clientConnections += 1;
        tunnel.socket.destroy();
        expect.soft(tunnel.status, host).toBe(403);
        expect.soft(tunnel.head, host).toContain('Proxy-Status: sluice; error=proxy_loop_detected; details="address_self"');
        expect.soft(sluice.decisions().at(-1), host).toMatchObject({ reason: 'address_self', pinned: null });
      }
      // The proxy listener accepted only the test's own connections (a loop would add one per attempt);
      // any other target accepted none at all.
      const delta = (port: number): number => (accepted.get(port) ?? 0) - (before.get(port) ?? 0);
      expect(delta(sluice.port)).toBe(clientConnections);
      if (target.port !== sluice.port) expect(delta(target.port)).toBe(0);
    },
  );

  it.each(['the token listener', 'a dedicated listener', 'the admin API', 'the metrics port'])(
    'absolute-form to %s by every spelling is 403 address_self, and it sees no connection',
    async (name) => {
      const target = targets.find((t) => t.name === name);
      if (target === undefined) throw new Error(name);
      const before = new Map(accepted);
      for (const host of spellings) {
        const authority = `${host}:${target.port}`;
        const res = await rawRequest(sluice.port, `GET http://${authority}/v1/grants HTTP/1.1\r\nHost: ${authority}\r\nProxy-Authorization: ${AUTH}\r\nAuthorization: Bearer admin-token\r\n\r\n`);
        expect.soft(res.text, host).toMatch(/^HTTP\/1\.1 403 Forbidden\r\n/);
        expect.soft(res.text, host).toContain('details="address_self"');
      }
      const delta = (port: number): number => (accepted.get(port) ?? 0) - (before.get(port) ?? 0);
      expect(delta(sluice.port)).toBe(spellings.length);
      if (target.port !== sluice.port) expect(delta(target.port)).toBe(0);
    },
  );

  it('refuses through a dedicated listener too (no token needed there, still no loop)', async () => {
    const dedicated = targets.find((t) => t.name === 'a dedicated listener');
    const admin = targets.find((t) => t.name === 'the admin API');
    if (dedicated === undefined || admin === undefined) throw new Error('targets');
    const tunnel = await openConnectTunnel(dedicated.port, `127.1:${admin.port}`);
    tunnel.socket.destroy();
    expect(tunnel.status).toBe(403);
    expect(tunnel.head).toContain('details="address_self"');
  });

  it('still reaches a loopback port that is not Sluice’s own (the grant allows loopback)', async () => {
    const tunnel = await openConnectTunnel(sluice.port, `127.0.0.1:${await unusedPort()}`, { 'Proxy-Authorization': AUTH });
    tunnel.socket.destroy();
    // Whatever answers there (usually nothing: dial_refused), the decision is not a self-loop refusal.
    expect(tunnel.head).not.toContain('address_self');
    expect(sluice.decisions().at(-1)?.addresses).toEqual([{ address: '127.0.0.1', class: 'loopback', allowed: true }]);
  });
});

// Mutation review 2026-12 (docs/reviews/mutation-2026-12.md; self-addresses.ts ids 1141–1159): with every listener on 127.0.0.1 the
// wildcard branch was never exercised, so a mutant that made only the literal `0.0.0.0 <port>` self
// survived the whole suite. A listener on 0.0.0.0 accepts on every IPv4 address of the host: 127.0.0.1,
// 127.1 and the host's interface addresses must all be self on its port.
describe('Sluice never connects to its own 0.0.0.0 listener', () => {
  let sluice: TestSluice;

  beforeAll(async () => {
    diagnostics.subscribe('net.server.socket', onServerSocket);
    sluice = await startSluice(
      {
        listeners: [{ name: 'shared', listen: '0.0.0.0:0', identify: 'token' }],
        grants: [
          {
            id: 'u',
            tokenSha256: tokenHash(TOKEN),
            unrestricted: true,
            allowAddressClasses: ['private', 'loopback', 'link_local', 'cgnat', 'reserved', 'host'],
            allowAddresses: ['0.0.0.0/0', '::/0'],
          },
        ],
      },
      { lookup: tableLookup({ localhost: ['127.0.0.1'] }) },
    );
  });
  afterAll(async () => {
    diagnostics.unsubscribe('net.server.socket', onServerSocket);
    await sluice?.close();
  });

  it('CONNECT to 127.0.0.1:<its port> (and 127.1, 127.0.0.2, localhost, 0.0.0.0, the host’s addresses) is 403 address_self, with no loop', async () => {
    expect(sluice.app.listeners[0]?.address).toMatch(/^0\.0\.0\.0:\d+$/);
    const before = accepted.get(sluice.port) ?? 0;
    const hosts = ['127.0.0.1', '127.1', '127.0.0.2', 'localhost', '0.0.0.0', '[::ffff:127.0.0.1]', ...interfaceAddresses()];
    for (const host of hosts) {
      const tunnel = await openConnectTunnel(sluice.port, `${host}:${sluice.port}`, { 'Proxy-Authorization': AUTH });
      tunnel.socket.destroy();
      expect.soft(tunnel.status, host).toBe(403);
      expect.soft(tunnel.head, host).toContain('details="address_self"');
      expect.soft(sluice.decisions().at(-1), host).toMatchObject({ reason: 'address_self', pinned: null });
    }
    expect((accepted.get(sluice.port) ?? 0) - before).toBe(hosts.length);
  });
});
