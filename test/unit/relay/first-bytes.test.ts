// readFirstBytes (src/relay/first-bytes.ts): what a hostile client tries against a reader that must
// decide on a tunnel's first bytes: trickling them one at a time, never sending, leaving or resetting
// mid-wait. Every way out clears the timer and the listeners and leaves the socket paused, its bytes kept.
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { readFirstBytes } from '../../../src/relay/index.js';

const cleanups: (() => void)[] = [];
afterEach(() => {
  while (cleanups.length > 0) cleanups.pop()?.();
});

/** A connected pair on loopback: `client` writes, `server` is what the reader reads. */
async function pair(): Promise<{ client: net.Socket; server: net.Socket }> {
  const listener = net.createServer({ pauseOnConnect: true });
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  const port = (listener.address() as net.AddressInfo).port;
  const accepted = new Promise<net.Socket>((resolve) => listener.once('connection', resolve));
  const client = net.connect(port, '127.0.0.1');
  const server = await accepted;
  // A reset is what some tests do on purpose: their sockets' errors are expected, not faults.
  client.on('error', () => undefined);
  server.on('error', () => undefined);
  cleanups.push(() => {
    client.destroy();
    server.destroy();
    listener.close();
  });
  return { client, server };
}

const ENDS = { timedOut: 'timed out', closed: 'closed' };
/** Decides once four bytes are there: the bytes, as text. */
const fourBytes = (bytes: Buffer): string | null => (bytes.length >= 4 ? bytes.toString('latin1') : null);

describe('readFirstBytes', () => {
  it('decides on what came with the head without reading the socket', async () => {
    const { server } = await pair();
    expect(await readFirstBytes(server, Buffer.from('GET '), 1000, fourBytes, ENDS)).toBe('GET ');
    expect(server.listenerCount('data')).toBe(0);
  });

  it('gathers bytes trickled one at a time, and leaves the socket paused with no listener of its own', async () => {
    const { client, server } = await pair();
    const counts = (): number[] => [server.listenerCount('data'), server.listenerCount('end'), server.listenerCount('close')];
    const before = counts();
    const read = readFirstBytes(server, Buffer.from('P'), 2000, fourBytes, ENDS);
    for (const c of 'RI ') {
      client.write(c);
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(await read).toBe('PRI ');
    expect(server.isPaused()).toBe(true);
    // Node's own listeners stay; none of the reader's.
    expect(counts()).toEqual(before);
  });

  it('answers timedOut when too little comes in time', async () => {
    const { client, server } = await pair();
    client.write('ab');
    expect(await readFirstBytes(server, Buffer.alloc(0), 50, fourBytes, ENDS)).toBe('timed out');
  });

  it('answers closed at once on a FIN or a reset, not after the timeout', async () => {
    const fin = await pair();
    const ended = readFirstBytes(fin.server, Buffer.alloc(0), 10_000, fourBytes, ENDS);
    fin.client.end('a');
    expect(await ended).toBe('closed');
    const reset = await pair();
    const reading = readFirstBytes(reset.server, Buffer.alloc(0), 10_000, fourBytes, ENDS);
    reset.client.resetAndDestroy();
    const started = performance.now();
    expect(await reading).toBe('closed');
    expect(performance.now() - started).toBeLessThan(5000);
  });

  it('answers closed for a socket already destroyed', async () => {
    const { server } = await pair();
    server.destroy();
    expect(await readFirstBytes(server, Buffer.alloc(0), 10_000, fourBytes, ENDS)).toBe('closed');
  });
});
