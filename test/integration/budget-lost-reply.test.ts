// A lost reply after a budget script ran (review 2026-12-04 finding 9). Sluice's Redis client runs with
// maxRetriesPerRequest 0: when the connection drops after ACQUIRE or RESERVE ran on Redis but before the
// reply reached Sluice, the hop is refused (or the reservation not credited) while `connections` or
// `bytes` stayed charged for good, and a grant with maxConnections lost a connection it never had. The
// lost reply here is real: a real redis-server behind a loopback TCP relay that forwards the script to
// Redis and, armed, drops the connection in place of the reply. Every charge carries an op id; once the
// store answers again the op is settled and the charge given back (ledger/redis-budgets.ts).
import net from 'node:net';
import { afterEach, beforeAll, afterAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { RedisBudgets, type Settlement } from '../../src/ledger/index.js';
import { startTcpEchoServer, type EchoServer } from '../support/origins.js';
import { openConnectTunnel } from '../support/raw-client.js';
import { redisSkip, startRedis, type TestRedis } from '../support/redis.js';
import { startSluice, tableLookup, type TestSluice } from '../support/sluice.js';
import { waitUntil, withTimeout } from '../support/wait.js';

/** Text only the ACQUIRE script holds, and only the RESERVE script. */
const ACQUIRE_MARK = "redis.call('HINCRBY', KEYS[1], 'connections', 1)";
const RESERVE_MARK = "redis.call('HINCRBY', KEYS[1], 'bytes', granted)";

interface Relay {
  readonly port: number;
  /** The next connection that sends `mark` loses its next reply: both sides are closed instead. */
  dropReplyAfter(mark: string): void;
  /** How many replies were dropped so far. */
  readonly dropped: number;
  close(): Promise<void>;
}

/** A loopback TCP relay to Redis that can lose one reply after the command it answers has run. */
async function startRelay(redisPort: number): Promise<Relay> {
  let armed: string | null = null;
  let dropped = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect({ port: redisPort, host: '127.0.0.1' });
    sockets.add(client).add(upstream);
    let dropNext = false;
    let seen = '';
    const end = (): void => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('data', (chunk: Buffer) => {
      if (armed !== null) {
        // A script can span chunks: keep a tail long enough for the mark.
        seen = (seen + chunk.toString('latin1')).slice(-8192);
        if (seen.includes(armed)) {
          armed = null;
          dropNext = true;
        }
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (dropNext) {
        // Redis ran the command and answered; the answer never arrives.
        dropped += 1;
        end();
        return;
      }
      client.write(chunk);
    });
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    dropReplyAfter(mark) {
      armed = mark;
    },
    get dropped() {
      return dropped;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** A client as the Redis ledger store makes it (redis-store.ts): no offline queue, no retry of a request. */
function storeLikeClient(port: number): Redis {
  const c = new Redis(`redis://127.0.0.1:${port}/0`, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: 1000,
    commandTimeout: 1000,
    retryStrategy: (times) => Math.min(50 * times, 500),
  });
  c.on('error', () => undefined);
  return c;
}

describe.skipIf(redisSkip())('a lost reply after a budget script ran gives the charge back (review 2026-12-04 finding 9)', () => {
  let redis: TestRedis;
  let relay: Relay;
  let inspect: Redis;
  let echo: EchoServer;
  const clients: Redis[] = [];
  const budgets: RedisBudgets[] = [];
  const instances: TestSluice[] = [];

  beforeAll(async () => {
    redis = await startRedis({ persistent: false });
    relay = await startRelay(redis.port);
    inspect = await redis.client();
    echo = await startTcpEchoServer();
  });
  afterEach(async () => {
    for (const s of instances.splice(0)) await s.close();
    for (const b of budgets.splice(0)) b.close();
    for (const c of clients.splice(0)) c.disconnect();
  });
  afterAll(async () => {
    inspect?.disconnect();
    await relay?.close();
    await redis?.stop();
    await echo?.close();
  });

  async function open(prefix: string): Promise<{ b: RedisBudgets; settled: Settlement[] }> {
    const client = storeLikeClient(relay.port);
    clients.push(client);
    await client.connect();
    const settled: Settlement[] = [];
    const b = new RedisBudgets(client, prefix, 5000, (s) => settled.push(s));
    budgets.push(b);
    return { b, settled };
  }

  const usage = async (prefix: string, grant: string): Promise<{ connections: number; bytes: number; leases: number }> => {
    const [h, leases] = await Promise.all([inspect.hgetall(`${prefix}usage:${grant}`), inspect.zcard(`${prefix}leases:${grant}`)]);
    return { connections: Number(h['connections'] ?? 0), bytes: Number(h['bytes'] ?? 0), leases };
  };

  it('acquire: the hop is refused, and the connection and lease the script took are given back once the store answers', async () => {
    const { b, settled } = await open('lr1:');
    const first = await b.acquire('g', { maxConnections: 5, maxConcurrent: 5 });
    expect(first.ok).toBe(true);
    expect(await usage('lr1:', 'g')).toEqual({ connections: 1, bytes: 0, leases: 1 });

    const dropsBefore = relay.dropped;
    relay.dropReplyAfter(ACQUIRE_MARK);
    const lost = await b.acquire('g', { maxConnections: 5, maxConcurrent: 5 }).then(
      () => 'answered',
      (error: Error) => error.message,
    );
    expect(relay.dropped).toBe(dropsBefore + 1);
    expect(lost).not.toBe('answered');
    // Bounded: the client reconnects within about 50 ms, the op is settled in the next round.
    await waitUntil(async () => (await usage('lr1:', 'g')).connections === 1, { timeoutMs: 5000, label: 'connections back to 1' });
    expect(await usage('lr1:', 'g')).toEqual({ connections: 1, bytes: 0, leases: 1 });
    // The script had run (the relay passed it to Redis): the settlement gave its charge back.
    await waitUntil(() => settled.length === 1, { timeoutMs: 2000, label: 'the op settled' });
    expect(settled[0]).toMatchObject({ grantId: 'g', outcome: 'released', charged: 'connection' });
    expect(await inspect.get(`lr1:budgetop:g:${settled[0]!.op}`)).toBe('cancelled');
    expect(b.unsettledCount).toBe(0);
    console.log(`[budget-lost-reply] acquire reply lost (${lost}); settled: ${JSON.stringify(settled[0])}; usage after: ${JSON.stringify(await usage('lr1:', 'g'))}`);

    // The budget counts on as if the lost hop never happened.
    expect((await b.acquire('g', { maxConnections: 5 })).ok).toBe(true);
    expect((await usage('lr1:', 'g')).connections).toBe(2);
  }, 20_000);

  it('reserveBytes: the bytes the script reserved are given back', async () => {
    const { b, settled } = await open('lr2:');
    expect(await b.reserveBytes('g', 1000, 10_000)).toBe(1000);
    relay.dropReplyAfter(RESERVE_MARK);
    await expect(b.reserveBytes('g', 4096, 10_000)).rejects.toThrow();
    await waitUntil(async () => (await usage('lr2:', 'g')).bytes === 1000, { timeoutMs: 5000, label: 'bytes back to 1000' });
    await waitUntil(() => settled.length === 1, { timeoutMs: 2000, label: 'the op settled' });
    expect(settled[0]).toMatchObject({ outcome: 'released', charged: 'bytes 4096' });
    expect(await b.reserveBytes('g', 9000, 10_000)).toBe(9000);
    expect(await b.reserveBytes('g', 1, 10_000)).toBe(0);
  }, 20_000);

  it('a script that reaches Redis only after its op was settled charges nothing', async () => {
    const client = storeLikeClient(relay.port);
    clients.push(client);
    await client.connect();
    // The first ACQUIRE "times out" before it is sent, and is kept; it is sent later, after the settlement.
    let held: (() => Promise<unknown>) | null = null;
    const late = new Proxy(client, {
      get(target, key, receiver) {
        if (key === 'eval') {
          return (...args: Parameters<Redis['eval']>) => {
            if (held === null && String(args[0]).includes(ACQUIRE_MARK)) {
              held = () => target.eval(...args);
              return Promise.reject(new Error('Command timed out'));
            }
            return target.eval(...args);
          };
        }
        return Reflect.get(target, key, receiver) as unknown;
      },
    });
    const settled: Settlement[] = [];
    const b = new RedisBudgets(late, 'lr3:', 5000, (s) => settled.push(s));
    budgets.push(b);
    await expect(b.acquire('g', { maxConnections: 1 })).rejects.toThrow('Command timed out');
    await waitUntil(() => settled.length === 1, { timeoutMs: 5000, label: 'the op settled' });
    expect(settled[0]).toMatchObject({ outcome: 'nothing' });
    expect(await held!()).toBe('cancelled');
    expect(await usage('lr3:', 'g')).toEqual({ connections: 0, bytes: 0, leases: 0 });
    expect((await b.acquire('g', { maxConnections: 1 })).ok).toBe(true);
  }, 20_000);

  it('a call that sent nothing (no connection) starts no settlement', async () => {
    const { b } = await open('lr4:');
    const client = clients.at(-1)!;
    client.disconnect(); // no reconnect: every command now fails before it is sent
    await expect(b.acquire('g', { maxConnections: 1 })).rejects.toThrow(/Stream isn't writeable/);
    expect(b.unsettledCount).toBe(0);
  });

  it('end to end: a budgeted hop refused for a lost reply does not spend the grant’s maxConnections', async () => {
    const s = await startSluice(
      { ledger: { store: 'redis', redis: { url: `redis://127.0.0.1:${relay.port}/0`, keyPrefix: 'lr5:' }, maxStaleMs: 2000 } },
      { lookup: tableLookup({ 'echo.test': ['127.0.0.1'] }) },
    );
    instances.push(s);
    const issued = await s.app.control.issueGrant({ destinations: [`tcp://echo.test:${echo.port}`], allowAddressClasses: ['loopback'], limits: { maxConnections: 2 } });
    if (!issued.ok) throw new Error(`issue: ${issued.status} ${issued.reason}`);
    const { id, token } = issued.value;
    const connect = async (): Promise<{ status: number; head: string }> => {
      const t = await withTimeout(openConnectTunnel(s.port, `echo.test:${echo.port}`, { 'Proxy-Authorization': `Bearer ${token}` }), 5000, 'CONNECT');
      t.socket.destroy();
      return { status: t.status, head: t.head };
    };

    relay.dropReplyAfter(ACQUIRE_MARK);
    const refused = await connect();
    expect(refused.status, refused.head).toBe(503);
    expect(refused.head).toContain('details="ledger_unavailable"');
    await waitUntil(async () => (await usage('lr5:', id)).connections === 0, { timeoutMs: 5000, label: 'the refused hop’s connection given back' });
    // Both of maxConnections' connections are still there, and a third is refused.
    const answers: number[] = [];
    for (let i = 0; i < 3; i += 1) {
      // The store's connection came back after the drop; while the instance catches up it may answer 503.
      let status = 0;
      await waitUntil(
        async () => {
          status = (await connect()).status;
          return status !== 503;
        },
        { timeoutMs: 5000, label: 'an answer other than 503' },
      );
      answers.push(status);
    }
    console.log(`[budget-lost-reply] end to end: refused ${refused.status} for the lost reply, then ${answers.join(', ')} with maxConnections 2`);
    expect(answers).toEqual([200, 200, 429]);
  }, 30_000);
});
