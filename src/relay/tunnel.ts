// Relays an opaque CONNECT tunnel: bytes are piped both ways with backpressure, a FIN in one direction
// is passed on as a FIN (half-close, RFC 9293 §3.6) while the other keeps flowing, and no byte is
// inspected or altered. Settles once with an outcome; never rejects when a peer resets.
import type net from 'node:net';
import type { CloseReason } from '../core/index.js';

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
}

export interface RelayOutcome {
  readonly bytesUp: number;
  readonly bytesDown: number;
  readonly closedBy: CloseReason;
}

export class Tunnel {
  private closedBy: CloseReason | null = null;
  private openSockets = 2;
  private readonly clientBytesBefore: number;
  private readonly upstreamBytesBefore: number;
  private settle: (outcome: RelayOutcome) => void = () => undefined;
  readonly done: Promise<RelayOutcome>;

  constructor(
    private readonly client: net.Socket,
    private readonly upstream: net.Socket,
    limits: RelayLimits,
    head: Buffer,
    private readonly budget: ByteBudget | null = null,
  ) {
    this.clientBytesBefore = client.bytesRead - head.length;
    this.upstreamBytesBefore = upstream.bytesRead;
    this.done = new Promise((resolve) => {
      this.settle = resolve;
    });
    client.setTimeout(limits.idleTimeoutMs);
    upstream.setTimeout(limits.idleTimeoutMs);
    client.setNoDelay(true);
    this.wire(client, 'client');
    this.wire(upstream, 'origin');
    if (budget !== null) {
      const count = (chunk: Buffer): void => {
        if (!budget.take(chunk.length)) this.end('byte_limit');
      };
      client.on('data', count);
      upstream.on('data', count);
    }
    if (head.length > 0) upstream.write(head);
    client.pipe(upstream);
    upstream.pipe(client);
  }

  private wire(socket: net.Socket, side: 'client' | 'origin'): void {
    // A side may have sent its FIN while the hop was still being dialed: count it now.
    if (socket.readableEnded) this.note(side === 'client' ? 'client_closed' : 'origin_closed');
    socket.once('end', () => this.note(side === 'client' ? 'client_closed' : 'origin_closed'));
    socket.once('error', () => this.end(side === 'client' ? 'client_reset' : 'origin_reset'));
    socket.once('timeout', () => this.end('idle_timeout'));
    socket.once('close', () => {
      this.openSockets -= 1;
      // A side that closed without a clean end (reset) takes its peer down with it.
      if (this.openSockets === 1) (socket === this.client ? this.upstream : this.client).destroySoon?.();
      if (this.openSockets === 0) this.finish();
    });
  }

  private note(reason: CloseReason): void {
    if (this.closedBy === null) this.closedBy = reason;
  }

  /** Ends both sides now (idle timeout, revocation, shutdown); the outcome records why. */
  end(reason: CloseReason): void {
    this.note(reason);
    this.client.destroy();
    this.upstream.destroy();
  }

  private finish(): void {
    this.settle({
      bytesUp: Math.max(0, this.client.bytesRead - this.clientBytesBefore),
      bytesDown: Math.max(0, this.upstream.bytesRead - this.upstreamBytesBefore),
      closedBy: this.closedBy ?? 'client_closed',
    });
  }
}
