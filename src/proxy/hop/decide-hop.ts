// A hop's destination stages, or their remembered outcome (hop-cache.ts): a repeated hop is one lookup
// and stays synchronous; a new one canonicalizes and runs decideDestination, and is remembered when it
// is allowed. Either way the hop is filled in the same way and decided by its caller, once.
import type { ConnectionContext } from './connection-context.js';
import { decideDestination } from './decide.js';
import { applyRemembered, HopCache, type HopStamp, type RememberedHop } from './hop-cache.js';
import type { Hop } from './hop.js';
import type { ProxyRuntime } from './runtime.js';
import type { RuntimeGrant } from '../../grant/index.js';

/** What the hop cache knows of one hop, looked up before its first stage. */
export interface HopLookup {
  readonly key: string;
  readonly remembered: RememberedHop | undefined;
  /** The sources as of the hop's start; null on a hit (nothing will be remembered). */
  readonly stamp: HopStamp | null;
}

const UNCACHED: HopLookup = Object.freeze({ key: '', remembered: undefined, stamp: null });

/**
 * `target` is the request target as received (for a forward hop, its scheme and authority only). Call it
 * before the hop is identified, or pass the `stamp` taken then (SOCKS5 learns its target later).
 */
export function lookupHop(rt: ProxyRuntime, ctx: ConnectionContext, hop: Hop, credential: string | undefined, target: string, stamp?: HopStamp): HopLookup {
  // Without credentials on a token listener the principal can only be the connection's (a keep-alive
  // request after the first): such a hop is neither served nor remembered, or a credential-less
  // connection could be handed another connection's principal.
  if (credential === undefined && ctx.identity.boundGrant === null) return UNCACHED;
  const key = HopCache.key(hop.kind, ctx.listener, ctx.identity.boundGrant, credential, target);
  const remembered = rt.hopCache.get(key);
  rt.metrics.hopCache(remembered !== undefined);
  return { key, remembered, stamp: remembered === undefined ? (stamp ?? rt.hopCache.stamp()) : null };
}

/**
 * Sets the hop's destination (from `canonicalize`, which fills hop.canonical and hop.scheme or denies)
 * and decides it. Returns a promise only when the stages run.
 */
export function decideHop(rt: ProxyRuntime, hop: Hop, grant: RuntimeGrant, lookup: HopLookup, canonicalize: () => boolean): boolean | Promise<boolean> {
  // The grant the hop was identified under is the one remembered (same revision); anything else runs the stages.
  if (lookup.remembered !== undefined && lookup.remembered.grant === grant) {
    applyRemembered(hop, lookup.remembered);
    return true;
  }
  if (!canonicalize()) return false;
  return decideDestination(rt, hop, grant).then((allowed) => {
    if (allowed && lookup.stamp !== null && hop.askedBy === null && hop.rule?.startsWith('ask:') !== true) rt.hopCache.remember(lookup.key, hop, lookup.stamp);
    return allowed;
  });
}
