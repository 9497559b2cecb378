// The SOCKS5 handshake codec (RFC 1928, RFC 1929) over a real socket pair: what a hostile client sends
// before any hop exists. Exact lengths only, at most MAX_HANDSHAKE_BYTES buffered, a half-close or a cut
// ends the read at once, and the credentials come out as the Basic value the identify stage reads.
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { HandshakeReader, negotiateSocks5, readSocks5Request, socks5Reply } from '../../../src/listen/index.js';
import { waitFor, withTimeout } from '../../support/wait.js';

const servers: net.Server[] = [];
const sockets: net.Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const s of servers.splice(0)) await new Promise<void>((resolve) => s.close(() => resolve()));
});

async function pair(): Promise<{ accepted: net.Socket; client: net.Socket }> {
  const server = net.createServer({ allowHalfOpen: true });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const accepted = waitFor<net.Socket>(server, 'connection');
  const client = net.connect({ port: (server.address() as net.AddressInfo).port, host: '127.0.0.1' });
  client.on('error', () => undefined);
  sockets.push(client);
  const a = await accepted;
  a.on('error', () => undefined);
  sockets.push(a);
  return { accepted: a, client };
}

const userPass = (user: string, pass: string): Buffer => Buffer.concat([Buffer.from([1, user.length]), Buffer.from(user), Buffer.from([pass.length]), Buffer.from(pass)]);

describe('negotiateSocks5', () => {
  it('turns RFC 1929 credentials into the Basic value identify reads (grant id : token)', async () => {
    const { accepted, client } = await pair();
    let replies = Buffer.alloc(0);
    client.on('data', (c: Buffer) => (replies = Buffer.concat([replies, c])));
    client.write(Buffer.concat([Buffer.from([5, 1, 2]), userPass('g1', 'tok')]));
    const auth = await withTimeout(negotiateSocks5(false, accepted, new HandshakeReader(accepted)), 2000, 'negotiate');
    expect(auth).toBe(`Basic ${Buffer.from('g1:tok').toString('base64')}`);
    await withTimeout(new Promise<void>((resolve) => (replies.length >= 2 ? resolve() : client.once('data', () => resolve()))), 2000, 'method reply');
    expect([...replies.subarray(0, 2)]).toEqual([5, 2]);
  });

  it('needs no credentials only on a dedicated listener; a token listener refuses NO AUTH with 0xFF', async () => {
    const dedicated = await pair();
    dedicated.client.write(Buffer.from([5, 1, 0]));
    expect(await negotiateSocks5(true, dedicated.accepted, new HandshakeReader(dedicated.accepted))).toBeUndefined();
    const token = await pair();
    const reply = waitFor<Buffer>(token.client, 'data');
    token.client.write(Buffer.from([5, 1, 0]));
    expect(await negotiateSocks5(false, token.accepted, new HandshakeReader(token.accepted))).toBeNull();
    expect([...(await reply)]).toEqual([5, 0xff]);
  });

  it('ends at once, with nothing, when the client half-closes mid-greeting (not at the handshake timeout)', async () => {
    const { accepted, client } = await pair();
    client.end(Buffer.from([5]));
    expect(await withTimeout(negotiateSocks5(false, accepted, new HandshakeReader(accepted)), 1000, 'settles on end')).toBeNull();
  });

  it('cuts a handshake that sends more than it may buffer', async () => {
    const { accepted, client } = await pair();
    const reader = new HandshakeReader(accepted);
    client.write(Buffer.alloc(4096, 5));
    await waitFor(accepted, 'close', 2000);
    expect(await reader.read(8192)).toBeNull();
  });
});

describe('readSocks5Request', () => {
  it.each([
    ['IPv4', Buffer.from([5, 1, 0, 1, 127, 0, 0, 1, 0x01, 0xbb]), '127.0.0.1:443'],
    ['IPv6', Buffer.concat([Buffer.from([5, 1, 0, 4]), Buffer.from('00000000000000000000000000000001', 'hex'), Buffer.from([0, 80])]), '[0:0:0:0:0:0:0:1]:80'],
    ['a domain', Buffer.concat([Buffer.from([5, 1, 0, 3, 6]), Buffer.from('a.test'), Buffer.from([0x1f, 0x90])]), 'a.test:8080'],
  ])('reads %s as an authority for canonicalization', async (_label, bytes, authority) => {
    const { accepted, client } = await pair();
    client.write(bytes);
    expect(await readSocks5Request(new HandshakeReader(accepted))).toEqual({ cmd: 1, authority });
  });

  it('hands an unknown address type on as an empty authority (refused by canonicalization), and keeps BIND as its command', async () => {
    const { accepted, client } = await pair();
    client.write(Buffer.from([5, 2, 0, 9]));
    expect(await readSocks5Request(new HandshakeReader(accepted))).toEqual({ cmd: 2, authority: '' });
  });

  it('returns null for a request cut short', async () => {
    const { accepted, client } = await pair();
    client.end(Buffer.from([5, 1, 0, 1, 127]));
    expect(await readSocks5Request(new HandshakeReader(accepted))).toBeNull();
  });
});

describe('socks5Reply', () => {
  it('is a version 5 reply with the code and an all-zero IPv4 bound address', () => {
    expect([...socks5Reply(0x02)]).toEqual([5, 2, 0, 1, 0, 0, 0, 0, 0, 0]);
  });
});
