// Handles one absolute-form request on a (possibly keep-alive) client connection. Every request is a
// hop: identified, canonicalized and authorized again, so a second request to a host outside the grant
// is refused even on a connection whose first request was allowed. Inside a mediated tunnel
// (mediated-tunnel.ts) an origin-form request stands for its absolute form on the tunnel's destination.
import type http from 'node:http';
import { canonicalize, DEFAULT_PORTS, parseAbsoluteTarget, pathAndQueryOf, splitAbsoluteTarget } from '../../authority/index.js';
import { deny, ok, type CloseReason, type PinnedAddress, type Verdict } from '../../core/index.js';
import { forwardRequest, hasBody, type ForwardBudget, type ForwardResult } from '../../relay/index.js';
import { defaultAuthContext, isConnectionFailure } from '../../egress/index.js';
import type { RouteHop } from '../../route/index.js';
import type { ConnectionContext } from '../hop/connection-context.js';
import { decideHop, lookupHop, type HopLookup } from '../hop/decide-hop.js';
import type { Decision } from '../hop/decision.js';
import type { RememberedHop } from '../hop/hop-cache.js';
import { Hop } from '../hop/hop.js';
import { bindsConnection, forwardWithProxyAuth, settled, type Responded } from '../tunnel/forward-auth.js';
import { identifyHop } from '../hop/identify-hop.js';
import { targetInTunnel } from '../tunnel/mediated-tunnel.js';
import { overRoute, upstreamAuthority } from '../tunnel/over-route.js';
import { writeResponseDenial } from './respond.js';
import { runHop, type HopRun } from '../hop/run-hop.js';
import type { ProxyRuntime } from '../hop/runtime.js';


function answer(req: http.IncomingMessage, res: http.ServerResponse, decision: Decision): void {
  // An unread request body would be parsed as the next request: close instead of keeping alive.
  const close = hasBody(req) || decision.reason === 'principal_changed' || decision.reason === 'internal_error';
  writeResponseDenial(res, decision, close);
}

/** RFC 9112 §3.2.2: a proxy MUST ignore a conflicting Host; we refuse it, since a disagreement is an attack signal. */
function hostAgrees(req: http.IncomingMessage, hop: Hop): boolean {
  // RFC 9112 §3.2: more than one Host field line is answered 400, even if the first agrees.
  if (hostLineCount(req) > 1) return false;
  const host = req.headers.host;
  if (host === undefined || hop.canonical === null || hop.scheme === null) return host === undefined;
  const canonical = canonicalize(host, DEFAULT_PORTS[hop.scheme]);
  return canonical.ok && canonical.value.key === hop.canonical.key;
}

export function onRequest(rt: ProxyRuntime, ctx: ConnectionContext, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const raw = req.url ?? '';
  const inTunnel = ctx.mediated === null ? null : targetInTunnel(ctx.mediated, raw);
  const url = inTunnel ?? raw;
  const hop = new Hop(ctx.nextHop(), 'forward', req.method ?? 'GET', url);
  return runHop(rt, ctx, hop, (run) => forwardStages(rt, run, req, res, url, ctx.mediated !== null && inTunnel === null), (decision) => answer(req, res, decision));
}

/** On a remembered hop the Host check still runs (Host is not in the key); canonicalizing it, once per distinct value. */
function rememberedHostAgrees(req: http.IncomingMessage, hop: Hop, remembered: RememberedHop): boolean {
  const host = req.headers.host;
  if (host !== undefined && host === remembered.agreedHost) return hostLineCount(req) === 1;
  if (!hostAgrees(req, hop)) return false;
  remembered.agreedHost = host ?? null;
  return true;
}

function hostLineCount(req: http.IncomingMessage): number {
  let lines = 0;
  for (let i = 0; i < req.rawHeaders.length; i += 2) if ((req.rawHeaders[i] ?? '').toLowerCase() === 'host') lines += 1;
  return lines;
}

/**
 * `url` is the request target in absolute form (inside a mediated tunnel, made so from origin-form);
 * `isOffTunnel`: inside a mediated tunnel, the target names another destination than the tunnel's.
 */
