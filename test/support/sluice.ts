// Starts Sluice in-process for a test: config from an object (validated like a file), DNS answered by
// a fixed table that maps test names to loopback, audit records collected in memory.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { stringify } from 'yaml';
import { parseConfigText } from '../../src/config/index.js';
import { ProxyError, type LookupAll, type LookupAnswer } from '../../src/core/index.js';
import { startApp, type AppOptions, type SluiceApp } from '../../src/app.js';
import type { AuditRecordV1, CloseRecordV1, DecisionRecordV1 } from '../../src/audit/index.js';

export interface TestSluice {
  readonly app: SluiceApp;
  /** Port of the first TCP listener. */
  readonly port: number;
  readonly records: AuditRecordV1[];
  readonly stateDir: string;
  decisions(): DecisionRecordV1[];
  closes(): CloseRecordV1[];
  close(): Promise<void>;
}

/** A LookupAll that answers from a table (name → addresses) and says "no address" for anything else. */
export function tableLookup(table: Record<string, readonly string[]>, counter?: { count: number }): LookupAll {
  return async (host) => {
    if (counter !== undefined) counter.count += 1;
    const addresses = table[host];
    if (addresses === undefined) throw new ProxyError('ERR_DNS_NO_ADDRESS', 'name has no address');
    return addresses.map((address): LookupAnswer => ({ address, family: address.includes(':') ? 6 : 4, ttlSeconds: 0 }));
  };
}

export const silentLog = { info: () => undefined, warn: () => undefined, error: () => undefined };

/** The uid the test process writes files as: Sluice's own, which its state files must be owned by. */
export const OWN_UID = process.geteuid?.() ?? 0;

export async function startSluice(
  config: Record<string, unknown>,
  options: { lookup?: LookupAll; env?: Record<string, string>; cwd?: string } & Pick<AppOptions, 'hostInterfaces' | 'hostRefreshMs' | 'gss' | 'log' | 'events'> = {},
): Promise<TestSluice> {
  // Each instance gets its own state dir, so ledgers (revocations) never leak between tests. A config
  // that names its own state dir owns it (and removes it); none is made for it here.
  const stateDir = config['state'] === undefined ? fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-state-')) : '';
  const withDefaults = {
    listeners: [{ name: 'shared', listen: '127.0.0.1:0', identify: 'token' }],
    state: stateDir,
    ...config,
  };
  // Sluice's working directory: relative paths in config and in the admin API resolve against it.
  const cwd = options.cwd ?? os.tmpdir();
  const parsed = parseConfigText(stringify(withDefaults), path.join(cwd, 'sluice-test.yaml'), cwd);
  if (!parsed.ok) throw new Error(`test config invalid: ${parsed.issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`);
  const records: AuditRecordV1[] = [];
  const app = await startApp(parsed.config, {
    env: options.env ?? {},
    cwd,
    uid: OWN_UID,
    lookup: options.lookup ?? tableLookup({}),
    audit: { write: (r) => void records.push(r), flush: () => Promise.resolve() },
    log: options.log ?? silentLog,
    ...(options.hostInterfaces === undefined ? {} : { hostInterfaces: options.hostInterfaces }),
    ...(options.hostRefreshMs === undefined ? {} : { hostRefreshMs: options.hostRefreshMs }),
    ...(options.gss === undefined ? {} : { gss: options.gss }),
    ...(options.events === undefined ? {} : { events: options.events }),
  });
  const tcp = app.listeners.find((l) => !l.address.startsWith('unix:'));
  const port = tcp === undefined ? 0 : Number(tcp.address.slice(tcp.address.lastIndexOf(':') + 1));
  return {
    app,
    port,
    records,
    decisions: () => records.filter((r): r is DecisionRecordV1 => r.kind === 'decision'),
    closes: () => records.filter((r): r is CloseRecordV1 => r.kind === 'close'),
    stateDir: String(parsed.config.state),
    close: async () => {
      await app.close();
      if (parsed.config.state === stateDir) fs.rmSync(stateDir, { recursive: true, force: true });
    },
  };
}

/** A grant's tokenSha256 for a known test token. */
export function tokenHash(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}
