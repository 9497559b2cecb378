// The shared ledger store's failures in Sluice's words (UX review 2026-12-04 finding 8), from real errors:
// ioredis clients and RedisLedgerStore.open against a closed loopback port, a server that never answers,
// a TLS server with a certificate nobody trusts and a Sentinel nobody runs; ioredis' exported ReplyError
// for the server's refusals. Never ioredis' advice about its options, never the URL's userinfo.
import net from 'node:net';
import tls from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import { Redis, ReplyError } from 'ioredis';
import { ProxyError } from '../../../src/core/index.js';
import { describeStoreError, openRedisLedgerStore, type RedisTarget } from '../../../src/ledger/index.js';
import { createTestPki } from '../../support/pki.js';
import { unusedPort } from '../../support/ports.js';
import { redisSkip, startRedis } from '../../support/redis.js';
import { waitFor, waitUntil, withTimeout } from '../../support/wait.js';

const IOREDIS_WORDS = /maxRetriesPerRequest|enableOfflineQueue|Stream isn't writeable|Connection is closed/;
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

/** The options RedisLedgerStore gives its client (redis-store.ts): no offline queue, no retry of a request. */
function storeLikeClient(port: number, extra: Record<string, unknown> = {}): Redis {
  const client = new Redis(`redis://127.0.0.1:${port}/0`, { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, connectTimeout: 500, commandTimeout: 500, retryStrategy: () => 50, ...extra });
  cleanups.push(() => client.disconnect());
  return client;
}

async function openFails(target: RedisTarget): Promise<string> {
  const outcome = await withTimeout(
    openRedisLedgerStore({ target, keyPrefix: 't:', commandTimeoutMs: 300 }).then(
      async (store) => {
        await store.close();
        return 'opened';
      },
      (error: unknown) => (error instanceof ProxyError ? `${error.code} ${error.message}` : `other ${String(error)}`),
    ),
    10_000,
    'RedisLedgerStore.open',
  );
  return outcome;
}

async function listen(server: net.Server): Promise<number> {
  server.listen(0, '127.0.0.1');
  await waitFor(server, 'listening');
  cleanups.push(() => new Promise((resolve) => server.close(resolve)));
  return (server.address() as net.AddressInfo).port;
}

describe('describeStoreError: errors from a real ioredis client', () => {
  it('a closed port: the command says only that the connection is down; with the connection error kept, "connection refused"', async () => {
    const client = storeLikeClient(await unusedPort());
    const event = waitFor<Error>(client, 'error');
    const connect = await client.connect().then(() => null, (e: unknown) => e);
    const cause = await event;
    expect((cause as NodeJS.ErrnoException).code).toBe('ECONNREFUSED');
    const failed = await client.get('k').then(() => null, (e: unknown) => e);
    expect((failed as Error).message).toMatch(IOREDIS_WORDS);
    for (const error of [connect, failed]) {
      expect(describeStoreError(error)).toBe('the connection is down');
      expect(describeStoreError(error, { lastConnectionError: () => cause })).toBe('connection refused');
    }
    expect(describeStoreError(cause)).toBe('connection refused');
  });

  it('MaxRetriesPerRequestError (a command queued while the connection drops) is "the connection is down", never the option it names', async () => {
    const client = storeLikeClient(await unusedPort(), { enableOfflineQueue: true });
    client.on('error', () => undefined);
    const failed = await withTimeout(client.get('k').then(() => null, (e: unknown) => e), 5000, 'the queued command fails');
    expect((failed as Error).name).toBe('MaxRetriesPerRequestError');
    expect(describeStoreError(failed)).toBe('the connection is down');
    expect(describeStoreError(failed, { lastConnectionError: () => null })).toBe('the connection is down');
  });

  it("the server's refusals (ioredis' ReplyError): authentication, replica, ACL, loading; anything else with its first line", () => {
    const reply = (message: string): Error => new ReplyError(message) as Error;
    expect(describeStoreError(reply('WRONGPASS invalid username-password pair or user is disabled.'))).toBe('authentication failed: wrong user name or password (WRONGPASS)');
    expect(describeStoreError(reply('NOAUTH HELLO must be called with the client already authenticated'))).toBe('authentication failed: the server wants a password and none was given (NOAUTH)');
    expect(describeStoreError(reply('ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?'))).toBe(
      'authentication failed: the server has no password set (ERR AUTH)',
    );
    expect(describeStoreError(reply("READONLY You can't write against a read only replica."))).toMatch(/^the server is a read-only replica, not the primary: .*\(READONLY\)$/);
    expect(describeStoreError(reply("NOPERM User sluice has no permissions to run the 'eval' command"))).toBe('permission denied by the server’s ACL (NOPERM)');
    expect(describeStoreError(reply('LOADING Redis is loading the dataset in memory'))).toBe('the server is still loading its data (LOADING)');
    expect(describeStoreError(reply('ERR unknown command `FOO`'))).toBe('the server answered an error (ERR unknown command `FOO`)');
    // The same words once an error event kept them as the connection's cause.
    expect(describeStoreError(new Error("Stream isn't writeable and enableOfflineQueue options is false"), { lastConnectionError: () => reply('WRONGPASS invalid username-password pair') })).toBe(
      'authentication failed: wrong user name or password (WRONGPASS)',
    );
  });

  it("Node's socket and lookup codes; Sluice's own errors keep their message", () => {
    const errno = (code: string, message: string): Error => Object.assign(new Error(message), { code });
    expect(describeStoreError(errno('ETIMEDOUT', 'connect ETIMEDOUT 10.0.0.5:6379'))).toBe('connection timed out');
    expect(describeStoreError(new Error('connect ETIMEDOUT'))).toBe('connection timed out');
    expect(describeStoreError(errno('ENOTFOUND', 'getaddrinfo ENOTFOUND redis.corp.test'))).toBe('host name not found');
    expect(describeStoreError(errno('ECONNRESET', 'read ECONNRESET'))).toBe('connection reset by the server');
    expect(describeStoreError(errno('EHOSTUNREACH', 'connect EHOSTUNREACH 10.0.0.5:6379'))).toBe('host unreachable');
    expect(describeStoreError(new Error('All sentinels are unreachable and retry is disabled. Last error: connect ECONNREFUSED 127.0.0.1:26379'))).toBe('no sentinel answered (connection refused)');
    expect(describeStoreError(new Error('All sentinels are unreachable and retry is disabled.'))).toBe('no sentinel named the group’s primary');
    expect(describeStoreError(new ProxyError('ERR_LEDGER_STORE_CORRUPT', 'ledger store redis://h:6379/0: key t:grants is a string, expected a hash'))).toBe(
      'ledger store redis://h:6379/0: key t:grants is a string, expected a hash',
    );
    expect(describeStoreError(undefined)).toBe('the connection is down');
  });
});

