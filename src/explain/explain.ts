// `sluice explain`: runs a hop's policy stages for a grant and a target without connecting, and reports
// each step: canonical destination, matched rule, resolved addresses and classes, route, attested, reason.
import { canonicalize, parseAbsoluteTarget } from '../authority/index.js';
import type { ReasonCode } from '../core/index.js';
import { checkGrantLive, decideDestination, decisionOf, Hop, isAttested, type ProxyRuntime } from '../proxy/index.js';

export interface Explanation {
  readonly grant: string;
  readonly target: string;
  readonly request: 'connect' | 'forward';
  readonly canonical: string | null;
  readonly rule: string | null;
  readonly addresses: readonly { address: string; class: string; allowed: boolean }[];
  readonly pinned: readonly string[];
  readonly route: string | null;
  /** System mode: the route each request family takes and why, whatever this hop's scheme. */
  readonly routeSummary: readonly string[];
  readonly pacAnswer: string | null;
  /** Each route alternative that survived the checks, in the order it would be tried. */
  readonly alternatives: readonly { hop: string; attested: boolean; credentialObserving: boolean }[];
  readonly attested: boolean | null;
  readonly decision: 'allow' | 'deny';
  readonly reason: ReasonCode;
  readonly status: number;
  readonly detail: string | null;
}

function hopFor(target: string): Hop {
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(target)?.[1]?.toLowerCase();
  if (scheme === 'http' || scheme === 'ws') {
    const hop = new Hop(1, 'forward', 'GET', target);
    const parsed = parseAbsoluteTarget(target);
    if (!parsed.ok) hop.fail(parsed.reason, parsed.detail);
    else {
      hop.scheme = parsed.value.scheme;
      hop.canonical = parsed.value.destination;
    }
    return hop;
  }
  const hop = new Hop(1, 'connect', 'CONNECT', target);
  let authority = target;
  let defaultPort: number | undefined;
  if (scheme === 'https' || scheme === 'wss' || scheme === 'tcp') {
    authority = target.slice(scheme.length + 3).replace(/\/.*$/, '');
    defaultPort = scheme === 'tcp' ? undefined : 443;
    hop.scheme = scheme;
  } else if (scheme !== undefined) {
    hop.fail('scheme_forbidden', `scheme ${scheme} is not proxied`);
    return hop;
  }
  const dest = canonicalize(authority, defaultPort);
  if (!dest.ok) hop.fail(dest.reason, dest.detail);
  else hop.canonical = dest.value;
  return hop;
}

export async function explain(rt: ProxyRuntime, grantId: string, target: string): Promise<Explanation> {
  const hop = hopFor(target);
  // As on a dedicated listener: an unknown grant id is reported as grant_unknown, not a token problem.
  hop.principal = { grantId, via: 'listener' };
  const grant = rt.registry.grants.get(grantId);
  if (hop.isAllowed && checkGrantLive(hop, grant, rt.now())) await decideDestination(rt, hop, grant);
  const decision = decisionOf(hop, { id: '-', listener: '-' });
  return {
    grant: grantId,
    target,
    request: decision.request,
    canonical: decision.canonical,
    rule: decision.rule,
    addresses: decision.addresses,
    pinned: hop.pinned.map((p) => p.address),
    route: decision.route,
    routeSummary: rt.routes.summary?.lines ?? [],
    pacAnswer: hop.route?.pacAnswer ?? null,
    alternatives: hop.routeHops.map((h) => ({
      hop: h.kind === 'direct' ? 'direct' : `proxy ${h.proxy.label}${h.proxy.sendResolvedAddress ? ' (sends the checked address)' : ''}`,
      attested: isAttested(h, hop),
      credentialObserving: h.kind === 'proxy' && h.proxy.inspectsTls,
    })),
    attested: decision.attested,
    decision: decision.decision,
    reason: decision.reason,
    status: decision.status,
    detail: decision.detail,
  };
}

export function formatExplanation(e: Explanation): string {
  const lines = [
    `grant:      ${e.grant}`,
    `target:     ${e.target} (${e.request === 'connect' ? 'CONNECT' : 'absolute-form'})`,
    `canonical:  ${e.canonical ?? '-'}`,
    `rule:       ${e.rule ?? '-'}`,
    `addresses:  ${e.addresses.length === 0 ? '-' : e.addresses.map((a) => `${a.address} ${a.class} ${a.allowed ? 'allowed' : 'denied'}`).join(', ')}`,
    `pinned:     ${e.pinned.length === 0 ? '-' : e.pinned.join(', ')}`,
    `route:      ${e.route ?? '-'}`,
    ...e.routeSummary.map((line) => `            ${line}`),
    ...(e.pacAnswer === null ? [] : [`pac:        ${e.pacAnswer}`]),
    ...e.alternatives.map((a, i) => `  ${i + 1}. ${a.hop}: ${a.attested ? 'attested (Sluice checks the dialed address)' : 'unattested (the upstream proxy resolves the name)'}${a.credentialObserving ? ', credential-observing (inspects TLS)' : ''}`),
    `attested:   ${e.attested === null ? '-' : String(e.attested)}`,
    `decision:   ${e.decision} ${e.status} ${e.reason}${e.detail === null ? '' : ` (${e.detail})`}`,
  ];
  return `${lines.join('\n')}\n`;
}
