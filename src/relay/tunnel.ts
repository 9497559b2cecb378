// Relays an opaque CONNECT tunnel: bytes are passed both ways with backpressure, a FIN in one direction
// is passed on as a FIN (half-close, RFC 9293 §3.6) while the other keeps flowing, and no byte is
// inspected or altered. Settles once with an outcome; never rejects when a peer resets.
// Hand-wired rather than stream.pipe(): five listeners a socket instead of about twelve, byte counts and
// the idle mark taken in the same data handler, and no timer per socket (IdleSweep).
// A dialed socket (egress/dial.ts) reads into reused buffers (core/reused-reads.ts, ADR 0022), and so
// does the client's from its first full read on, where Node allows it (adopt-reused-reads.ts): their chunks
// come to readReused(), and one lent from a socket's own buffer is marked held whenever it may outlive
// the call, so the buffer is never read into again while the other socket's write queue still points at it.
import type net from 'node:net';
import { reusedReadsOf, SHARED_READ_BYTES, type CloseReason, type ReadTarget, type ReusedReads } from '../core/index.js';
import { adoptReusedReads } from './adopt-reused-reads.js';
import { endSocket, passFin, withdrawsAuthority } from './end-socket.js';
import { IdleSweep, type IdleWatched } from './idle-sweep.js';

export interface RelayLimits {
  readonly idleTimeoutMs: number;
}

/**
 * A byte budget shared by a grant's tunnels. Only tunnels of grants with maxBytes pay for per-chunk
 * counting; all others are plain pipes.
 */
export interface ByteBudget {
  /** Counts bytes; false once the budget is spent. */
  take(bytes: number): boolean;
  /**
   * A fleet's budget (grant/shared-budgets.ts) can say no only because its next reservation is still on
   * its way: then this resolves true once it came with budget left (take again), false once the budget
   * is spent. Null when it is spent for good, or for a budget that never waits.
   */
  whenAvailable?(): Promise<boolean> | null;
}

/** How many reservations a relay waits for on one chunk before it gives up (each is one store round trip). */
const MAX_BUDGET_WAITS = 100;

/** Waits for a fleet budget's next reservation and takes `bytes` from it: false once the budget is spent. */
export async function takeWhenAvailable(budget: ByteBudget, bytes: number): Promise<boolean> {
  for (let waits = 0; waits < MAX_BUDGET_WAITS; waits += 1) {
    const later = budget.whenAvailable?.() ?? null;
    if (later === null || !(await later)) return false;
    if (budget.take(bytes)) return true;
  }
  return false;
}

export interface RelayOutcome {
  readonly bytesUp: number;
  readonly bytesDown: number;
  readonly closedBy: CloseReason;
}

const TUNNEL = Symbol('sluice.tunnel');
type TunnelSocket = net.Socket & { [TUNNEL]: Tunnel };

function onClientData(this: TunnelSocket, chunk: Buffer): void {
  const tunnel = this[TUNNEL];
  const more = tunnel.up(chunk);
  // A full read: the client moves bulk, so it reads into reused buffers from now on. A short tunnel
  // (most of them) never pays for the switch.
  if (chunk.length >= SHARED_READ_BYTES) tunnel.adoptClientReads(more);
}
function onUpstreamData(this: TunnelSocket, chunk: Buffer): void {
  this[TUNNEL].down(chunk);
}
function onClientDrain(this: TunnelSocket): void {
  this[TUNNEL].upstream.resume();
}
function onUpstreamDrain(this: TunnelSocket): void {
  this[TUNNEL].client.resume();
}
function onClientEnd(this: TunnelSocket): void {
  const tunnel = this[TUNNEL];
  tunnel.note('client_closed');
  passFin(tunnel.upstream);
}
function onUpstreamEnd(this: TunnelSocket): void {
  const tunnel = this[TUNNEL];
  tunnel.note('origin_closed');
  passFin(tunnel.client);
}
function onClientError(this: TunnelSocket): void {
  this[TUNNEL].end('client_reset');
}
function onUpstreamError(this: TunnelSocket): void {
  this[TUNNEL].end('origin_reset');
}
function onClientClose(this: TunnelSocket): void {
  const tunnel = this[TUNNEL];
  tunnel.closed(tunnel.upstream);
}
function onUpstreamClose(this: TunnelSocket): void {
  const tunnel = this[TUNNEL];
  tunnel.closed(tunnel.client);
}

