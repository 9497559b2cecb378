// A failover of the shared store (a Sentinel promoting a replica, docs/fleet.md "Sentinel") can lose the
// last changes the old primary acknowledged, since replication is asynchronous; other instances may then
// write on the new primary and reach the same revision with a different history. So after any new
// connection to the store the sync reads the whole table and writes back the tombstones it lacks: an
// acknowledged revocation survives, whatever the revisions say. And a whole-table read that began
// before this instance's forget reached the store does not bring the forgotten grant back.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { grantSpecSchema } from '../../../src/config/index.js';
import { FleetSync, Ledger, LedgerStore, type GrantRecord, type LedgerChange, type LedgerSnapshot, type SharedLedgerStore } from '../../../src/ledger/index.js';
import { OWN_UID } from '../../support/sluice.js';

interface State {
  grants: Map<string, GrantRecord>;
  revoked: Map<string, string>;
  rev: number;
  log: LedgerChange[];
}

const copy = (s: State): State => ({ grants: new Map(s.grants), revoked: new Map(s.revoked), rev: s.rev, log: [...s.log] });

/** The Redis store's semantics in memory (redis-store.ts), with a failover to a copy of an earlier state. */
class MemoryStore implements SharedLedgerStore {
  readonly label = 'memory';
  state: State = { grants: new Map(), revoked: new Map(), rev: 0, log: [] };
  connectionCount = 1;
  loads = 0;

  private change(c: { kind: 'issued'; record: GrantRecord } | { kind: 'revoked' | 'forgot'; id: string; at: string }): void {
    this.state.rev += 1;
    this.state.log.push({ ...c, revision: this.state.rev });
  }
  /** The new primary is `replica` (what it had replicated), reached over a new connection. */
  failover(replica: State): void {
    this.state = copy(replica);
    this.connectionCount += 1;
  }
  connections = (): number => this.connectionCount;
  load = async (): Promise<LedgerSnapshot> => {
    this.loads += 1;
    return { revision: this.state.rev, runtime: [...this.state.grants.values()], revoked: new Map(this.state.revoked) };
  };
  issue = async (record: GrantRecord): Promise<boolean> => {
    if (this.state.grants.has(record.id) || this.state.revoked.has(record.id)) return false;
    this.state.grants.set(record.id, record);
    this.change({ kind: 'issued', record });
    return true;
  };
  revoke = async (id: string, at: string): Promise<void> => {
    if (this.state.revoked.has(id)) return;
    this.state.revoked.set(id, at);
    this.change({ kind: 'revoked', id, at });
  };
  keepAnswer = async (): Promise<number> => 0;
  forget = async (id: string, at: string): Promise<void> => {
    if (!this.state.grants.delete(id)) return;
    this.state.revoked.delete(id);
    this.change({ kind: 'forgot', id, at });
  };
  rotate = async (): Promise<'unknown'> => 'unknown';
  // As the RESTORE script: no log entry, a revision bump, so every instance reads the whole table.
  restoreTombstones = async (revoked: ReadonlyMap<string, string>): Promise<void> => {
    for (const [id, at] of revoked) {
      if (!this.state.revoked.has(id)) this.state.revoked.set(id, at);
      this.state.grants.delete(id);
    }
    this.state.rev += 1;
  };
  revision = async (): Promise<number> => this.state.rev;
  changesSince = async (revision: number): Promise<readonly LedgerChange[] | 'resync'> => {
    const after = this.state.log.filter((c) => c.revision > revision);
    return after.length > 0 && after[0]!.revision !== revision + 1 ? 'resync' : after;
  };
  onNotify = async (): Promise<void> => undefined;
  close = async (): Promise<void> => undefined;
}

const spec = grantSpecSchema.parse({ destinations: ['https://a.test'] });
const dirs: string[] = [];
const syncs: FleetSync[] = [];

async function instance(store: MemoryStore): Promise<{ ledger: Ledger; sync: FleetSync }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-fleet-sync-'));
  dirs.push(dir);
  const ledger = await Ledger.open(new LedgerStore(dir, OWN_UID), undefined, store);
  // A poll period far past the test: every catch-up here is an explicit kick().
  const sync = new FleetSync(ledger, store, { pollMs: 3_600_000, maxStaleMs: 1000, now: Date.now, onStoreState: () => undefined });
  await sync.start();
  syncs.push(sync);
  return { ledger, sync };
}

let store: MemoryStore;
beforeEach(() => {
  store = new MemoryStore();
});
afterEach(async () => {
  for (const s of syncs.splice(0)) await s.stop();
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

describe('FleetSync after a new connection to the store', () => {
  it('reads the whole table and writes back a revocation the new primary lost, though another instance brought it to the same revision', async () => {
    const a = await instance(store);
    const b = await instance(store);
    const { record: g } = await a.ledger.issue(spec);
    const replica = copy(store.state);
    await a.ledger.revoke(g.id); // acknowledged by the old primary only
    await a.sync.kick();
    const revisionBefore = a.ledger.revision;

    store.failover(replica);
    const { record: h } = await b.ledger.issue(spec); // the new primary reaches A's revision, another history
    expect(store.state.rev).toBe(revisionBefore);
    expect(store.state.revoked.has(g.id)).toBe(false);

    await a.sync.kick();
    expect(store.state.revoked.has(g.id)).toBe(true);
    expect(store.state.grants.has(g.id)).toBe(false);
    expect(a.ledger.get(g.id)?.revokedAt).not.toBeNull();
    expect(a.ledger.get(h.id)?.revokedAt).toBeNull();
    // B, which never saw the revocation, learns it from the write-back.
    await b.sync.kick();
    expect(b.ledger.get(g.id)).toBeUndefined();
    expect([...(await store.load()).revoked.keys()]).toContain(g.id);
  });

  it('on the same connection, an equal revision costs one round trip and no whole-table read', async () => {
    const a = await instance(store);
    await a.ledger.issue(spec);
    await a.sync.kick();
    const loads = store.loads;
    for (let i = 0; i < 5; i += 1) await a.sync.kick();
    expect(store.loads).toBe(loads);
  });
});

describe('Ledger.resync and a forget in flight', () => {
  it('does not bring back a grant this instance forgot, from a table read before the store took the forget', async () => {
    const a = await instance(store);
    const { record: g } = await a.ledger.issue(spec);
    const stale = await store.load();
    expect(stale.runtime.map((r) => r.id)).toContain(g.id);
    await a.ledger.forget(g.id);
    await a.ledger.resync(stale);
    expect(a.ledger.get(g.id)).toBeUndefined();
  });
});
