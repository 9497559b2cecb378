// The ledger: every grant over time. Config grants and run-time grants (issued through the admin API,
// token shown once, only its SHA-256 kept), revocations that never come back, generations, expiry.
// Run-time grants and all revocations persist in the state dir, so a restart (even after kill -9)
// neither loses nor resurrects a grant (principle A5 in docs/principles.md;
// docs/decisions/0008-ledger-persistence.md).
import { createHash, randomBytes } from 'node:crypto';
import { ProxyError } from '../core/index.js';
import { resolveListen, type GrantSection, type GrantSpec } from '../config/index.js';
import { describeStoreError } from './describe-store-error.js';
import type { LedgerChange, LedgerSnapshot, SharedLedgerStore, StandingAnswer } from './shared-store.js';
import type { LedgerStore } from './store.js';

export interface GrantRecord {
  readonly id: string;
  readonly source: 'config' | 'runtime';
  /** The grant fields as config or the admin API gave them (never a token). */
  readonly spec: GrantSpec;
  /** SHA-256 (hex) of the token, or null for a config grant whose token comes from config. */
  readonly tokenSha256: string | null;
  readonly issuedAt: string;
  readonly revokedAt: string | null;
  /** After a rotation with a grace: the previous token's SHA-256 (hex), accepted until `until` (ISO 8601). */
  readonly previousToken?: { readonly sha256: string; readonly until: string };
  /** When the token was last rotated (ISO 8601). */
  readonly rotatedAt?: string;
}

/** The longest grace a rotation may give the previous token: 24 hours. */
export const MAX_ROTATION_GRACE_MS = 86_400_000;

export type RotateOutcome =
  | { readonly ok: true; readonly record: GrantRecord; readonly token: string }
  | { readonly ok: false; readonly why: 'unknown' | 'from_config' | 'revoked' | 'conflict' };

interface PersistedState {
  readonly v: 1;
  readonly runtime: readonly GrantRecord[];
  /** Every revoked id with when; config grants with these ids load revoked. */
  readonly revoked: readonly { readonly id: string; readonly at: string }[];
  /** Standing answers to asks (issue 27); absent in files written before them. */
  readonly answers?: readonly StandingAnswer[];
}

export type LedgerEvent =
  | { readonly kind: 'revoked'; readonly record: GrantRecord }
  | { readonly kind: 'issued'; readonly record: GrantRecord }
  | { readonly kind: 'rotated'; readonly record: GrantRecord }
  /** A standing answer was kept, here or (through the shared store) on another instance. */
  | { readonly kind: 'answered'; readonly answer: StandingAnswer }
  /** Config grants were (re)loaded; `revoked` are those that stay revoked whatever the file says. */
  | { readonly kind: 'config_loaded'; readonly revoked: readonly string[] };

/** A change another instance made, as this instance learns it from the shared store. */
export type RemoteChange =
  | { readonly kind: 'issued'; readonly record: GrantRecord }
  | { readonly kind: 'revoked'; readonly id: string; readonly at: string }
  | { readonly kind: 'forgot'; readonly id: string };

/** 256 bits from the CSPRNG, base64url: opaque, unguessable, safe in a proxy URL's password. */
export function newToken(): string {
  return `sluice_${randomBytes(32).toString('base64url')}`;
}

