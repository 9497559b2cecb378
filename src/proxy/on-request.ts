// Handles one absolute-form request on a (possibly keep-alive) client connection. Every request is a
// hop: identified, canonicalized and authorized again, so a second request to a host outside the grant
// is refused even on a connection whose first request was allowed.
import type http from 'node:http';
import { canonicalize, DEFAULT_PORTS, parseAbsoluteTarget } from '../authority/index.js';
import { forwardRequest, hasBody, type ForwardBudget, type ForwardResult } from '../relay/index.js';
import { isConnectionFailure } from '../egress/index.js';
import { upstreamAuthority } from './dial-route.js';
import { recordClose, recordDecision } from './audit-hop.js';
import type { ConnectionContext } from './connection-context.js';
import { decideDestination } from './decide.js';
import { Hop } from './hop.js';
import { identifyHop } from './identify-hop.js';
import { writeResponseDenial } from './respond.js';
import type { ProxyRuntime } from './runtime.js';

function deny(rt: ProxyRuntime, ctx: ConnectionContext, hop: Hop, req: http.IncomingMessage, res: http.ServerResponse): void {
  recordDecision(rt.audit, ctx, hop, rt.metrics);
  // An unread request body would be parsed as the next request: close instead of keeping alive.
  const close = hasBody(req) || hop.reason === 'principal_changed';
  writeResponseDenial(res, { reason: hop.reason, destination: hop.canonical?.key ?? null, grant: hop.principal?.grantId ?? null }, close);
}

/** RFC 9112 §3.2.2: a proxy MUST ignore a conflicting Host; we refuse it, since a disagreement is an attack signal. */
function hostAgrees(req: http.IncomingMessage, hop: Hop): boolean {
  // RFC 9112 §3.2: more than one Host field line is answered 400, even if the first agrees.
  let hostLines = 0;
  for (let i = 0; i < req.rawHeaders.length; i += 2) if ((req.rawHeaders[i] ?? '').toLowerCase() === 'host') hostLines += 1;
  if (hostLines > 1) return false;
  const host = req.headers.host;
  if (host === undefined || hop.canonical === null || hop.scheme === null) return host === undefined;
  const canonical = canonicalize(host, DEFAULT_PORTS[hop.scheme]);
  return canonical.ok && canonical.value.key === hop.canonical.key;
}

export async function onRequest(rt: ProxyRuntime, ctx: ConnectionContext, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const hop = new Hop(ctx.nextHop(), 'forward', req.method ?? 'GET', req.url ?? '');
  const grant = identifyHop(rt, ctx, hop, req);
  if (grant === null) return deny(rt, ctx, hop, req, res);

  const target = parseAbsoluteTarget(req.url ?? '');
  if (!target.ok) {
    hop.fail(target.reason, target.detail);
    return deny(rt, ctx, hop, req, res);
  }
  hop.scheme = target.value.scheme;
  hop.canonical = target.value.destination;
  if (!hostAgrees(req, hop)) {
    hop.fail('host_mismatch');
    return deny(rt, ctx, hop, req, res);
  }
  if (!(await decideDestination(rt, hop, grant))) return deny(rt, ctx, hop, req, res);
  if (rt.registry.bytesLeft(grant.id) <= 0) {
    hop.fail('byte_limit_reached', `maxBytes ${grant.limits.maxBytes ?? 0}`);
    return deny(rt, ctx, hop, req, res);
  }

  // With maxBytes, the bodies are counted against the grant's budget while they stream, and the response
  // is ended at the budget (review 2026-12 finding 6); without, the totals are only recorded after.
  const budget = rt.registry.budgetOf(grant);
  const result = await forwardOverRoute(rt, hop, req, res, target.value.pathAndQuery, budget);
  hop.dialUs = hop.elapsedUs();
  if (result !== null && result.phase === 'responded') hop.firstByteUs = Math.round((result.headersAt - hop.startedAt) * 1000);
  if (result === null) {
    hop.fail('route_none', 'no route alternative could carry the request');
    return deny(rt, ctx, hop, req, res);
  }
  if (result.phase === 'failed') {
    hop.fail(result.reason, result.detail);
    return deny(rt, ctx, hop, req, res);
  }
  if (budget === null) rt.registry.addBytes(grant.id, result.bytesUp + result.bytesDown);
  recordDecision(rt.audit, ctx, hop, rt.metrics);
  recordClose(rt.audit, ctx, hop, {
    closedBy: result.closedBy ?? 'completed',
    status: result.status,
    bytesUp: result.bytesUp,
    bytesDown: result.bytesDown,
  }, rt.metrics);
}

/**
 * Tries each route alternative in order: direct to each pinned address, or absolute-form through the
 * upstream proxy. A later alternative is tried only after a connection-level failure of a request with
 * no body (nothing was sent yet); a 407 or any response ends the hop.
 */
async function forwardOverRoute(rt: ProxyRuntime, hop: Hop, req: http.IncomingMessage, res: http.ServerResponse, pathAndQuery: string, budget: ForwardBudget | null): Promise<ForwardResult | null> {
  const dest = hop.canonical;
  if (dest === null || hop.scheme === null) return null;
  const retryable = !hasBody(req);
  const hostHeader = dest.port === DEFAULT_PORTS[hop.scheme] ? hostForHeader(hop) : dest.key;
  let result: ForwardResult | null = null;
  for (const routeHop of hop.routeHops) {
    hop.usedHop = routeHop;
    if (routeHop.kind === 'direct') {
      for (const pinned of hop.pinned) {
        hop.dialed = pinned;
        const host = pinned.family === 6 ? `[${pinned.address}]` : pinned.address;
        result = await forwardRequest(rt.forwardAgent, req, res, { origin: `http://${host}:${pinned.port}`, hostHeader, pathAndQuery, proxyAuthorization: null, viaUpstream: false }, budget);
        if (result.phase === 'responded' || !retryable || !isConnectionFailure(result.reason)) return result;
      }
    } else {
      const proxy = routeHop.proxy;
      const authority = upstreamAuthority(hop, routeHop);
      if (authority === null) continue;
      if (proxy.sendResolvedAddress) hop.dialed = hop.pinned[0] ?? null;
      const proxyHost = proxy.host.includes(':') ? `[${proxy.host}]` : proxy.host;
      result = await forwardRequest(rt.upstreamAgent, req, res, {
        origin: `http://${proxyHost}:${proxy.port}`,
        hostHeader,
        pathAndQuery: `${hop.scheme === 'ws' ? 'http' : hop.scheme}://${authority}${pathAndQuery}`,
        proxyAuthorization: proxy.authorization,
        viaUpstream: true,
      }, budget);
      if (result.phase === 'responded' || !retryable || !isConnectionFailure(result.reason)) return result;
    }
  }
  return result;
}

function hostForHeader(hop: Hop): string {
  const dest = hop.canonical;
  if (dest === null) return '';
  return dest.hostKind === 'ipv6' ? `[${dest.host}]` : dest.host;
}
