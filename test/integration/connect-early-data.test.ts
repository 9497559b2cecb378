// Bytes a client sends after its CONNECT head but before the tunnel is up (while Sluice resolves and
// dials) are held and relayed in order, on the fast path as on node:http's: none may be dropped.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTcpEchoServer, type EchoServer } from '../support/origins.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';
import { startRecorder } from '../support/recorder.js';
import { waitFor, waitForClose, waitUntil } from '../support/wait.js';

const TOKEN = 'tok-early';
const LOOKUP_DELAY_MS = 150;

describe('CONNECT: bytes sent before the tunnel is established', () => {
  let echo: EchoServer;
  let sluice: TestSluice;

  beforeAll(async () => {
    echo = await startTcpEchoServer();
    const table = tableLookup({ 'slowdns.test': ['127.0.0.1'] });
    sluice = await startSluice(
      { grants: [{ id: 'e', tokenSha256: tokenHash(TOKEN), destinations: [`tcp://slowdns.test:${echo.port}`], allowAddressClasses: ['loopback'] }] },
      {
        // The lookup takes a while, so the early bytes surely arrive before the tunnel exists.
        lookup: async (host, signal) => {
          await new Promise((resolve) => setTimeout(resolve, LOOKUP_DELAY_MS));
          return table(host, signal);
        },
      },
    );
  });
  afterAll(async () => {
    await sluice?.close();
    await echo?.close();
  });

  it.each([
    ['in one segment with the head (fast path)', true],
    ['in a segment of its own, after the head', false],
  ])('relays them %s', async (_label, together) => {
    const socket = net.connect(sluice.port, '127.0.0.1');
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    socket.on('error', () => undefined);
    await waitFor(socket, 'connect', 2000);
    const head = `CONNECT slowdns.test:${echo.port} HTTP/1.1\r\nProxy-Authorization: Bearer ${TOKEN}\r\n\r\n`;
    if (together) socket.write(`${head}early-1|`);
    else socket.write(head);
    await new Promise((resolve) => setTimeout(resolve, LOOKUP_DELAY_MS / 3));
    socket.write('early-2|');
    await waitUntil(() => received.includes('early-2|') || socket.destroyed, { timeoutMs: 3000, label: 'the early bytes echoed' });
    socket.destroy();
    expect(received).toMatch(/^HTTP\/1\.1 200 /);
    expect(received.endsWith(together ? 'early-1|early-2|' : 'early-2|')).toBe(true);
  });

  it('counts them against the grant’s byte budget: early bytes past maxBytes never reach the origin', async () => {
    const recorder = await startRecorder(echo.port);
    const budgeted = await startSluice(
      { grants: [{ id: 'm', tokenSha256: tokenHash(TOKEN), destinations: [`tcp://rec.test:${recorder.port}`], allowAddressClasses: ['loopback'], limits: { maxBytes: 16 } }] },
      { lookup: tableLookup({ 'rec.test': ['127.0.0.1'] }) },
    );
    try {
      const socket = net.connect(budgeted.port, '127.0.0.1');
      socket.on('error', () => undefined);
      // Read what comes (the 200), so the end of the stream is seen.
      socket.on('data', () => undefined);
      await waitFor(socket, 'connect', 2000);
      socket.write(`CONNECT rec.test:${recorder.port} HTTP/1.1\r\nProxy-Authorization: Bearer ${TOKEN}\r\n\r\n${'x'.repeat(64)}`);
      // Past its budget the grant withdraws the tunnel, which resets the client (an ECONNRESET may come first).
      await waitForClose(socket, 3000);
      expect(recorder.received()).toBe('');
      await waitUntil(() => budgeted.closes().length === 1, { timeoutMs: 2000, label: 'the close record' });
      expect(budgeted.closes()[0]?.closedBy).toBe('byte_limit');
    } finally {
      await budgeted.close();
      await recorder.close();
    }
  });
});