export class Tunnel implements IdleWatched, ReadTarget {
  active = true;
  idleSinceMs = 0;
  sweepSlot = -1;
  /** performance.now() of the first chunk from the origin side, or null until one comes. */
  firstDownAt: number | null = null;
  private closedBy: CloseReason | null = null;
  private openSockets = 2;
  private bytesUp: number;
  private bytesDown = 0;
  private readonly sweep: IdleSweep;
  /** The dialed socket's reused reads, or null when it reads the ordinary way ('data'). */
  private readonly reads: ReusedReads | null;
  /** The client socket's, likewise, once it moved bulk (adoptClientReads). */
  private clientReads: ReusedReads | null = null;
  private settle: (outcome: RelayOutcome) => void = () => undefined;
  readonly done: Promise<RelayOutcome>;

  constructor(
    readonly client: net.Socket,
    readonly upstream: net.Socket,
    limits: RelayLimits,
    head: Buffer,
    private readonly budget: ByteBudget | null = null,
  ) {
    this.bytesUp = head.length;
    this.reads = reusedReadsOf(upstream) ?? null;
    this.done = new Promise((resolve) => {
      this.settle = resolve;
    });
    this.sweep = IdleSweep.for(limits.idleTimeoutMs);
    this.sweep.add(this);
    client.setNoDelay(true);
    // What the client sent with its request head counts against the budget like every later byte.
    const headFits = head.length === 0 || budget === null || budget.take(head.length);
    if (head.length > 0 && headFits) upstream.write(head);
    // A side may have sent its FIN while the hop was still being dialed: its 'end' has passed, so pass
    // the FIN on now.
    if (client.readableEnded) {
      this.note('client_closed');
      upstream.end();
    }
    if (upstream.readableEnded) {
      this.note('origin_closed');
      client.end();
    }
    // Module-level listeners that find the tunnel on the socket: no closure per listener per tunnel.
    (client as TunnelSocket)[TUNNEL] = this;
    (upstream as TunnelSocket)[TUNNEL] = this;
    client.on('data', onClientData);
    const early = this.reads === null ? null : this.reads.attach(this);
    if (this.reads === null) upstream.on('data', onUpstreamData);
    client.on('drain', onClientDrain);
    upstream.on('drain', onUpstreamDrain);
    client.on('end', onClientEnd);
    upstream.on('end', onUpstreamEnd);
    client.on('error', onClientError);
    upstream.on('error', onUpstreamError);
    client.on('close', onClientClose);
    upstream.on('close', onUpstreamClose);
    if (!headFits) {
      this.end('byte_limit');
      return;
    }
    // A side paused before the tunnel (the ClientHello check) stays paused by a new 'data' listener.
    client.resume();
    // Bytes the origin sent before the tunnel attached were copied and reading stopped after them; they
    // go first, counted like any other, and reading starts again unless they met backpressure or the budget.
    if (early === null || this.down(early)) upstream.resume();
  }

  /**
   * Switches the client to reads into reused buffers (adopt-reused-reads.ts), called from its 'data'
   * listener after a full read was relayed; `more` is what up() answered for it. Nothing else is read
   * in between, and a client that up() paused stays paused: for a socket that reads through onread,
   * pause() stops its handle too. A socket that cannot switch goes on with 'data'.
   */
  adoptClientReads(more: boolean): void {
    if (this.clientReads !== null) return;
    const reads = adoptReusedReads(this.client);
    if (reads === null) return;
    this.clientReads = reads;
    reads.attach(this);
    this.client.removeListener('data', onClientData);
    if (!more) this.client.pause();
  }

  /** False when the client side was paused (backpressure, or a budget it waits for or ended on). */
  up(chunk: Buffer): boolean {
    this.active = true;
    this.bytesUp += chunk.length;
    return this.pass(chunk, this.client, this.upstream);
  }

