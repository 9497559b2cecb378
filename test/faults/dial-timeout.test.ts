// Fault: the origin's address swallows the SYN (a listener whose accept queue is full drops it, as a
// firewall that drops would). The dial ends at timeouts.dialMs with 504 dial_timeout, never earlier, and
// the next hop to a live origin is served at once. The black hole is a real listening socket that never
// accepts (python3), its queue filled by this test: Node itself would accept eagerly.
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTcpEchoServer, type EchoServer } from '../support/origins.js';
import { openConnectTunnel } from '../support/raw-client.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';
import { withTimeout } from '../support/wait.js';

const DIAL_MS = 400;
const AUTH = { 'Proxy-Authorization': 'Bearer tok-dial' };
const NEVER_ACCEPTS = 'import socket,sys\ns=socket.socket()\ns.bind(("127.0.0.1",0))\ns.listen(0)\nprint(s.getsockname()[1],flush=True)\nsys.stdin.read()\n';

describe('dial timeout', () => {
  let hole: ChildProcess;
  let holePort: number;
  const fillers: net.Socket[] = [];
  let echo: EchoServer;
  let sluice: TestSluice;

  beforeAll(async () => {
    hole = spawn('python3', ['-c', NEVER_ACCEPTS], { stdio: ['pipe', 'pipe', 'inherit'] });
    holePort = await withTimeout(
      new Promise<number>((resolve) => hole.stdout!.once('data', (d: Buffer) => resolve(Number(d.toString().trim())))),
      5000,
      'python listener',
    );
    // Fill the accept queue (backlog 0 holds one or two): later SYNs are dropped and dials hang.
    for (let i = 0; i < 4; i += 1) {
      const s = net.connect(holePort, '127.0.0.1');
      s.on('error', () => undefined);
      fillers.push(s);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
    echo = await startTcpEchoServer();
    sluice = await startSluice(
      {
        timeouts: { dialMs: DIAL_MS },
        grants: [{ id: 'd', tokenSha256: tokenHash('tok-dial'), destinations: [`tcp://hole.test:${holePort}`, `tcp://echo.test:${echo.port}`], allowAddressClasses: ['loopback'] }],
      },
      { lookup: tableLookup({ 'hole.test': ['127.0.0.1'], 'echo.test': ['127.0.0.1'] }) },
    );
  });
  afterAll(async () => {
    await sluice?.close();
    await echo?.close();
    for (const s of fillers) s.destroy();
    hole?.stdin?.end();
    hole?.kill();
  });

  it('answers 504 dial_timeout after dialMs, not before, and keeps serving', async () => {
    const started = Date.now();
    const tunnel = await openConnectTunnel(sluice.port, `hole.test:${holePort}`, AUTH, { timeoutMs: DIAL_MS * 10 });
    const took = Date.now() - started;
    expect(tunnel.status).toBe(504);
    expect(tunnel.head).toContain('details="dial_timeout"');
    expect(took).toBeGreaterThanOrEqual(DIAL_MS - 5);
    expect(took).toBeLessThan(DIAL_MS * 4);
    tunnel.socket.destroy();
    expect(sluice.decisions().at(-1)).toMatchObject({ decision: 'deny', reason: 'dial_timeout', canonical: `hole.test:${holePort}` });

    const live = await openConnectTunnel(sluice.port, `echo.test:${echo.port}`, AUTH);
    expect(live.status).toBe(200);
    live.socket.destroy();
  });
});
