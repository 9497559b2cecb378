// The port a fleet's shared ledger store implements (redis-store.ts): every change is one atomic step
// that bumps a revision, appends to a change log and notifies the other instances. Instances keep the
// whole table in memory and replay the log from their revision (docs/fleet.md).
import type { GrantRecord } from './ledger.js';

/** One change, as the store's log holds it. `at` is the revoking instance's clock (ISO 8601). */
export type LedgerChange =
  | { readonly revision: number; readonly kind: 'issued'; readonly record: GrantRecord }
  | { readonly revision: number; readonly kind: 'revoked'; readonly id: string; readonly at: string }
  | { readonly revision: number; readonly kind: 'forgot'; readonly id: string; readonly at: string }
  /** A run-time grant's token was rotated: `record` holds the new hash and, with a grace, the previous one. */
  | { readonly revision: number; readonly kind: 'rotated'; readonly record: GrantRecord }
  /** A supervisor's answer to an ask, kept for the grant's life (issue 27): `destination` is `scheme://host:port`. */
  | { readonly revision: number; readonly kind: 'answered'; readonly answer: StandingAnswer };

/** An ask answered with scope `grant`: the destination is allowed or refused for the rest of the grant's life. */
export interface StandingAnswer {
  readonly grant: string;
  readonly destination: string;
  readonly decision: 'allow' | 'deny';
  /** When it was answered (ISO 8601, the answering instance's clock). */
  readonly at: string;
}

export interface LedgerSnapshot {
  readonly revision: number;
  /** Run-time grants (config grants live in each instance's file). */
  readonly runtime: readonly GrantRecord[];
  /** Every revoked id, config and run-time, with when. */
  readonly revoked: ReadonlyMap<string, string>;
  /** Standing answers of live grants (absent: none). */
  readonly answers?: readonly StandingAnswer[];
}

export interface SharedLedgerStore {
  /** A printable name for logs and errors, never holding a password. */
  readonly label: string;
  load(): Promise<LedgerSnapshot>;
  /** Adds a run-time grant; false when the id is taken (issued or revoked before). */
  issue(record: GrantRecord): Promise<boolean>;
  revoke(id: string, at: string): Promise<void>;
  forget(id: string, at: string): Promise<void>;
  /**
   * Replaces a live run-time grant's record with its rotated one, only if the stored token hash is still
   * `expectedSha256` (two rotations at once: one wins, the other is told 'conflict').
   */
  rotate(record: GrantRecord, expectedSha256: string): Promise<'rotated' | 'unknown' | 'conflict'>;
  /**
   * Keeps a standing answer for a live grant (a run-time one the store holds, or a config grant without
   * a tombstone): the revision of the change, or 0 when the grant is revoked or gone.
   */
  keepAnswer(answer: StandingAnswer, runtime: boolean): Promise<number>;
  /** Writes back tombstones the store lost (it came back empty): a revoked grant never returns. */
  restoreTombstones(revoked: ReadonlyMap<string, string>): Promise<void>;
  /** The store's current revision: one cheap round trip, the heartbeat of freshness. */
  revision(): Promise<number>;
  /** The changes after `revision` in order, or 'resync' when the log no longer reaches back that far. */
  changesSince(revision: number): Promise<readonly LedgerChange[] | 'resync'>;
  /**
   * How many connections to the store became ready so far. A new one may reach a server whose history
   * differs at the same revision (a promoted replica that missed the last acknowledged changes), so
   * the sync then reads the whole table. Absent: the store never changes under its clients.
   */
  connections?(): number;
  /** Why the connection last failed, while it is down: the cause a failed call's error does not name (describe-store-error.ts). */
  lastConnectionError?(): unknown;
  /** Calls `listener` when another instance (or this one) changed the store; best effort. */
  onNotify(listener: () => void): Promise<void>;
  close(): Promise<void>;
}