async function forwardStages(rt: ProxyRuntime, run: HopRun, req: http.IncomingMessage, res: http.ServerResponse, url: string, isOffTunnel: boolean): Promise<void> {
  const { hop } = run;
  const parts = splitAbsoluteTarget(url);
  const lookup: HopLookup | null = parts === null ? null : lookupHop(rt, run.ctx, hop, req.headers['proxy-authorization'], parts.origin);
  const remembered = lookup?.remembered;
  let grant = identifyHop(rt, run.ctx, hop, req, remembered?.principal ?? null);
  if (grant instanceof Promise) grant = await grant;
  if (grant === null) return;
  if (run.ctx.mediated !== null) {
    // Confined to the CONNECT target: RFC 9112 §3.2 requires Host in HTTP/1.1, and here it must name
    // the tunnel's destination (checked below, as for absolute form), never another host.
    if (isOffTunnel) return void hop.fail('host_mismatch', `the request target is not on the tunnel's destination ${run.ctx.mediated.key}`);
    if (req.headers.host === undefined) return void hop.fail('host_mismatch', 'a request inside a tunnel names its Host');
  }
  let pathAndQuery: string | null = null;
  const canonicalize = (): boolean => {
    const target = parseAbsoluteTarget(url);
    if (!target.ok) return hop.fail(target.reason, target.detail);
    hop.scheme = target.value.scheme;
    hop.canonical = target.value.destination;
    pathAndQuery = target.value.pathAndQuery;
    return hostAgrees(req, hop) || hop.fail('host_mismatch');
  };
  // Not absolute-form: denied with parseAbsoluteTarget's reason.
  if (lookup === null || parts === null) return void canonicalize();
  let decided = decideHop(rt, hop, grant, lookup, canonicalize);
  if (decided instanceof Promise) decided = await decided;
  if (!decided) return;
  if (pathAndQuery === null) {
    // Remembered: the destination is the key's; the path and the Host are this request's.
    if (remembered === undefined || !rememberedHostAgrees(req, hop, remembered)) return void hop.fail('host_mismatch');
    pathAndQuery = pathAndQueryOf(parts.rest);
  }
  if (rt.registry.bytesLeft(grant.id) <= 0) return void hop.fail('byte_limit_reached', `maxBytes ${grant.limits.maxBytes ?? 0}`);

  // With maxBytes, the bodies are counted against the grant's budget while they stream, and the response
  // is ended at the budget (review 2026-12 finding 6); without, the totals are only recorded after.
  const budget = rt.registry.budgetOf(grant);
  const result = await forwardOverRoute(rt, hop, req, res, pathAndQuery, budget);
  hop.dialUs = hop.elapsedUs();
  if (!result.ok) return void hop.fail(result.reason, result.detail);
  // Relayed: decided allowed before anything else can fail, so a later fault is a relay fault.
  run.decide();
  const responded = result.value;
  hop.firstByteUs = Math.round((responded.headersAt - hop.startedAt) * 1000);
  if (budget === null) rt.registry.addBytes(grant.id, responded.bytesUp + responded.bytesDown);
  run.close({ closedBy: closedBy(run.ctx, responded.closedBy), status: responded.status, bytesUp: responded.bytesUp, bytesDown: responded.bytesDown });
}

/**
 * How a relayed response ended, for its close record. A response cut mid-stream because Sluice ended the
 * connection (revoked, expired, a narrowed grant, a limit) is recorded with that reason, as a tunnel is,
 * not as the relay saw it (UX review 2026-12-04 finding 4: a revoked download said response_error).
 */
function closedBy(ctx: ConnectionContext, relayed: CloseReason | null): CloseReason {
  if (relayed === null) return 'completed';
  return relayed === 'response_error' ? (ctx.endedBy ?? relayed) : relayed;
}


