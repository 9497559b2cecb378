// The ledger: every grant over time. Config grants and run-time grants (issued through the admin API,
// token shown once, only its SHA-256 kept), revocations that never come back, generations, expiry.
// Run-time grants and all revocations persist in the state dir, so a restart (even after kill -9)
// neither loses nor resurrects a grant (principle A5 in docs/principles.md;
// docs/decisions/0008-ledger-persistence.md).
import { createHash, randomBytes } from 'node:crypto';
import { ProxyError } from '../core/index.js';
import type { GrantSection, GrantSpec } from '../config/index.js';
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
}

interface PersistedState {
  readonly v: 1;
  readonly runtime: readonly GrantRecord[];
  /** Every revoked id with when; config grants with these ids load revoked. */
  readonly revoked: readonly { readonly id: string; readonly at: string }[];
}

export type LedgerEvent = { readonly kind: 'revoked'; readonly record: GrantRecord } | { readonly kind: 'issued'; readonly record: GrantRecord };

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

  private constructor(
    private readonly store: LedgerStore,
    private readonly now: () => Date,
  ) {}

  static async open(store: LedgerStore, now: () => Date = () => new Date()): Promise<Ledger> {
    const ledger = new Ledger(store, now);
    let state: unknown;
    try {
      state = await store.read();
    } catch (error) {
      throw new ProxyError('ERR_LEDGER_UNREADABLE', `cannot read ${store.file}: ${(error as Error).message}`, { cause: error });
    }
    if (state !== null) ledger.restore(state);
    return ledger;
  }

  private restore(state: unknown): void {
    const s = state as Partial<PersistedState>;
    if (s.v !== 1 || !Array.isArray(s.runtime) || !Array.isArray(s.revoked)) {
      throw new ProxyError('ERR_LEDGER_UNREADABLE', `${this.store.file} is not a version 1 ledger`);
    }
    for (const r of s.revoked) this.revoked.set(r.id, r.at);
    for (const record of s.runtime) {
      const revokedAt = this.revoked.get(record.id) ?? record.revokedAt ?? null;
      this.records.set(record.id, { ...record, source: 'runtime', revokedAt });
    }
  }

  private persist(): Promise<void> {
    const state: PersistedState = {
      v: 1,
      runtime: [...this.records.values()].filter((r) => r.source === 'runtime'),
      revoked: [...this.revoked].map(([id, at]) => ({ id, at })),
    };
    return this.store.write(state);
  }

  /** Replaces the config grants (start and reload); a revoked id stays revoked whatever config says. */
  setConfigGrants(sections: readonly GrantSection[]): void {
    for (const [id, record] of this.records) if (record.source === 'config') this.records.delete(id);
    const at = this.now().toISOString();
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
    }
  }

  async issue(spec: GrantSpec): Promise<{ record: GrantRecord; token: string }> {
    let id: string;
    do id = `g-${randomBytes(9).toString('base64url')}`;
    while (this.records.has(id) || this.revoked.has(id));
    const token = newToken();
    const record: GrantRecord = { id, source: 'runtime', spec, tokenSha256: tokenSha256Hex(token), issuedAt: this.now().toISOString(), revokedAt: null };
    this.records.set(id, record);
    await this.persist();
    this.emit({ kind: 'issued', record });
    return { record, token };
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
    // Live connections end before the write completes: revocation must not wait on the disk.
    this.emit({ kind: 'revoked', record: revoked });
    await this.persist();
    return revoked;
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
    if (record.revokedAt === null) this.emit({ kind: 'revoked', record: revoked });
    await this.persist();
    return revoked;
  }

  async revokeGeneration(generation: string): Promise<GrantRecord[]> {
    const matching = [...this.records.values()].filter((r) => r.spec.generation === generation && r.revokedAt === null);
    const done: GrantRecord[] = [];
    for (const record of matching) {
      const revoked = await this.revoke(record.id);
      if (revoked !== undefined) done.push(revoked);
    }
    return done;
  }

  get(id: string): GrantRecord | undefined {
    return this.records.get(id);
  }

  list(): GrantRecord[] {
    return [...this.records.values()];
  }

  subscribe(listener: (event: LedgerEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private emit(event: LedgerEvent): void {
    for (const listener of this.listeners) listener(event);
  }
}
