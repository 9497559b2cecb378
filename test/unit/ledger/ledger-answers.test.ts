// Standing answers in the ledger (issue 27): an ask answered with scope `grant` is a ledger revision,
// kept in ledger.json (0600, never a token) and, in a fleet, in the shared store first, so a restart and
// every instance keep it. What must not slip: an answer kept for a grant that is unknown or revoked, one
// that outlives its forgotten grant (after a restart, or brought back by a stale whole-table read), one
// another instance learns for a grant it has revoked, and a file written before answers existed that no
// longer opens.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { configSchema, grantSpecSchema } from '../../../src/config/index.js';
import {
  LEDGER_FILE,
  Ledger,
  LedgerStore,
  type GrantRecord,
  type LedgerChange,
  type LedgerEvent,
  type LedgerSnapshot,
  type SharedLedgerStore,
  type StandingAnswer,
} from '../../../src/ledger/index.js';
import { OWN_UID } from '../../support/sluice.js';

const spec = grantSpecSchema.parse({ destinations: ['https://a.test'], ask: { timeoutMs: 1000 } });
const X = 'https://x.test:443';
const Y = 'http://y.test:8080';
const AT = new Date('2026-12-05T10:00:00.000Z');
const now = (): Date => AT;

const dirs: string[] = [];
function stateDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-ledger-answers-'));
  dirs.push(dir);
  return dir;
}
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

const open = (dir: string, shared: SharedLedgerStore | null = null): Promise<Ledger> => Ledger.open(new LedgerStore(dir, OWN_UID), now, shared);
const fileOf = (dir: string): string => fs.readFileSync(path.join(dir, LEDGER_FILE), 'utf8');
const answersInFile = (dir: string): unknown => (JSON.parse(fileOf(dir)) as { answers?: unknown }).answers;
const answer = (grant: string, destination: string, decision: 'allow' | 'deny'): StandingAnswer => ({ grant, destination, decision, at: AT.toISOString() });

