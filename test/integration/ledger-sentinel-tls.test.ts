// ledger.redis.tls with sentinels (docs/fleet.md, "Sentinel"): the store reaches the sentinel and the
// primary it names over TLS, trusting tls.caFile, with the passwords from the environment. Real processes
// on loopback: one redis-server and one sentinel (quorum 1), both listening with TLS only, certificates
// from the test PKI (an IP SAN for 127.0.0.1, the address the sentinel reports). Without TLS, or
// without the CA, the store does not open, and says why without a password. Skipped only when
// redis-server is missing.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openRedisLedgerStore, resolveRedisTarget, type RedisLedgerStore } from '../../src/ledger/index.js';
import { tryConnect, waitForExit } from '../support/child-process.js';
import { createTestPki } from '../support/pki.js';
import { unusedPort } from '../support/ports.js';
import { REDIS_SERVER, redisSkip } from '../support/redis.js';
import { waitUntil } from '../support/wait.js';

const PASSWORD = 'tls-redis-password';
const SENTINEL_PASSWORD = 'tls-sentinel-password';
const env = { SLUICE_T_REDIS: PASSWORD, SLUICE_T_SENTINEL: SENTINEL_PASSWORD };

describe.skipIf(redisSkip())('ledger store on a Sentinel group over TLS', () => {
  let dir: string;
  let sentinelPort = 0;
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-sentinel-tls-'));
    const pki = createTestPki(['127.0.0.1']);
    const cert = path.join(dir, 'cert.pem');
    const key = path.join(dir, 'key.pem');
    fs.writeFileSync(cert, pki.certPem);
    fs.writeFileSync(key, pki.keyPem, { mode: 0o600 });
    fs.copyFileSync(pki.caFile, path.join(dir, 'ca.pem'));
    const tls = [`tls-cert-file ${cert}`, `tls-key-file ${key}`, `tls-ca-cert-file ${path.join(dir, 'ca.pem')}`, 'tls-auth-clients no', 'tls-replication yes'];
    const primaryPort = await unusedPort();
    sentinelPort = await unusedPort();
    const write = (name: string, lines: string[]): string => {
      const file = path.join(dir, name);
      fs.writeFileSync(file, `${lines.join('\n')}\n`, { mode: 0o600 });
      return file;
    };
    const common = ['port 0', 'bind 127.0.0.1', `dir ${dir}`, 'daemonize no', 'loglevel warning', ...tls];
    const primary = write('redis.conf', [...common, `tls-port ${primaryPort}`, 'save ""', 'appendonly no', `requirepass ${PASSWORD}`]);
    const sentinel = write('sentinel.conf', [
      ...common,
      `tls-port ${sentinelPort}`,
      `requirepass ${SENTINEL_PASSWORD}`,
      `sentinel monitor tlsgroup 127.0.0.1 ${primaryPort} 1`,
      `sentinel auth-pass tlsgroup ${PASSWORD}`,
    ]);
    for (const [args, port] of [[[primary], primaryPort], [[sentinel, '--sentinel'], sentinelPort]] as const) {
      const child = spawn(REDIS_SERVER ?? 'redis-server', [...args], { stdio: 'ignore' });
      children.push(child);
      await waitUntil(() => tryConnect(port, 500), { timeoutMs: 5000, label: `TLS port ${port}` });
    }
  });

  afterAll(async () => {
    for (const c of children) {
      c.kill('SIGKILL');
      await waitForExit(c, 5000);
    }
    if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
  });

  const open = (tls: boolean | { caFile: string }): Promise<RedisLedgerStore> => {
    const target = resolveRedisTarget({ sentinels: [`127.0.0.1:${sentinelPort}`], name: 'tlsgroup', passwordEnv: 'SLUICE_T_REDIS', sentinelPasswordEnv: 'SLUICE_T_SENTINEL', tls, keyPrefix: 'tls:', leaseTtlMs: 10_000 }, env);
    if (!target.ok) throw new Error(JSON.stringify(target.issues));
    return openRedisLedgerStore({ target: target.value, keyPrefix: 'tls:', commandTimeoutMs: 1000 });
  };

  it('opens with tls.caFile: reads and writes through the primary the sentinel names', async () => {
    const store = await open({ caFile: path.join(dir, 'ca.pem') });
    try {
      expect(store.label).toBe(`sentinel group tlsgroup via 127.0.0.1:${sentinelPort} (TLS)`);
      await store.revoke('g-tls', new Date().toISOString());
      expect((await store.load()).revoked.has('g-tls')).toBe(true);
      expect(await store.revision()).toBe(1);
    } finally {
      await store.close();
    }
  });

  it.each([
    ['without TLS', false],
    ['with TLS but without the CA (system roots only)', true],
  ] as const)('does not open %s, and the error holds no password', async (_name, tls) => {
    const error = await open(tls).then(
      async (store) => {
        await store.close();
        return null;
      },
      (e: unknown) => e as Error,
    );
    expect(error?.message).toMatch(/cannot use the ledger store sentinel group tlsgroup/);
    expect(error?.message).not.toContain(PASSWORD);
    expect(error?.message).not.toContain(SENTINEL_PASSWORD);
  });
});
