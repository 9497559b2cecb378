// Keeps one instance's ledger in step with the fleet's shared store. A notification triggers a catch-up
// at once; a poll of the revision every `pollMs` catches what a lost notification missed, so a
// revocation reaches every instance within about one poll period either way (docs/fleet.md). The
// instance is fresh while the store answered within `maxStaleMs`; past that it denies every new hop
// (ledger_unavailable), and when the store answers again it applies the revocations it missed before
// it counts as fresh again.
import { describeStoreError } from './describe-store-error.js';
import type { Ledger } from './ledger.js';
import type { SharedLedgerStore } from './shared-store.js';

export interface FleetSyncOptions {
  readonly pollMs: number;
  readonly maxStaleMs: number;
  readonly now: () => number;
  /** Told once when the store goes away and once when it is back, never with a password. */
  readonly onStoreState: (up: boolean, detail: string) => void;
  /** How long after `at` (the revoking instance's clock) this instance applied a revocation, in ms. */
  readonly onRevocationLag?: (lagMs: number) => void;
  /** After every catch-up: whether the store answered, and how long since it last did, in ms. */
  readonly onCatchUp?: (up: boolean, stalenessMs: number) => void;
}

export class FleetSync {
  private lastContactMs: number;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private up = true;
  private stopped = false;
  /** The store's connection count at the last catch-up that succeeded (SharedLedgerStore.connections). */
  private connections: number | undefined;

  constructor(
    private readonly ledger: Ledger,
    private readonly store: SharedLedgerStore,
    private readonly options: FleetSyncOptions,
  ) {
    this.lastContactMs = options.now();
  }

  async start(): Promise<void> {
    // Ledger.open read the whole table on this connection.
    this.connections = this.store.connections?.();
    await this.store.onNotify(() => this.kick());
    this.timer = setInterval(() => this.kick(), this.options.pollMs);
    this.timer.unref();
  }

  /** Whether the store answered within maxStaleMs: new hops and admin changes are served only then. */
  isFresh(): boolean {
    return this.options.now() - this.lastContactMs <= this.options.maxStaleMs;
  }

  get stalenessMs(): number {
    return Math.max(0, this.options.now() - this.lastContactMs);
  }

  /** Runs one catch-up now (or right after the one running): tests and the admin path use it. */
  kick(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.running !== null) {
      this.again = true;
      return this.running;
    }
    this.running = this.catchUp().finally(() => {
      this.running = null;
      if (this.again) {
        this.again = false;
        void this.kick();
      }
    });
    return this.running;
  }

  private async catchUp(): Promise<void> {
    try {
      const connections = this.store.connections?.();
      const remote = await this.store.revision();
      // A new connection (a failover, a restart) may have lost changes this instance saw, and then
      // others may have reused their revisions: only the whole table tells, and the tombstones it lacks
      // are written back (Ledger.resync), so an acknowledged revocation survives the failover.
      if (connections !== this.connections || remote < this.ledger.revision) await this.ledger.resync(await this.store.load());
      else if (remote > this.ledger.revision) {
        const changes = await this.store.changesSince(this.ledger.revision);
        const last = changes === 'resync' ? -1 : (changes.at(-1)?.revision ?? this.ledger.revision);
        if (changes === 'resync' || last < remote) await this.ledger.resync(await this.store.load());
        else {
          const now = Date.now();
          await this.ledger.applyChanges(changes);
          for (const c of changes) if (c.kind === 'revoked') this.options.onRevocationLag?.(Math.max(0, now - Date.parse(c.at)));
        }
      }
      await this.ledger.sendUnsent();
      this.connections = connections;
      // Only now, with every missed revocation applied, does the instance count as fresh.
      this.lastContactMs = this.options.now();
      if (!this.up) {
        this.up = true;
        this.options.onStoreState(true, `ledger store ${this.store.label} is back at revision ${this.ledger.revision}`);
      }
    } catch (error) {
      if (this.up) {
        this.up = false;
        this.options.onStoreState(false, `ledger store ${this.store.label} unreachable (${describeStoreError(error, this.store)})`);
      }
    }
    this.options.onCatchUp?.(this.up, this.stalenessMs);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) clearInterval(this.timer);
    await this.running;
    await this.store.close();
  }
}
