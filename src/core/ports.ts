// Ports: the function types through which policy modules reach I/O that app.ts wires in.
import type { ResolvedAddress } from './types.js';

/** Resolve a name to every address it has, within `signal`. Rejects with a ProxyError on failure. */
export type LookupAll = (host: string, signal: AbortSignal) => Promise<readonly LookupAnswer[]>;

export interface LookupAnswer extends ResolvedAddress {
  /** Seconds this answer may be cached; 0 means do not cache. */
  readonly ttlSeconds: number;
}

/** Milliseconds since an arbitrary origin, monotonic. */
export type Clock = () => number;
