// Listeners opened at run time for one grant (`"listen"` in POST /v1/grants): every connection on one
// acts for that grant. Revoking the grant closes its listener and removes its socket file.
import { isLoopbackTcpListen, isUnixListen, NON_LOOPBACK_DEDICATED_MESSAGE } from '../config/index.js';
import type { SelfAddresses } from '../resolve/index.js';

/** What a dedicated listener is to this module: its real address. */
export interface GrantListener {
  /** `host:port` with the real port, or `unix:/path`. */
  readonly address: string;
}

/** Opens and stops the listeners themselves: proxy/ serves them, app.ts wires this port. */
export interface ListenerPort<L extends GrantListener> {
  /** Starts a listener on `listen` every connection of which acts for `grantId`. */
  open(grantId: string, listen: string): Promise<L>;
  stop(listeners: readonly L[], drainMs: number): Promise<void>;
}

/** One label for all of them: audit and metrics name the principal, never an unbounded listener name. */
export const DEDICATED_LISTENER_NAME = 'dedicated';

export class DedicatedListeners<L extends GrantListener = GrantListener> {
  private readonly byGrant = new Map<string, L>();

  constructor(
    private readonly port: ListenerPort<L>,
    private readonly self: SelfAddresses,
  ) {}

  isInUse(listen: string): boolean {
    for (const l of this.byGrant.values()) if (l.address === listen || `unix:${l.address.replace(/^unix:/, '')}` === listen) return true;
    return false;
  }

  async open(grantId: string, listen: string): Promise<string> {
    // The admin API refuses such an address already; a ledger written before that check may hold one.
    if (!isUnixListen(listen) && !isLoopbackTcpListen(listen)) throw new Error(`${listen}: ${NON_LOOPBACK_DEDICATED_MESSAGE}`);
    await this.close(grantId);
    const bound = await this.port.open(grantId, listen);
    this.byGrant.set(grantId, bound);
    this.self.add(bound.address);
    return bound.address;
  }

  addressOf(grantId: string): string | null {
    return this.byGrant.get(grantId)?.address ?? null;
  }

  async close(grantId: string): Promise<void> {
    const bound = this.byGrant.get(grantId);
    if (bound === undefined) return;
    this.byGrant.delete(grantId);
    await this.port.stop([bound], 0);
  }

  async closeAll(drainMs: number): Promise<void> {
    const all = [...this.byGrant.values()];
    this.byGrant.clear();
    await this.port.stop(all, drainMs);
  }

  all(): L[] {
    return [...this.byGrant.values()];
  }
}