  /** False when the origin side was paused (backpressure, or a budget it waits for or ended on). */
  down(chunk: Buffer): boolean {
    this.active = true;
    this.firstDownAt ??= performance.now();
    this.bytesDown += chunk.length;
    return this.pass(chunk, this.upstream, this.client);
  }

  /** Takes the chunk from the budget and writes it on; false once `from` was paused. */
  private pass(chunk: Buffer, from: net.Socket, to: net.Socket): boolean {
    if (this.budget !== null && !this.budget.take(chunk.length)) {
      this.overBudget(chunk, from, to);
      return false;
    }
    if (to.write(chunk)) return true;
    from.pause();
    return false;
  }

  /**
   * A chunk read into reused memory, relayed by up() from the client's reads and by down() from the
   * dialed socket's. A lent chunk (a view of the socket's own buffer) must not outlive this call
   * unmarked: queued behind an unfinished write it is copied; otherwise, if the kernel did not take it
   * all, or a budget stopped it (overBudget may keep it while it waits), the buffer is marked held and
   * never read into again.
   */
  readReused(chunk: Buffer, reads: ReusedReads, lent: boolean): boolean {
    const isUp = reads === this.clientReads;
    const to = isUp ? this.upstream : this.client;
    if (!lent) return isUp ? this.up(chunk) : this.down(chunk);
    if (to.writableLength > 0) {
      const copy = Buffer.from(chunk);
      return isUp ? this.up(copy) : this.down(copy);
    }
    const more = isUp ? this.up(chunk) : this.down(chunk);
    if (!more || to.writableLength > 0) reads.held = true;
    return more;
  }

  /** Spent: the tunnel ends. A fleet budget whose reservation is on its way: hold this side until it lands. */
  private overBudget(chunk: Buffer, from: net.Socket, to: net.Socket): void {
    const budget = this.budget;
    if (budget?.whenAvailable === undefined) return this.end('byte_limit');
    from.pause();
    void takeWhenAvailable(budget, chunk.length).then((taken) => {
      if (this.closedBy !== null && to.destroyed) return;
      if (!taken) return this.end('byte_limit');
      if (to.write(chunk)) from.resume();
    });
  }

  /** One side closed; `peer` is the other. */
  closed(peer: net.Socket): void {
    this.openSockets -= 1;
    // A side that closed without a clean end (reset) takes its peer down once its writes are flushed. A
    // peer already destroyed (passFin closed it) gets nothing: destroySoon() would leave it a 'finish'
    // listener that never fires, and on Node 24 that kept every tunnel's objects through each scavenge
    // (2 KB a tunnel, the class test/integration/gc-survival.test.ts guards).
    if (this.openSockets === 1 && !peer.destroyed) peer.destroySoon();
    if (this.openSockets === 0) this.finish();
  }

  note(reason: CloseReason): void {
    if (this.closedBy === null) this.closedBy = reason;
  }

  endIdle(): void {
    this.end('idle_timeout');
  }

  /**
   * Ends both sides now (idle timeout, revocation, shutdown); the outcome records why. A grant that
   * withdrew the tunnel resets both sides (end-socket.ts), and its reason replaces a half-close noted
   * before it while the other direction was still open: the tunnel was cut, not finished.
   */
  end(reason: CloseReason): void {
    if (withdrawsAuthority(reason) && this.isHalfClosed()) this.closedBy = reason;
    else this.note(reason);
    endSocket(this.client, reason);
    endSocket(this.upstream, reason);
  }

  /** One side sent its FIN (noted) and the other has not. */
  private isHalfClosed(): boolean {
    return (this.closedBy === 'client_closed' || this.closedBy === 'origin_closed') && !(this.client.readableEnded && this.upstream.readableEnded);
  }

  private finish(): void {
    this.sweep.delete(this);
    // Both sockets closed: no read can come into either buffer again.
    this.reads?.release();
    this.clientReads?.release();
    this.settle({ bytesUp: this.bytesUp, bytesDown: this.bytesDown, closedBy: this.closedBy ?? 'client_closed' });
  }
}