describe('RedisLedgerStore.open names why it cannot use the store, in these words', () => {
  it('nothing listening: "connection refused", and the URL without its user name and password', async () => {
    const port = await unusedPort();
    const message = await openFails({ kind: 'url', url: `redis://sluice-user:s3cret-pw@127.0.0.1:${port}` });
    expect(message).toBe(`ERR_LEDGER_STORE_UNAVAILABLE cannot use the ledger store redis://127.0.0.1:${port}/0: connection refused`);
    expect(message).not.toMatch(/s3cret|sluice-user/);
  });

  it('a server that accepts and never answers: "the server did not answer in time"', async () => {
    const sockets = new Set<net.Socket>();
    const mute = net.createServer((socket) => void sockets.add(socket));
    const port = await listen(mute);
    // Run before the close listen() registered (cleanups run last first): close waits for its sockets.
    cleanups.push(() => sockets.forEach((s) => s.destroy()));
    expect(await openFails({ kind: 'url', url: `redis://127.0.0.1:${port}/2` })).toBe(`ERR_LEDGER_STORE_UNAVAILABLE cannot use the ledger store redis://127.0.0.1:${port}/2: the server did not answer in time`);
  });

  it('rediss:// to a server whose certificate no trusted CA signed: "TLS failed", with Node’s reason and code', async () => {
    const pki = createTestPki(['127.0.0.1']);
    const server = tls.createServer({ cert: pki.certPem, key: pki.keyPem }, (socket) => socket.destroy());
    server.on('tlsClientError', () => undefined);
    const port = await listen(server);
    const message = await openFails({ kind: 'url', url: `rediss://127.0.0.1:${port}` });
    expect(message).toMatch(new RegExp(`^ERR_LEDGER_STORE_UNAVAILABLE cannot use the ledger store rediss://127\\.0\\.0\\.1:${port}/0: TLS failed: .+ \\((UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_GET_ISSUER_CERT_LOCALLY)\\)$`));
    expect(message).not.toMatch(IOREDIS_WORDS);
  });

  it.skipIf(redisSkip())('a store whose server is killed: its calls fail with the cause the connection kept, never ioredis’ queue message', async () => {
    const redis = await startRedis({ persistent: false });
    cleanups.push(() => redis.stop());
    const store = await openRedisLedgerStore({ target: { kind: 'url', url: redis.url }, keyPrefix: 't:', commandTimeoutMs: 300 });
    cleanups.push(() => store.close());
    expect(store.lastConnectionError()).toBeNull();
    expect(await store.revision()).toBe(0);
    await redis.kill();
    const fail = (): Promise<unknown> => withTimeout(store.revision().then(() => null, (e: unknown) => e), 5000, 'a call after the kill fails');
    // At once: the socket is unwritable before ioredis has seen it close.
    const first = await fail();
    expect((first as Error).message).toMatch(IOREDIS_WORDS);
    expect(['the server closed the connection', 'connection refused']).toContain(describeStoreError(first, store));
    // Once the connection has closed (and a reconnect was refused), that is the cause.
    await waitUntil(() => store.lastConnectionError() !== null, { timeoutMs: 5000, label: 'the store keeps why its connection failed' });
    const later = await fail();
    expect((later as Error).message).toMatch(IOREDIS_WORDS);
    expect(['the server closed the connection', 'connection refused']).toContain(describeStoreError(later, store));
  });

  // ioredis' sentinel client keeps only "Connection is closed." of the refused connect: nothing more to say.
  it('a Sentinel group whose sentinels are all down: "no sentinel answered"', async () => {
    const port = await unusedPort();
    const target: RedisTarget = { kind: 'sentinel', name: 'grp', sentinels: [{ host: '127.0.0.1', port }], username: undefined, password: 'pw-never-shown', sentinelUsername: undefined, sentinelPassword: undefined, tls: null };
    const message = await openFails(target);
    expect(message).toBe(`ERR_LEDGER_STORE_UNAVAILABLE cannot use the ledger store sentinel group grp via 127.0.0.1:${port}: no sentinel answered`);
    expect(message).not.toMatch(/pw-never-shown|Connection is closed/);
  });
});