describe('Ledger.keepAnswer with the file store', () => {
  let dir: string;
  beforeEach(() => {
    dir = stateDir();
  });

  it('keeps an answer per grant and destination, in ledger.json, and a restart keeps it', async () => {
    const ledger = await open(dir);
    const { record } = await ledger.issue(spec);
    expect(ledger.standingAnswer(record.id, X)).toBeUndefined();
    expect(await ledger.keepAnswer(record.id, X, 'allow')).toBe(true);
    expect(ledger.standingAnswer(record.id, X)).toBe('allow');
    expect(ledger.standingAnswer(record.id, Y)).toBeUndefined();
    expect(ledger.answersOf(record.id)).toEqual([answer(record.id, X, 'allow')]);
    expect(answersInFile(dir)).toEqual([answer(record.id, X, 'allow')]);

    const reopened = await open(dir);
    expect(reopened.standingAnswer(record.id, X)).toBe('allow');
    expect(reopened.answersOf(record.id)).toEqual([answer(record.id, X, 'allow')]);
  });

  it('emits one ledger event per answer kept', async () => {
    const ledger = await open(dir);
    const { record } = await ledger.issue(spec);
    const events: LedgerEvent[] = [];
    ledger.subscribe((e) => events.push(e));
    await ledger.keepAnswer(record.id, X, 'deny');
    expect(events).toEqual([{ kind: 'answered', answer: answer(record.id, X, 'deny') }]);
  });

  it('refuses (false) an answer for an unknown or a revoked grant, and keeps nothing', async () => {
    const ledger = await open(dir);
    const { record } = await ledger.issue(spec);
    await ledger.revoke(record.id);
    const events: LedgerEvent[] = [];
    ledger.subscribe((e) => events.push(e));
    expect(await ledger.keepAnswer('g-never-issued', X, 'allow')).toBe(false);
    expect(await ledger.keepAnswer(record.id, X, 'allow')).toBe(false);
    expect(ledger.standingAnswer('g-never-issued', X)).toBeUndefined();
    expect(ledger.standingAnswer(record.id, X)).toBeUndefined();
    expect(events).toEqual([]);
    expect(answersInFile(dir)).toEqual([]);
    expect((await open(dir)).standingAnswer(record.id, X)).toBeUndefined();
  });

  it('replaces an earlier answer for the same destination with a later one, also across a restart', async () => {
    const ledger = await open(dir);
    const { record } = await ledger.issue(spec);
    await ledger.keepAnswer(record.id, X, 'allow');
    await ledger.keepAnswer(record.id, Y, 'allow');
    await ledger.keepAnswer(record.id, X, 'deny');
    expect(ledger.standingAnswer(record.id, X)).toBe('deny');
    expect(ledger.answersOf(record.id)).toEqual(expect.arrayContaining([answer(record.id, X, 'deny'), answer(record.id, Y, 'allow')]));
    expect(ledger.answersOf(record.id)).toHaveLength(2);
    const reopened = await open(dir);
    expect(reopened.standingAnswer(record.id, X)).toBe('deny');
    expect(reopened.answersOf(record.id)).toHaveLength(2);
  });

  it('drops a forgotten run-time grant’s answers, and only that grant’s, also after a restart', async () => {
    const ledger = await open(dir);
    const { record: gone } = await ledger.issue(spec);
    const { record: kept } = await ledger.issue(spec);
    await ledger.keepAnswer(gone.id, X, 'allow');
    await ledger.keepAnswer(kept.id, X, 'deny');
    await ledger.forget(gone.id);
    expect(ledger.standingAnswer(gone.id, X)).toBeUndefined();
    expect(ledger.answersOf(gone.id)).toEqual([]);
    expect(ledger.standingAnswer(kept.id, X)).toBe('deny');
    expect(answersInFile(dir)).toEqual([answer(kept.id, X, 'deny')]);
    const reopened = await open(dir);
    expect(reopened.standingAnswer(gone.id, X)).toBeUndefined();
    expect(reopened.standingAnswer(kept.id, X)).toBe('deny');
  });

  it('keeps answers for a config grant (which is never forgotten), across a restart', async () => {
    const sections = configSchema.shape.grants.parse([{ id: 'cfg', destinations: ['https://a.test'], ask: { timeoutMs: 1000 } }]);
    const ledger = await open(dir);
    ledger.setConfigGrants(sections);
    expect(await ledger.keepAnswer('cfg', X, 'deny')).toBe(true);
    expect(await ledger.forget('cfg')).toBeUndefined();
    expect(ledger.standingAnswer('cfg', X)).toBe('deny');
    const reopened = await open(dir);
    reopened.setConfigGrants(sections);
    expect(reopened.standingAnswer('cfg', X)).toBe('deny');
  });

  it('keeps ledger.json at mode 0600, holding the answers and the token’s hash, never the token', async () => {
    const ledger = await open(dir);
    const { record, token } = await ledger.issue(spec);
    await ledger.keepAnswer(record.id, X, 'allow');
    expect(fs.statSync(path.join(dir, LEDGER_FILE)).mode & 0o777).toBe(0o600);
    const text = fileOf(dir);
    expect(text).toContain(X);
    expect(text).toContain(record.tokenSha256!);
    expect(text).not.toContain(token);
    expect(text).not.toContain(token.slice('sluice_'.length));
  });

  it('opens a ledger.json written before answers existed (no `answers` key), and keeps answers from then on', async () => {
    const old: GrantRecord = { id: 'g-old', source: 'runtime', spec, tokenSha256: 'b'.repeat(64), issuedAt: '2026-11-01T00:00:00.000Z', revokedAt: null };
    fs.writeFileSync(path.join(dir, LEDGER_FILE), JSON.stringify({ v: 1, runtime: [old], revoked: [] }), { mode: 0o600 });
    const ledger = await open(dir);
    expect(ledger.get('g-old')?.revokedAt).toBeNull();
    expect(ledger.answersOf('g-old')).toEqual([]);
    expect(await ledger.keepAnswer('g-old', X, 'allow')).toBe(true);
    expect((await open(dir)).standingAnswer('g-old', X)).toBe('allow');
  });
});

interface State {
  grants: Map<string, GrantRecord>;
  revoked: Map<string, string>;
  answers: Map<string, StandingAnswer>;
  rev: number;
  log: LedgerChange[];
}

