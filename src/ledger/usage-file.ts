// Budgets across restarts on the file store (roadmap #2): what each grant has used (connections and
// bytes) is written to `usage.json` in the state directory, atomically, at most once a second while it
// changes and once more on shutdown. A kill -9 loses at most the last second of counting; a grant's
// budget never starts again from zero. (On the Redis store the counters live in Redis: redis-budgets.ts.)
import { LedgerStore, USAGE_FILE } from './store.js';

export interface GrantUsageCount {
  readonly connections: number;
  readonly bytes: number;
}

export type UsageSnapshot = ReadonlyMap<string, GrantUsageCount>;

interface PersistedUsage {
  readonly v: 1;
  readonly grants: Readonly<Record<string, GrantUsageCount>>;
}

function isCount(value: unknown): value is GrantUsageCount {
  const v = value as Partial<GrantUsageCount> | null;
  return v !== null && typeof v === 'object' && Number.isSafeInteger(v.connections) && Number.isSafeInteger(v.bytes) && (v.connections ?? -1) >= 0 && (v.bytes ?? -1) >= 0;
}

export class UsageFile {
  private readonly store: LedgerStore;
  private timer: NodeJS.Timeout | null = null;
  private written = '';

  /** `owner`: Sluice's uid, as for the ledger (LedgerStore). */
  constructor(dir: string, owner: number) {
    this.store = new LedgerStore(dir, owner, USAGE_FILE);
  }

  get file(): string {
    return this.store.file;
  }

  /** What was used before; an unreadable file is an error naming it (never silently a fresh budget). */
  async read(): Promise<UsageSnapshot> {
    const state = (await this.store.read()) as Partial<PersistedUsage> | null;
    if (state === null) return new Map();
    if (state.v !== 1 || typeof state.grants !== 'object' || state.grants === null) throw new Error(`${this.file} is not a version 1 usage file`);
    const out = new Map<string, GrantUsageCount>();
    for (const [id, count] of Object.entries(state.grants)) if (isCount(count)) out.set(id, { connections: count.connections, bytes: count.bytes });
    this.written = JSON.stringify(Object.fromEntries(out));
    return out;
  }

  /** Writes `snapshot()` every `intervalMs` when it changed. */
  start(snapshot: () => UsageSnapshot, intervalMs: number): void {
    this.timer = setInterval(() => void this.flush(snapshot).catch(() => undefined), intervalMs);
    this.timer.unref();
  }

  async flush(snapshot: () => UsageSnapshot): Promise<void> {
    const grants = Object.fromEntries(snapshot());
    const text = JSON.stringify(grants);
    if (text === this.written) return;
    this.written = text;
    const state: PersistedUsage = { v: 1, grants };
    await this.store.write(state);
  }

  async stop(snapshot: () => UsageSnapshot): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer);
    await this.flush(snapshot);
  }
}