/**
 * Forwards over the route (over-route.ts): direct to each pinned address, or absolute-form through the
 * upstream proxy. A later address or alternative is tried only after a connection-level failure of a
 * request with no body (nothing was sent yet); a 407 or any response ends the hop.
 */
function forwardOverRoute(rt: ProxyRuntime, hop: Hop, req: http.IncomingMessage, res: http.ServerResponse, pathAndQuery: string, budget: ForwardBudget | null): Promise<Verdict<Responded>> {
  const dest = hop.canonical;
  const scheme = hop.scheme;
  if (dest === null || scheme === null) return Promise.resolve(deny('route_none', 'no destination to forward to'));
  const hostHeader = dest.port === DEFAULT_PORTS[scheme] ? hostForHeader(hop) : dest.key;
  const only = hop.routeHops.length === 1 && hop.pinned.length === 1 ? hop.routeHops[0] : undefined;
  const pinnedOnly = hop.pinned[0];
  if (only?.kind === 'direct' && pinnedOnly !== undefined) {
    // One direct alternative and one checked address (the default route, an IP literal or a single
    // answer): one attempt, as the loops below would make it, without their closures and frames.
    hop.usedHop = only;
    hop.dialed = pinnedOnly;
    return forwardRequest(rt.forwardAgent.for(principalKey(hop)), req, res, { origin: originOf(pinnedOnly), hostHeader, pathAndQuery, proxyAuthorization: null, viaUpstream: false }, budget).then(settled);
  }
  const retryable = !hasBody(req);
  const mayRetry = (failure: { reason: Parameters<typeof isConnectionFailure>[0] }): boolean => retryable && isConnectionFailure(failure.reason);
  const attempt = async (routeHop: RouteHop): Promise<Verdict<Responded>> => {
    if (routeHop.kind === 'direct') {
      let last: Verdict<Responded> = deny('dns_no_address', 'no checked address to forward to');
      for (const pinned of hop.pinned) {
        hop.dialed = pinned;
        last = settled(await forwardRequest(rt.forwardAgent.for(principalKey(hop)), req, res, { origin: originOf(pinned), hostHeader, pathAndQuery, proxyAuthorization: null, viaUpstream: false }, budget));
        if (last.ok || !mayRetry(last)) break;
      }
      return last;
    }
    const proxy = routeHop.proxy;
    const authority = upstreamAuthority(hop, routeHop);
    if (authority === null) return deny('dns_no_address', 'sendResolvedAddress needs a locally resolved address');
    if (proxy.sendResolvedAddress) hop.dialed = hop.pinned[0] ?? null;
    const proxyHost = proxy.host.includes(':') ? `[${proxy.host}]` : proxy.host;
    const target = {
      origin: `http://${proxyHost}:${proxy.port}`,
      hostHeader,
      pathAndQuery: `${scheme === 'ws' ? 'http' : scheme}://${authority}${pathAndQuery}`,
      proxyAuthorization: proxy.authorization,
      viaUpstream: true,
    };
    // Negotiate and NTLM authenticate the connection: one of its own for this hop (forward-auth.ts).
    if (bindsConnection(proxy, rt.upstream.auth ?? defaultAuthContext())) return forwardWithProxyAuth(rt, req, res, target, proxy, budget, hop.principal?.grantId ?? '');
    return settled(await forwardRequest(rt.upstreamAgent.for(principalKey(hop)), req, res, target, budget));
  };
  return overRoute(hop, attempt, mayRetry);
}

/** Whose connections a hop may use: its grant's, and only its grant's (relay/principal-pools.ts). */
function principalKey(hop: Hop): string {
  return hop.principal?.grantId ?? '';
}

/** The forward relay's origin for a checked address: the client only ever dials that IP literal. */
function originOf(pinned: PinnedAddress): string {
  return pinned.family === 6 ? `http://[${pinned.address}]:${pinned.port}` : `http://${pinned.address}:${pinned.port}`;
}

function hostForHeader(hop: Hop): string {
  const dest = hop.canonical;
  if (dest === null) return '';
  return dest.hostKind === 'ipv6' ? `[${dest.host}]` : dest.host;
}