/** The Redis store's semantics in memory (redis-store.ts, as fleet-sync-reconnect.test.ts keeps them), with standing answers. */
class MemoryStore implements SharedLedgerStore {
  readonly label = 'memory';
  state: State = { grants: new Map(), revoked: new Map(), answers: new Map(), rev: 0, log: [] };

  private change(c: { kind: 'issued'; record: GrantRecord } | { kind: 'revoked' | 'forgot'; id: string; at: string } | { kind: 'answered'; answer: StandingAnswer }): void {
    this.state.rev += 1;
    this.state.log.push({ ...c, revision: this.state.rev });
  }
  load = async (): Promise<LedgerSnapshot> => ({ revision: this.state.rev, runtime: [...this.state.grants.values()], revoked: new Map(this.state.revoked), answers: [...this.state.answers.values()] });
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
  // As KEEP_ANSWER: refused for a tombstone, and for a run-time grant the store no longer holds (config
  // grants live in each instance's file). The change's revision, or 0.
  keepAnswer = async (a: StandingAnswer, runtime: boolean): Promise<number> => {
    if (this.state.revoked.has(a.grant) || (runtime && !this.state.grants.has(a.grant))) return 0;
    this.state.answers.set(`${a.grant} ${a.destination}`, a);
    this.change({ kind: 'answered', answer: a });
    return this.state.rev;
  };
  forget = async (id: string, at: string): Promise<void> => {
    if (!this.state.grants.delete(id)) return;
    this.state.revoked.delete(id);
    for (const key of [...this.state.answers.keys()]) if (key.startsWith(`${id} `)) this.state.answers.delete(key);
    this.change({ kind: 'forgot', id, at });
  };
  rotate = async (): Promise<'unknown'> => 'unknown';
  restoreTombstones = async (revoked: ReadonlyMap<string, string>): Promise<void> => {
    for (const [id, at] of revoked) if (!this.state.revoked.has(id)) this.state.revoked.set(id, at);
    this.state.rev += 1;
  };
  revision = async (): Promise<number> => this.state.rev;
  changesSince = async (revision: number): Promise<readonly LedgerChange[] | 'resync'> => this.state.log.filter((c) => c.revision > revision);
  onNotify = async (): Promise<void> => undefined;
  close = async (): Promise<void> => undefined;
}

