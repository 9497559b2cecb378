// Idle tunnels end with closedBy idle_timeout once no byte has moved either way for the idle limit
// (timeouts.idleMs, or a grant's shorter limits.idleTimeoutMs); a tunnel moving bytes in only one
// direction is not idle. The limit is a floor: a tunnel is never ended early.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTcpEchoServer, type EchoServer } from '../support/origins.js';
import { openConnectTunnel } from '../support/raw-client.js';
import { waitFor, waitUntil } from '../support/wait.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';

const IDLE_MS = 300;
const GRANT_IDLE_MS = 150;

describe('tunnel idle timeout', () => {
  let echo: EchoServer;
  let sink: net.Server;
  let sinkPort: number;
  let sluice: TestSluice;

  beforeAll(async () => {
    echo = await startTcpEchoServer();
    // Reads and never answers: traffic in one direction only.
    sink = net.createServer((s) => s.resume());
    await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
    sinkPort = (sink.address() as net.AddressInfo).port;
    sluice = await startSluice(
      {
        timeouts: { idleMs: IDLE_MS },
        grants: [
          { id: 'a', tokenSha256: tokenHash('tok-idle-a'), destinations: [`tcp://echo.test:${echo.port}`, `tcp://sink.test:${sinkPort}`], allowAddressClasses: ['loopback'] },
          { id: 'b', tokenSha256: tokenHash('tok-idle-b'), destinations: [`tcp://echo.test:${echo.port}`], allowAddressClasses: ['loopback'], limits: { idleTimeoutMs: GRANT_IDLE_MS } },
        ],
      },
      { lookup: tableLookup({ 'echo.test': ['127.0.0.1'], 'sink.test': ['127.0.0.1'] }) },
    );
  });
  afterAll(async () => {
    await sluice?.close();
    await echo?.close();
    await new Promise<void>((resolve) => sink?.close(() => resolve()));
  });

  /** The close record of the next tunnel to close (it is written just after the client sees the close). */
  async function nextClose(before: number): Promise<ReturnType<TestSluice['closes']>[number]> {
    await waitUntil(() => sluice.closes().length > before, { timeoutMs: 2000, label: 'close record' });
    return sluice.closes()[before]!;
  }

  async function idleClose(token: string, target: string): Promise<{ idleFor: number; before: number }> {
    const before = sluice.closes().length;
    const tunnel = await openConnectTunnel(sluice.port, target, { 'Proxy-Authorization': `Bearer ${token}` });
    expect(tunnel.status).toBe(200);
    tunnel.socket.write('x');
    await waitFor(tunnel.socket, 'data', 2000);
    const lastByte = Date.now();
    await waitFor(tunnel.socket, 'close', 5000);
    return { idleFor: Date.now() - lastByte, before };
  }

  it('ends a silent tunnel with idle_timeout, not before the limit', async () => {
    const { idleFor, before } = await idleClose('tok-idle-a', `echo.test:${echo.port}`);
    expect(idleFor).toBeGreaterThanOrEqual(IDLE_MS - 5);
    expect(await nextClose(before)).toMatchObject({ principal: 'a', closedBy: 'idle_timeout', bytesUp: 1, bytesDown: 1 });
  });

  it("applies a grant's shorter limits.idleTimeoutMs", async () => {
    const { idleFor, before } = await idleClose('tok-idle-b', `echo.test:${echo.port}`);
    expect(idleFor).toBeGreaterThanOrEqual(GRANT_IDLE_MS - 5);
    expect(idleFor).toBeLessThan(IDLE_MS * 3);
    expect(await nextClose(before)).toMatchObject({ principal: 'b', closedBy: 'idle_timeout' });
  });

  it('keeps a tunnel open while bytes move in one direction only, for several idle limits', async () => {
    const before = sluice.closes().length;
    const tunnel = await openConnectTunnel(sluice.port, `sink.test:${sinkPort}`, { 'Proxy-Authorization': 'Bearer tok-idle-a' });
    expect(tunnel.status).toBe(200);
    let closed = false;
    tunnel.socket.on('close', () => (closed = true));
    const started = Date.now();
    // Bounded: 3.5 idle limits of writes, one every 50 ms.
    for (let i = 0; i < 40 && Date.now() - started < IDLE_MS * 3.5; i += 1) {
      tunnel.socket.write('.');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(closed).toBe(false);
    await waitFor(tunnel.socket, 'close', 5000);
    expect(await nextClose(before)).toMatchObject({ canonical: `sink.test:${sinkPort}`, closedBy: 'idle_timeout', bytesDown: 0 });
  });
});
