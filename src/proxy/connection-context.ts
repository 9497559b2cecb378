// Per-client-connection state. Fields are all set in the constructor so the shape never changes.
import type net from 'node:net';
import type { CloseReason, Principal } from '../core/index.js';
import type { ListenerIdentity } from '../identity/index.js';

let nextId = 0;

export class ConnectionContext {
  principal: Principal | null = null;
  hops = 0;
  /** The live CONNECT tunnel on this connection, so shutdown and revocation can end it with a reason. */
  tunnel: { end(reason: CloseReason): void } | null = null;
  readonly id: string;
  readonly acceptedAtMs = Date.now();

  constructor(
    readonly socket: net.Socket,
    readonly listener: string,
    readonly identity: ListenerIdentity,
  ) {
    nextId += 1;
    this.id = `c${nextId.toString(36)}`;
  }

  nextHop(): number {
    this.hops += 1;
    return this.hops;
  }
}