export function tokenSha256Hex(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

function specOf(section: GrantSection): GrantSpec {
  const { id: _id, tokenSha256: _hash, tokenEnv: _env, ...spec } = section;
  return spec;
}

export class Ledger {
  private readonly records = new Map<string, GrantRecord>();
  private readonly revoked = new Map<string, string>();
  private readonly listeners = new Set<(event: LedgerEvent) => void>();
  private readonly remoteListeners = new Set<(change: RemoteChange) => void>();
  /** Told of rotations another instance made (kept apart from RemoteChange, whose listeners predate it). */
  private readonly rotatedListeners = new Set<(record: GrantRecord) => void>();
  /** Revocations made here that the shared store has not taken yet (it was away): retried by sync. */
  private readonly unsent = new Map<string, { readonly kind: 'revoke' | 'forget'; readonly at: string }>();
  /** Until when (performance.now()) the shared store counts as away: calls try once, without waiting. */
  private storeAwayUntil = 0;
  /**
   * Run-time grants this instance forgot in the last FORGOTTEN_KEEP_MS (id → when): a whole-table read
   * that began before the store took the forget still lists the grant, and must not bring it back
   * (resync runs after every reconnect to the store: fleet-sync.ts).
   */
  private readonly forgotten = new Map<string, number>();
  /** Revocations and forgets made here and not yet answered by the store: not lost, only on their way. */
  private readonly sending = new Set<string>();
  /** Standing answers to asks: grant id → destination → the answer (issue 27). */
  private readonly answers = new Map<string, Map<string, StandingAnswer>>();
  /** The shared store's revision this instance has applied (0 with the file store). */
  revision = 0;

  private constructor(
    private readonly store: LedgerStore,
    private readonly now: () => Date,
    private readonly shared: SharedLedgerStore | null,
    private readonly cwd: string | null,
  ) {}

  /**
   * Opens the ledger from the state directory and, with a shared store, from the store: the state file
   * then keeps this instance's tombstones, so a revoked grant never comes back even if the store
   * comes back empty (docs/fleet.md). `cwd` is Sluice's working directory: a run-time grant's relative
   * `unix:` listen, as versions before issue 23 stored it, resolves against it when loaded.
   */
  static async open(store: LedgerStore, now: () => Date = () => new Date(), shared: SharedLedgerStore | null = null, cwd: string | null = null): Promise<Ledger> {
    const ledger = new Ledger(store, now, shared, cwd);
    let state: unknown;
    try {
      state = await store.read();
    } catch (error) {
      if (error instanceof ProxyError) throw error;
      throw new ProxyError('ERR_LEDGER_UNREADABLE', `cannot read ${store.file}: ${(error as Error).message}`, { cause: error });
    }
    // Written back at once: the file then holds only absolute socket paths.
    if (state !== null && ledger.restore(state) && shared === null) await ledger.persist();
    if (shared !== null) {
      // Run-time grants live in the shared store; the file's only authority is its tombstones.
      for (const [id, record] of ledger.records) if (record.source === 'runtime') ledger.records.delete(id);
      await ledger.resync(await shared.load());
    }
    return ledger;
  }

  get isShared(): boolean {
    return this.shared !== null;
  }

  /** True when a record's listen had to be resolved (the file is then stale). */
  private restore(state: unknown): boolean {
    const s = state as Partial<PersistedState>;
    if (s.v !== 1 || !Array.isArray(s.runtime) || !Array.isArray(s.revoked)) {
      throw new ProxyError('ERR_LEDGER_UNREADABLE', `${this.store.file} is not a version 1 ledger`);
    }
    for (const r of s.revoked) this.revoked.set(r.id, r.at);
    for (const a of s.answers ?? []) this.learnAnswer(a);
    let resolved = false;
    for (const stored of s.runtime) {
      const record = this.withAbsoluteListen(stored);
      resolved ||= record !== stored;
      const revokedAt = this.revoked.get(record.id) ?? record.revokedAt ?? null;
      this.records.set(record.id, { ...record, source: 'runtime', revokedAt });
    }
    return resolved;
  }

  /**
   * A record from the file or the shared store, with a relative `unix:` listen resolved against Sluice's
   * working directory: bound relative, /proc/net/unix would list it relative, where `sluice run`'s socket
   * mask never sees it (issue 23, review 2026-12-04 finding 3).
   */
  private withAbsoluteListen(record: GrantRecord): GrantRecord {
    const listen = record.spec.listen;
    if (this.cwd === null || listen === undefined) return record;
    const resolved = resolveListen(listen, this.cwd);
    return resolved === listen ? record : { ...record, spec: { ...record.spec, listen: resolved } };
  }

  private persist(): Promise<void> {
    const state: PersistedState = {
      v: 1,
      runtime: this.shared === null ? [...this.records.values()].filter((r) => r.source === 'runtime') : [],
      revoked: [...this.revoked].map(([id, at]) => ({ id, at })),
      answers: [...this.answers.values()].flatMap((byDestination) => [...byDestination.values()]),
    };
    return this.store.write(state);
  }

  /** Replaces the config grants (start and reload); a revoked id stays revoked whatever config says. */
  setConfigGrants(sections: readonly GrantSection[]): void {
    for (const [id, record] of this.records) if (record.source === 'config') this.records.delete(id);
    const at = this.now().toISOString();
    const revoked: string[] = [];
    for (const section of sections) {
      const existing = this.records.get(section.id);
      if (existing?.source === 'runtime') continue; // a run-time grant keeps its id; config cannot shadow it
      this.records.set(section.id, {
        id: section.id,
        source: 'config',
        spec: specOf(section),
        tokenSha256: section.tokenSha256 ?? null,
        issuedAt: at,
        revokedAt: this.revoked.get(section.id) ?? null,
      });
      if (this.revoked.has(section.id)) revoked.push(section.id);
    }
    this.emit({ kind: 'config_loaded', revoked });
  }

  async issue(spec: GrantSpec): Promise<{ record: GrantRecord; token: string }> {
    let id: string;
    do id = `g-${randomBytes(9).toString('base64url')}`;
    while (this.records.has(id) || this.revoked.has(id));
    const token = newToken();
    const record: GrantRecord = { id, source: 'runtime', spec, tokenSha256: tokenSha256Hex(token), issuedAt: this.now().toISOString(), revokedAt: null };
    // Shared: the store takes it first (it refuses an id taken anywhere in the fleet). Only a grant the
    // store took is answered 201; otherwise 503, never 500 (review 2026-12-04 finding 7).
    if (this.shared !== null) {
      const shared = this.shared;
      let taken: boolean;
      try {
        taken = await this.untilStoreAnswers(() => shared.issue(record));
      } catch (error) {
        throw new ProxyError('ERR_LEDGER_STORE_UNAVAILABLE', `the ledger store ${shared.label} did not take the grant (${describeStoreError(error, shared)}); nothing was issued`, { cause: error });
      }
      if (!taken) return this.issue(spec);
    }
    this.records.set(id, record);
    await this.persist();
    this.emit({ kind: 'issued', record });
    return { record, token };
  }

  /**
   * Gives a live run-time grant a new token (returned once; only its SHA-256 is kept). With `graceMs` > 0
   * the previous hash is kept beside it until then, an absolute time, so neither a restart nor another
   * instance of the fleet can stretch the grace. Resolves once the change is durable; a config grant's
   * token lives in the config file and is never rotated here.
   */
  async rotate(id: string, graceMs: number): Promise<RotateOutcome> {
    const record = this.records.get(id);
    if (record === undefined) return { ok: false, why: 'unknown' };
    if (record.source !== 'runtime') return { ok: false, why: 'from_config' };
    if (record.revokedAt !== null) return { ok: false, why: 'revoked' };
    const token = newToken();
    const now = this.now();
    const { previousToken: _previous, ...rest } = record;
    const base = { ...rest, tokenSha256: tokenSha256Hex(token), rotatedAt: now.toISOString() };
    const grace = Math.min(Math.max(0, Math.floor(graceMs)), MAX_ROTATION_GRACE_MS);
    const rotated: GrantRecord =
      grace > 0 && record.tokenSha256 !== null ? { ...base, previousToken: { sha256: record.tokenSha256, until: new Date(now.getTime() + grace).toISOString() } } : base;
    if (this.shared !== null) {
      let taken: 'rotated' | 'unknown' | 'conflict';
      try {
        const shared = this.shared;
        taken = await this.untilStoreAnswers(() => shared.rotate(rotated, record.tokenSha256 ?? ''));
      } catch (error) {
        throw new ProxyError('ERR_LEDGER_STORE_UNAVAILABLE', `the ledger store ${this.shared.label} did not take the rotation (${describeStoreError(error, this.shared)}); nothing was changed`, { cause: error });
      }
      if (taken === 'unknown') return { ok: false, why: this.revoked.has(id) ? 'revoked' : 'unknown' };
      if (taken === 'conflict') return { ok: false, why: 'conflict' };
    }
    this.records.set(id, rotated);
    await this.persist();
    this.emit({ kind: 'rotated', record: rotated });
    return { ok: true, record: rotated, token };
  }

  /** Revokes one grant for good. Resolves once the revocation is durable; returns undefined if unknown. */
  async revoke(id: string): Promise<GrantRecord | undefined> {
    const record = this.records.get(id);
    if (record === undefined) return undefined;
    if (record.revokedAt !== null) return record;
    const at = this.now().toISOString();
    const revoked = { ...record, revokedAt: at };
    this.records.set(id, revoked);
    this.revoked.set(id, at);
    if (this.shared !== null) this.sending.add(id);
    // Live connections end before the write completes: revocation must not wait on the disk.
    this.emit({ kind: 'revoked', record: revoked });
    await this.persistThenSend(id, 'revoke', at);
    return revoked;
  }

  /** Persists a local revoke or forget, then sends it; from the local change on it counts as on its way (resync). */
  private async persistThenSend(id: string, kind: 'revoke' | 'forget', at: string): Promise<void> {
    try {
      await this.persist();
    } catch (error) {
      this.sending.delete(id);
      throw error;
    }
    await this.send(id, kind, at);
  }

  /** Hands a revocation to the shared store; kept for sync to retry when the store is away, then thrown. */
  private async send(id: string, kind: 'revoke' | 'forget', at: string): Promise<void> {
    if (this.shared === null) return;
    this.sending.add(id);
    try {
      const shared = this.shared;
      await this.untilStoreAnswers(() => (kind === 'revoke' ? shared.revoke(id, at) : shared.forget(id, at)));
      this.unsent.delete(id);
    } catch (error) {
      this.unsent.set(id, { kind, at });
      throw new ProxyError('ERR_LEDGER_STORE_UNAVAILABLE', `revoked on this instance; the ledger store ${this.shared.label} did not take it yet (${describeStoreError(error, this.shared)}), it is retried until it does`, { cause: error });
    } finally {
      this.sending.delete(id);
    }
  }

  /**
   * Calls the shared store, again after a short wait while it fails, for at most STORE_WAIT_MS in all: a
   * write that meets a reconnect (Redis restarting: back within 100 ms in the review's fleet run) is
   * answered by the store, not with a 503 it did not need. Safe because every store write is idempotent:
   * the same issue or rotation again is "taken", a revoke or forget again changes nothing (redis-store.ts).
   * A ProxyError (a corrupt store) is not retried. Once a wait ran out, the next STORE_WAIT_MS of calls
   * try once each, so a generation of many grants is not revoked one second at a time.
   */
  private async untilStoreAnswers<T>(call: () => Promise<T>): Promise<T> {
    const started = performance.now();
    const deadline = started < this.storeAwayUntil ? started : started + STORE_WAIT_MS;
    for (let attempt = 0; ; attempt++) {
      try {
        const answer = await call();
        this.storeAwayUntil = 0;
        return answer;
      } catch (error) {
        const left = deadline - performance.now();
        if (error instanceof ProxyError || left <= 0) {
          if (!(error instanceof ProxyError)) this.storeAwayUntil = performance.now() + STORE_WAIT_MS;
          throw error;
        }
        const wait = Math.min(left, STORE_RETRY_DELAYS_MS[Math.min(attempt, STORE_RETRY_DELAYS_MS.length - 1)] ?? 100);
        await new Promise((resolve) => setTimeout(resolve, wait));
      }
    }
  }

  /** Retries the revocations the shared store did not take. */
  async sendUnsent(): Promise<void> {
    for (const [id, { kind, at }] of [...this.unsent]) await this.send(id, kind, at);
  }

  /**
   * Revokes a run-time grant and drops it from the ledger (a run-owned grant, once its run ends): it
   * cannot come back, since only the ledger knew it, and the ledger stays bounded however many runs
   * there are. Config grants are never forgotten: the file would bring them back. Undefined if unknown.
   */
  async forget(id: string): Promise<GrantRecord | undefined> {
    const record = this.records.get(id);
    if (record === undefined || record.source !== 'runtime') return undefined;
    const revoked = record.revokedAt === null ? { ...record, revokedAt: this.now().toISOString() } : record;
    this.records.delete(id);
    this.revoked.delete(id);
    this.answers.delete(id);
    const now = performance.now();
    for (const [old, when] of this.forgotten) if (now - when > FORGOTTEN_KEEP_MS) this.forgotten.delete(old);
    this.forgotten.set(id, now);
    if (this.shared !== null) this.sending.add(id);
    if (record.revokedAt === null) this.emit({ kind: 'revoked', record: revoked });
    await this.persistThenSend(id, 'forget', revoked.revokedAt ?? this.now().toISOString());
    return revoked;
  }

  async revokeGeneration(generation: string): Promise<GrantRecord[]> {
    const matching = [...this.records.values()].filter((r) => r.spec.generation === generation && r.revokedAt === null);
    const done: GrantRecord[] = [];
    // Every grant of the generation is revoked here even when the shared store is away; then the first
    // store error is thrown (the store gets them when it is back).
    let storeError: unknown = null;
    for (const record of matching) {
      const revoked = await this.revoke(record.id).catch((error: unknown) => {
        storeError ??= error;
        return this.records.get(record.id);
      });
      if (revoked !== undefined) done.push(revoked);
    }
    if (storeError !== null) throw storeError;
    return done;
  }

  get(id: string): GrantRecord | undefined {
    return this.records.get(id);
  }

  /** The standing answer for (grant, `scheme://host:port`), or undefined: the grant asks again. */
  standingAnswer(grantId: string, destination: string): 'allow' | 'deny' | undefined {
    return this.answers.get(grantId)?.get(destination)?.decision;
  }

  /**
   * Keeps a supervisor's answer for the rest of a grant's life (issue 27, scope `grant`): a new ledger
   * revision, in the state file and, in a fleet, in the shared store first, so every instance applies it.
   * The grant must be known and live; false otherwise (nothing kept). A later answer for the same
   * destination replaces the earlier one.
   */
  async keepAnswer(grantId: string, destination: string, decision: 'allow' | 'deny'): Promise<boolean> {
    const record = this.records.get(grantId);
    if (record === undefined || record.revokedAt !== null) return false;
    const answer: StandingAnswer = { grant: grantId, destination, decision, at: this.now().toISOString() };
    if (this.shared !== null) {
      const shared = this.shared;
      let revision: number;
      try {
        revision = await this.untilStoreAnswers(() => shared.keepAnswer(answer, record.source === 'runtime'));
      } catch (error) {
        throw new ProxyError('ERR_LEDGER_STORE_UNAVAILABLE', `the ledger store ${shared.label} did not take the answer (${describeStoreError(error, shared)}); it applies to the held hops only`, { cause: error });
      }
      if (revision === 0) return false;
      // The sync may have applied this change (and later answers for the same destination) while the
      // store's reply was on its way: the log's order is the fleet's, so this instance follows it.
      if (revision <= this.revision) return true;
    }
    this.learnAnswer(answer);
    await this.persist();
    this.emit({ kind: 'answered', answer });
    return true;
  }

  /** Every standing answer of one grant (for its view and `sluice explain`). */
  answersOf(grantId: string): readonly StandingAnswer[] {
    return [...(this.answers.get(grantId)?.values() ?? [])];
  }

  private learnAnswer(answer: StandingAnswer): void {
    let byDestination = this.answers.get(answer.grant);
    if (byDestination === undefined) this.answers.set(answer.grant, (byDestination = new Map()));
    byDestination.set(answer.destination, answer);
  }

  list(): GrantRecord[] {
    return [...this.records.values()];
  }

  /** Applies changes read from the shared store's log, in order; each one once. */
  async applyChanges(changes: readonly LedgerChange[]): Promise<void> {
    let touched = false;
    for (const change of changes) {
      if (change.revision <= this.revision) continue;
      this.revision = change.revision;
      if (change.kind === 'issued') {
        if (this.records.has(change.record.id) || this.revoked.has(change.record.id) || this.forgotten.has(change.record.id)) continue;
        const record = this.withAbsoluteListen(change.record);
        this.records.set(record.id, record);
        this.emitRemote({ kind: 'issued', record });
      } else if (change.kind === 'revoked') touched = this.learnRevoked(change.id, change.at) || touched;
      else if (change.kind === 'rotated') this.learnRotated(change.record);
      else if (change.kind === 'answered') {
        if (this.revoked.has(change.answer.grant) || this.forgotten.has(change.answer.grant)) continue;
        // This instance's own answer, learned when the store took it: announced once, not again.
        const held = this.answers.get(change.answer.grant)?.get(change.answer.destination);
        if (held?.decision === change.answer.decision && held.at === change.answer.at) continue;
        this.learnAnswer(change.answer);
        touched = true;
        this.emit({ kind: 'answered', answer: change.answer });
      } else {
        const record = this.records.get(change.id);
        if (record?.source !== 'runtime') continue;
        this.records.delete(change.id);
        this.revoked.delete(change.id);
        this.answers.delete(change.id);
        this.unsent.delete(change.id);
        touched = true;
        this.emitRemote({ kind: 'forgot', id: change.id });
      }
    }
    if (touched) await this.persist();
  }

  /** A rotation from the store: applied unless this instance already holds that token hash (its own). */
  private learnRotated(record: GrantRecord): void {
    const local = this.records.get(record.id);
    if (local?.source !== 'runtime' || local.tokenSha256 === record.tokenSha256) return;
    const learned = { ...this.withAbsoluteListen(record), revokedAt: local.revokedAt };
    this.records.set(record.id, learned);
    for (const listener of this.rotatedListeners) listener(learned);
  }

  private learnRevoked(id: string, at: string): boolean {
    if (this.revoked.has(id)) return false;
    this.revoked.set(id, at);
    const record = this.records.get(id);
    if (record !== undefined) this.records.set(id, { ...record, revokedAt: at });
    this.emitRemote({ kind: 'revoked', id, at });
    return true;
  }

  /**
   * Makes this instance's table the store's: revocations first (live connections of a grant revoked
   * meanwhile end), then grants the store no longer has end too (fail closed), then new grants. A
   * tombstone the store lost is written back, so a revoked grant never returns.
   */
  async resync(snapshot: LedgerSnapshot): Promise<void> {
    for (const [id, at] of snapshot.revoked) this.learnRevoked(id, at);
    const remote = new Map(snapshot.runtime.map((r) => [r.id, r]));
    for (const [id, record] of [...this.records]) {
      if (record.source !== 'runtime' || remote.has(id)) continue;
      this.records.delete(id);
      this.answers.delete(id);
      this.emitRemote({ kind: 'forgot', id });
    }
    for (const stored of snapshot.runtime) {
      const record = this.withAbsoluteListen(stored);
      if (this.forgotten.has(record.id)) continue;
      if (this.records.has(record.id)) {
        // A rotation the log no longer reached: the store's token hash wins.
        this.learnRotated(record);
        continue;
      }
      const revokedAt = this.revoked.get(record.id) ?? null;
      this.records.set(record.id, { ...record, revokedAt });
      if (revokedAt === null) this.emitRemote({ kind: 'issued', record });
    }
    // The store's standing answers are the fleet's: the whole set replaces this instance's.
    this.answers.clear();
    for (const answer of snapshot.answers ?? []) if (!this.forgotten.has(answer.grant)) this.learnAnswer(answer);
    this.revision = snapshot.revision;
    // A revocation on its way (sending), or still to be sent (unsent, sendUnsent retries it), is not lost:
    // it reaches the store as a revoke, which keeps the grant's record and logs the change.
    const lost = new Map([...this.revoked].filter(([id]) => !snapshot.revoked.has(id) && !this.sending.has(id) && !this.unsent.has(id)));
    if (lost.size > 0 && this.shared !== null) await this.shared.restoreTombstones(lost);
    await this.persist();
  }

  /** Rotations made on another instance; the grant's record carries the new hash and any grace. */
  onRotated(listener: (record: GrantRecord) => void): () => void {
    this.rotatedListeners.add(listener);
    return () => this.rotatedListeners.delete(listener);
  }

  onRemote(listener: (change: RemoteChange) => void): () => void {
    this.remoteListeners.add(listener);
    return () => this.remoteListeners.delete(listener);
  }

  private emitRemote(change: RemoteChange): void {
    for (const listener of this.remoteListeners) listener(change);
  }

  subscribe(listener: (event: LedgerEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private emit(event: LedgerEvent): void {
    for (const listener of this.listeners) listener(event);
  }
}

/** How long an admin write waits for a shared store that is reconnecting before it answers 503. */
export const STORE_WAIT_MS = 1_000;
/** How long a forgotten grant is kept from coming back by a stale read: far past any store round trip. */
const FORGOTTEN_KEEP_MS = 60_000;
const STORE_RETRY_DELAYS_MS = [50, 100, 200, 300, 350];