describe('standing answers through a shared ledger store', () => {
  let store: MemoryStore;
  beforeEach(() => {
    store = new MemoryStore();
  });

  /** Applies what the store logged since the ledger's revision, as FleetSync does. */
  async function catchUp(ledger: Ledger): Promise<void> {
    const changes = await store.changesSince(ledger.revision);
    if (changes === 'resync') throw new Error('unexpected resync');
    await ledger.applyChanges(changes);
  }

  it('keeps an answer in the store first; another instance applies the `answered` change and emits {kind: answered}', async () => {
    const a = await open(stateDir(), store);
    const bDir = stateDir();
    const b = await open(bDir, store);
    const { record } = await a.issue(spec);
    await catchUp(b);
    const events: LedgerEvent[] = [];
    b.subscribe((e) => events.push(e));
    expect(await a.keepAnswer(record.id, X, 'allow')).toBe(true);
    expect([...store.state.answers.values()]).toEqual([answer(record.id, X, 'allow')]);
    expect(b.standingAnswer(record.id, X)).toBeUndefined();
    await catchUp(b);
    expect(b.standingAnswer(record.id, X)).toBe('allow');
    expect(events).toEqual([{ kind: 'answered', answer: answer(record.id, X, 'allow') }]);
    // Applied once: the same change again (a second poll) changes and emits nothing.
    await b.applyChanges(store.state.log);
    expect(events).toHaveLength(1);
    expect(answersInFile(bDir)).toEqual([answer(record.id, X, 'allow')]);
  });

  // As an instance's own issue and revoke are not announced again when its sync reads them back.
  it('announces an answer once on the instance that kept it, not again when its sync applies its own change', async () => {
    const a = await open(stateDir(), store);
    const { record } = await a.issue(spec);
    await catchUp(a);
    const events: LedgerEvent[] = [];
    a.subscribe((e) => events.push(e));
    await a.keepAnswer(record.id, X, 'allow');
    await catchUp(a);
    expect(a.standingAnswer(record.id, X)).toBe('allow');
    expect(events).toEqual([{ kind: 'answered', answer: answer(record.id, X, 'allow') }]);
  });

  // The store orders answers (its log); an instance must end on the store's last one. Here A's own reply
  // arrives after its sync has already applied a later answer from B for the same destination.
  it('ends on the store’s last answer when its own reply arrives after its sync applied a later one', async () => {
    const a = await open(stateDir(), store);
    const b = await open(stateDir(), store);
    const { record } = await a.issue(spec);
    await catchUp(a);
    await catchUp(b);
    const take = store.keepAnswer;
    let replyToA!: () => void;
    const replied = new Promise<void>((resolve) => (replyToA = resolve));
    store.keepAnswer = async (kept, runtime) => {
      const taken = await take(kept, runtime);
      await replied;
      return taken;
    };
    const keptOnA = a.keepAnswer(record.id, X, 'allow');
    store.keepAnswer = take;
    expect(await b.keepAnswer(record.id, X, 'deny')).toBe(true);
    await catchUp(a);
    replyToA();
    expect(await keptOnA).toBe(true);
    expect([...store.state.answers.values()].map((s) => s.decision)).toEqual(['deny']);
    expect(b.standingAnswer(record.id, X)).toBe('deny');
    expect(a.standingAnswer(record.id, X)).toBe('deny');
  });

  it('ignores an `answered` change for a grant this instance has revoked', async () => {
    const b = await open(stateDir(), store);
    const { record } = await b.issue(spec);
    await catchUp(b);
    await b.revoke(record.id);
    const events: LedgerEvent[] = [];
    b.subscribe((e) => events.push(e));
    // Another instance kept it before the store took this revocation: the change comes after it here.
    await b.applyChanges([{ revision: b.revision + 1, kind: 'answered', answer: answer(record.id, X, 'allow') }]);
    expect(b.standingAnswer(record.id, X)).toBeUndefined();
    expect(events).toEqual([]);
  });

  it('refuses (false) an answer the store refuses (its tombstone came first), and keeps nothing here', async () => {
    const a = await open(stateDir(), store);
    const { record } = await a.issue(spec);
    await store.revoke(record.id, AT.toISOString()); // another instance's revocation, not applied here yet
    expect(await a.keepAnswer(record.id, X, 'allow')).toBe(false);
    expect(a.standingAnswer(record.id, X)).toBeUndefined();
    expect(store.state.answers.size).toBe(0);
  });

  it('replaces this instance’s whole set of answers with the snapshot’s on resync', async () => {
    const dir = stateDir();
    const b = await open(dir, store);
    const { record: g1 } = await b.issue(spec);
    const { record: g2 } = await b.issue(spec);
    await b.keepAnswer(g1.id, X, 'allow');
    await b.keepAnswer(g2.id, X, 'allow');
    const snapshot: LedgerSnapshot = { revision: store.state.rev + 5, runtime: [g1, g2], revoked: new Map(), answers: [answer(g2.id, Y, 'deny')] };
    await b.resync(snapshot);
    expect(b.standingAnswer(g1.id, X)).toBeUndefined();
    expect(b.standingAnswer(g2.id, X)).toBeUndefined();
    expect(b.standingAnswer(g2.id, Y)).toBe('deny');
    expect(answersInFile(dir)).toEqual([answer(g2.id, Y, 'deny')]);
    // A snapshot without answers (a store written before them) leaves none.
    await b.resync({ revision: snapshot.revision, runtime: [g1, g2], revoked: new Map() });
    expect(b.answersOf(g2.id)).toEqual([]);
  });

  it('does not bring back a forgotten grant’s answers from a whole-table read taken before the forget', async () => {
    const a = await open(stateDir(), store);
    const { record } = await a.issue(spec);
    await a.keepAnswer(record.id, X, 'allow');
    const stale = await store.load();
    await a.forget(record.id);
    await a.resync(stale);
    expect(a.standingAnswer(record.id, X)).toBeUndefined();
    expect(store.state.answers.size).toBe(0);
  });
});
