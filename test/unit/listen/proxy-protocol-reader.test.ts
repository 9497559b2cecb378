// Reading the PROXY header off a real accepted socket: only a trusted peer may send one (a client that
// connects directly cannot forge its source), the header may arrive split across packets, the bytes
// after it are the client's and stay unread, and a slow or endless header is cut off.
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { proxyProtocolGate, trustedSourceList, type ProxyHeaderOutcome } from '../../../src/listen/index.js';

interface Accepted {
  readonly outcome: Promise<ProxyHeaderOutcome>;
  readonly server: net.Socket;
}

const cleanup: (() => void)[] = [];
afterEach(() => {
  for (const f of cleanup.splice(0)) f();
});

/** A loopback server that runs the gate on its one connection; returns the client and what the gate said. */
async function connect(trusted: string[], timeoutMs = 2000): Promise<{ client: net.Socket; accepted: Promise<Accepted> }> {
  const gate = proxyProtocolGate(trusted, timeoutMs);
  let resolveAccepted!: (a: Accepted) => void;
  const accepted = new Promise<Accepted>((resolve) => (resolveAccepted = resolve));
  const server = net.createServer((socket) => {
    const outcome = new Promise<ProxyHeaderOutcome>((resolve) => gate.read(socket, resolve));
    resolveAccepted({ outcome, server: socket });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  await new Promise<void>((resolve) => client.once('connect', resolve));
  client.on('error', () => undefined);
  cleanup.push(() => {
    client.destroy();
    server.close();
  });
  return { client, accepted };
}

/** What the socket yields after the gate: the first chunk read once it is resumed. */
function nextChunk(socket: net.Socket): Promise<string> {
  return new Promise((resolve) => {
    socket.once('data', (c: Buffer) => resolve(c.toString('latin1')));
    socket.resume();
  });
}

describe('proxyProtocolGate', () => {
  it('carries the client address from a trusted peer and leaves the bytes after the header unread', async () => {
    const { client, accepted } = await connect(['127.0.0.1/32']);
    client.write('PROXY TCP4 203.0.113.9 10.0.0.1 40000 3128\r\nCONNECT a:443 HTTP/1.1\r\n\r\n');
    const { outcome, server } = await accepted;
    expect(await outcome).toEqual({ ok: true, source: '203.0.113.9' });
    expect(await nextChunk(server)).toBe('CONNECT a:443 HTTP/1.1\r\n\r\n');
  });

  it('refuses a peer outside trustedSources without reading anything (a spoofed header from a direct client)', async () => {
    const { client, accepted } = await connect(['10.0.0.0/8', 'fd00::/8']);
    client.write('PROXY TCP4 10.1.2.3 10.0.0.1 40000 3128\r\n');
    const result = await (await accepted).outcome;
    expect(result).toEqual({ ok: false, reason: 'untrusted source 127.0.0.1: not in proxyProtocol.trustedSources' });
  });

  it('waits for a header split across packets, byte by byte', async () => {
    const { client, accepted } = await connect(['127.0.0.0/8']);
    client.setNoDelay(true);
    const header = Buffer.concat([
      Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a, 0x21, 0x11, 0x00, 0x0c]),
      Buffer.from([198, 51, 100, 4, 127, 0, 0, 1, 0x9c, 0x40, 0x0c, 0x38]),
    ]);
    const { outcome, server } = await accepted;
    let settled = false;
    void outcome.then(() => (settled = true));
    for (const byte of header) {
      expect(settled).toBe(false);
      client.write(Buffer.from([byte]));
      // Each byte reaches the server before the next is sent (an echo barrier would change the stream).
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(await outcome).toEqual({ ok: true, source: '198.51.100.4' });
    client.write('rest');
    expect(await nextChunk(server)).toBe('rest');
  });

  it('refuses an oversized header after at most 536 bytes', async () => {
    const { client, accepted } = await connect(['127.0.0.1']);
    client.write(`PROXY UNKNOWN ${'x'.repeat(4000)}`);
    expect(await (await accepted).outcome).toEqual({ ok: false, reason: 'no valid PROXY header: v1 line longer than 107 bytes' });
  });

  it('refuses a connection without a header (a plain request) at once', async () => {
    const { client, accepted } = await connect(['127.0.0.1/32']);
    client.write('GET http://a/ HTTP/1.1\r\n\r\n');
    const result = await (await accepted).outcome;
    expect(result.ok).toBe(false);
    expect(!result.ok && result.reason).toMatch(/^no valid PROXY header: /);
  });

  it('cuts off a slowloris header at the deadline, and a connection that ends mid-header', async () => {
    const slow = await connect(['127.0.0.1/32'], 150);
    slow.client.write('PROXY TCP4 1.2.3.4');
    expect(await (await slow.accepted).outcome).toEqual({ ok: false, reason: 'no valid PROXY header: none complete within 150 ms' });
    const ended = await connect(['127.0.0.1/32']);
    ended.client.end('PROXY TCP4 1.2.3.4');
    expect(await (await ended.accepted).outcome).toEqual({ ok: false, reason: 'no valid PROXY header: the connection ended before one was complete' });
  });
});

describe('trustedSourceList', () => {
  it('matches CIDRs and single addresses, IPv4 ranges also as IPv4-mapped IPv6 peers', () => {
    const list = trustedSourceList(['10.0.0.0/8', '192.0.2.7', 'fd00::/8']);
    expect(list.check('10.255.0.1', 'ipv4')).toBe(true);
    expect(list.check('::ffff:10.1.1.1', 'ipv6')).toBe(true);
    expect(list.check('192.0.2.7', 'ipv4')).toBe(true);
    expect(list.check('192.0.2.8', 'ipv4')).toBe(false);
    expect(list.check('fd12::1', 'ipv6')).toBe(true);
    expect(list.check('127.0.0.1', 'ipv4')).toBe(false);
  });
});
