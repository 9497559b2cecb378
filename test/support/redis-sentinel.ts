// A real Redis Sentinel group for the shared-ledger failover test: one primary and one replica
// (`redis-server`, `replicaof`), and three sentinels (`redis-server sentinel.conf --sentinel`; Debian's
// binary runs sentinel mode), every one on a free loopback port, with its config and working files in
// one temporary directory, passwords on the servers and on the sentinels. Started and stopped by the
// test; every wait is bounded; a process the test forgets is killed when the worker exits.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { tryConnect, waitForExit } from './child-process.js';
import { unusedPort } from './ports.js';
import { REDIS_SERVER } from './redis.js';
import { waitUntil } from './wait.js';

export const SENTINEL_GROUP = 'sluice-ledger';

export interface SentinelOptions {
  /** Sentinel's down-after-milliseconds: how long the primary must be silent before it is subjectively down. */
  readonly downAfterMs: number;
  readonly failoverTimeoutMs: number;
  readonly password: string;
  readonly sentinelPassword: string;
}

interface Node {
  readonly name: string;
  readonly port: number;
  readonly args: string[];
  child: ChildProcess | null;
}

export interface TestSentinelGroup {
  readonly dir: string;
  readonly primaryPort: number;
  readonly replicaPort: number;
  readonly sentinelPorts: readonly number[];
  /** `127.0.0.1:port` of each sentinel, as ledger.redis.sentinels takes them. */
  readonly sentinels: readonly string[];
  /** SIGKILLs one node (`primary`, `replica`, `sentinel-0` …) and waits, bounded, for its exit. */
  kill(name: string): Promise<void>;
  /** The primary's port as sentinel `i` reports it now (null while it has none). */
  masterPort(i?: number): Promise<number | null>;
  /** A client of a data node (the caller quits it). */
  client(port: number): Redis;
  /** A client of a sentinel (the caller quits it). */
  sentinelClient(i: number): Redis;
  stop(): Promise<void>;
}

const everyChild = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of everyChild) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

function write(file: string, lines: readonly string[]): void {
  fs.writeFileSync(file, `${lines.join('\n')}\n`, { mode: 0o600 });
}

