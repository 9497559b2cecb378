// A real redis-server for the shared-ledger tests: Debian's binary on a free loopback port, its own temp
// directory and config, started and stopped by the test (never the system service). It can be killed
// and restarted on the same port, with or without its data (appendonly persistence as docs/fleet.md asks).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { unusedPort } from './ports.js';
import { waitUntil, withTimeout } from './wait.js';

export const REDIS_SERVER = ['/usr/bin/redis-server', '/usr/local/bin/redis-server'].find((p) => fs.existsSync(p));

export function redisAvailable(): boolean {
  return REDIS_SERVER !== undefined && spawnSync(REDIS_SERVER, ['--version']).status === 0;
}

/** Skip the Redis tests only outside CI: a CI machine without redis-server must fail them (as the Squid and bwrap tests do). */
export function redisSkip(): boolean {
  return process.env['CI'] !== 'true' && !redisAvailable();
}

export interface TestRedis {
  readonly port: number;
  readonly url: string;
  readonly dir: string;
  /** A fresh ioredis client to inspect or poke the store; the caller quits it. */
  client(): Promise<Redis>;
  /** SIGKILL; with `wipe`, its data is gone too (it comes back empty). */
  kill(options?: { wipe?: boolean }): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export interface RedisOptions {
  readonly password?: string;
  /** appendonly yes + appendfsync always: every acknowledged change survives a kill (default true). */
  readonly persistent?: boolean;
}

/** Whether something accepts a TCP connection on the loopback port now. */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => {
      socket.destroy();
      resolve(false);
    });
  });
}

export async function startRedis(options: RedisOptions = {}): Promise<TestRedis> {
  if (REDIS_SERVER === undefined) throw new Error('redis-server is not installed (.ci/run installs the Debian package)');
  const port = await unusedPort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-redis-'));
  const conf = path.join(dir, 'redis.conf');
  const persistent = options.persistent ?? true;
  fs.writeFileSync(
    conf,
    [
      `port ${port}`,
      'bind 127.0.0.1',
      `dir ${dir}`,
      'save ""',
      `appendonly ${persistent ? 'yes' : 'no'}`,
      'appendfsync always',
      'maxmemory-policy noeviction',
      ...(options.password === undefined ? [] : [`requirepass ${options.password}`]),
      'daemonize no',
      'loglevel warning',
    ].join('\n'),
  );
  let child: ChildProcess | null = null;
  const auth = options.password === undefined ? '' : `:${encodeURIComponent(options.password)}@`;
  const redis: TestRedis = {
    port,
    url: `redis://${auth}127.0.0.1:${port}/0`,
    dir,
    async start() {
      child = spawn(REDIS_SERVER, [conf], { stdio: 'ignore' });
      await waitUntil(() => accepts(port), { timeoutMs: 5000, label: `redis-server listening on ${port}` });
    },
    async kill(opts = {}) {
      const c = child;
      child = null;
      if (c !== null && c.exitCode === null) {
        const exited = new Promise<void>((resolve) => c.once('exit', () => resolve()));
        c.kill('SIGKILL');
        await withTimeout(exited, 5000, 'redis-server exit');
      }
      if (opts.wipe === true) for (const f of fs.readdirSync(dir)) if (f !== 'redis.conf') fs.rmSync(path.join(dir, f), { recursive: true, force: true });
    },
    async stop() {
      await redis.kill();
      fs.rmSync(dir, { recursive: true, force: true });
    },
    async client() {
      const c = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
      c.on('error', () => undefined);
      await c.connect();
      return c;
    },
  };
  await redis.start();
  return redis;
}
