// Listeners opened at run time for one grant (`"listen"` in POST /v1/grants): every connection on one
// acts for that grant. Revoking the grant closes its listener and removes its socket file.
import { isLoopbackTcpListen, isUnixListen, NON_LOOPBACK_DEDICATED_MESSAGE } from '../config/index.js';
import type { SelfAddresses } from '../resolve/index.js';
import type { ProxyRuntime } from './runtime.js';
import { startListeners, stopListeners, type BoundListener, type HttpLimits } from './server.js';

/** One label for all of them: audit and metrics name the principal, never an unbounded listener name. */
export const DEDICATED_LISTENER_NAME = 'dedicated';

export class DedicatedListeners {
  private readonly byGrant = new Map<string, BoundListener>();

  constructor(
    private readonly rt: ProxyRuntime,
    private readonly limits: HttpLimits,
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
    const [bound] = await startListeners(this.rt, [{ name: DEDICATED_LISTENER_NAME, listen, grant: grantId, protocol: 'http' }], this.limits);
    if (bound === undefined) throw new Error('listener did not start');
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
    await stopListeners([bound], 0);
  }

  async closeAll(drainMs: number): Promise<void> {
    const all = [...this.byGrant.values()];
    this.byGrant.clear();
    await stopListeners(all, drainMs);
  }

  all(): BoundListener[] {
    return [...this.byGrant.values()];
  }
}