export async function startSentinelGroup(options: SentinelOptions): Promise<TestSentinelGroup> {
  if (REDIS_SERVER === undefined) throw new Error('redis-server is not installed (.ci/run installs the Debian package)');
  const server = REDIS_SERVER;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-sentinel-'));
  const ports = { primary: await unusedPort(), replica: await unusedPort(), sentinels: [await unusedPort(), await unusedPort(), await unusedPort()] };
  const nodes: Node[] = [];
  const dataNode = (name: string, port: number, extra: readonly string[]): void => {
    const home = path.join(dir, name);
    fs.mkdirSync(home, { mode: 0o700 });
    const conf = path.join(home, 'redis.conf');
    // No persistence: the test is about the failover, not the disk; `dir` keeps anything else in the temp dir.
    write(conf, [
      `port ${port}`,
      'bind 127.0.0.1',
      `dir ${home}`,
      'save ""',
      'appendonly no',
      'maxmemory-policy noeviction',
      `requirepass ${options.password}`,
      `masterauth ${options.password}`,
      'daemonize no',
      'loglevel warning',
      ...extra,
    ]);
    nodes.push({ name, port, args: [conf], child: null });
  };
  dataNode('primary', ports.primary, []);
  dataNode('replica', ports.replica, [`replicaof 127.0.0.1 ${ports.primary}`]);
  ports.sentinels.forEach((port, i) => {
    const home = path.join(dir, `sentinel-${i}`);
    fs.mkdirSync(home, { mode: 0o700 });
    const conf = path.join(home, 'sentinel.conf');
    // Sentinel rewrites its own file (the replicas and sentinels it learned), so each has its own.
    write(conf, [
      `port ${port}`,
      'bind 127.0.0.1',
      `dir ${home}`,
      'daemonize no',
      'loglevel warning',
      `requirepass ${options.sentinelPassword}`,
      `sentinel sentinel-pass ${options.sentinelPassword}`,
      'sentinel resolve-hostnames yes',
      `sentinel monitor ${SENTINEL_GROUP} 127.0.0.1 ${ports.primary} 2`,
      `sentinel auth-pass ${SENTINEL_GROUP} ${options.password}`,
      `sentinel down-after-milliseconds ${SENTINEL_GROUP} ${options.downAfterMs}`,
      `sentinel failover-timeout ${SENTINEL_GROUP} ${options.failoverTimeoutMs}`,
      `sentinel parallel-syncs ${SENTINEL_GROUP} 1`,
    ]);
    nodes.push({ name: `sentinel-${i}`, port, args: [conf, '--sentinel'], child: null });
  });

  const clients: Redis[] = [];
  const connectOptions = { host: '127.0.0.1', lazyConnect: false, maxRetriesPerRequest: 1, connectTimeout: 1000, commandTimeout: 2000, retryStrategy: () => 100 };
  const client = (port: number): Redis => {
    const c = new Redis({ ...connectOptions, port, password: options.password });
    c.on('error', () => undefined);
    clients.push(c);
    return c;
  };
  const sentinelClient = (i: number): Redis => {
    const c = new Redis({ ...connectOptions, port: ports.sentinels[i] ?? 0, password: options.sentinelPassword });
    c.on('error', () => undefined);
    clients.push(c);
    return c;
  };

  const kill = async (name: string): Promise<void> => {
    const node = nodes.find((n) => n.name === name);
    const child = node?.child;
    if (node === undefined || child === null || child === undefined) return;
    node.child = null;
    child.kill('SIGKILL');
    if (!(await waitForExit(child, 5000))) throw new Error(`${name} (pid ${String(child.pid)}) did not exit after SIGKILL`);
    everyChild.delete(child);
  };
  const stop = async (): Promise<void> => {
    for (const c of clients.splice(0)) c.disconnect();
    await Promise.all(nodes.map((n) => kill(n.name)));
    fs.rmSync(dir, { recursive: true, force: true });
  };

  const group: TestSentinelGroup = {
    dir,
    primaryPort: ports.primary,
    replicaPort: ports.replica,
    sentinelPorts: ports.sentinels,
    sentinels: ports.sentinels.map((p) => `127.0.0.1:${p}`),
    kill,
    async masterPort(i = 0) {
      const c = sentinelClient(i);
      try {
        const answer = (await c.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', SENTINEL_GROUP)) as [string, string] | null;
        return answer === null ? null : Number(answer[1]);
      } finally {
        c.disconnect();
        clients.splice(clients.indexOf(c), 1);
      }
    },
    client,
    sentinelClient,
    stop,
  };

  try {
    for (const node of nodes) {
      node.child = spawn(server, node.args, { stdio: 'ignore' });
      everyChild.add(node.child);
      await waitUntil(() => tryConnect(node.port, 500), { timeoutMs: 5000, label: `${node.name} listening on ${node.port}` });
    }
    // Ready for a failover: the replica is in sync, and every sentinel knows the replica and the two
    // other sentinels (they find each other through hello messages every 2 s), so a quorum can vote.
    const replica = client(ports.replica);
    await waitUntil(async () => /master_link_status:up/.test(await replica.info('replication').catch(() => '')), { timeoutMs: 10_000, label: 'the replica in sync with the primary' });
    const watchers = ports.sentinels.map((_, i) => sentinelClient(i));
    const knowsAll = async (s: Redis): Promise<boolean> => {
      try {
        const replicas = (await s.call('SENTINEL', 'REPLICAS', SENTINEL_GROUP)) as unknown[];
        const quorum = String(await s.call('SENTINEL', 'CKQUORUM', SENTINEL_GROUP));
        return replicas.length === 1 && quorum.startsWith('OK 3 usable');
      } catch {
        return false;
      }
    };
    await waitUntil(async () => (await Promise.all(watchers.map(knowsAll))).every(Boolean), { timeoutMs: 15_000, label: 'every sentinel knows the replica and a quorum of 3' });
  } catch (error) {
    await stop();
    throw error;
  }
  return group;
}
