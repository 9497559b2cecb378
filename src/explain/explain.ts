// `sluice explain`: runs a hop's policy stages for a grant and a target without connecting, and reports
// each step: canonical destination, matched rule, resolved addresses and classes, route, attested, reason.
import { authorize, canonicalize, parseAbsoluteTarget } from '../authority/index.js';
import { Reasons, remedyFor, type ReasonCode, type UpstreamProxy } from '../core/index.js';
import { authModeOf } from '../egress/index.js';
import { checkGrantLive, decideDestination, decisionOf, Hop, isAttested, type ProxyRuntime } from '../proxy/index.js';
import type { RuntimeGrant } from '../grant/index.js';
import { closestRule, type ClosestRule } from './closest-rule.js';
import type { GrantChoice } from './grant-source.js';

export interface Explanation {
  readonly grant: string;
  /** Where the grant came from: the running instance, or the config file (and why). */
  readonly source: string;
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
  /** For destination_not_granted: the grant's rules (its own authority, shown to the host only); else null. */
  readonly rules: readonly string[] | null;
  /** For destination_not_granted: the rule sharing the host or port, and how it differs; else null. */
  readonly closest: ClosestRule | null;
  /** How to fix a denial (core/remedy.ts), as the denial body says it; null when allowed or bad input. */
  readonly fix: string | null;
  /** Set when the question itself is wrong (a malformed target, an unknown grant): exit 2, not a denial. */
  readonly badInput: string | null;
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

const CONFIG_GRANTS: GrantChoice = { from: 'the config', warning: null };

/**
 * `choice` says where the grant comes from (grant-source.ts): the running instance's grant, or, by
 * default, the config's grants in `rt`.
 */
export async function explain(rt: ProxyRuntime, grantId: string, target: string, choice: GrantChoice = CONFIG_GRANTS): Promise<Explanation> {
  const hop = hopFor(target);
  const isTargetMalformed = !hop.isAllowed;
  // As on a dedicated listener: an unknown grant id is reported as grant_unknown, not a token problem.
  hop.principal = { grantId, via: 'listener' };
  const found = grantOf(rt, grantId, choice);
  if (hop.isAllowed && checkGrantLive(hop, found.grant, rt.now())) await decideDestination(rt, hop, found.grant);
  const mediated = await asMediated(rt, hop, found.grant);
  const shown = mediated ?? hop;
  const decision = decisionOf(shown, { id: '-', listener: '-' });
  let badInput: string | null = null;
  if (isTargetMalformed) {
    const why = decision.detail === null || decision.detail === '' ? Reasons[decision.reason].message : decision.detail;
    badInput = `target ${JSON.stringify(target)}: ${why} (${decision.reason})`;
  } else if (found.problem !== null) badInput = found.problem;
  const authority = badInput === null && decision.reason === 'destination_not_granted' ? found.grant?.authority : undefined;
  return {
    grant: grantId,
    source: choice.from,
    target,
    request: hop.kind,
    canonical: decision.canonical,
    rule: decision.rule,
    addresses: decision.addresses,
    pinned: shown.pinned.map((p) => p.address),
    route: decision.route,
    routeSummary: rt.routes.summary?.lines ?? [],
    pacAnswer: shown.route?.pacAnswer ?? null,
    alternatives: shown.routeHops.map((h) => ({
      hop: h.kind === 'direct' ? 'direct' : `proxy ${h.proxy.label}${h.proxy.sendResolvedAddress ? ' (sends the checked address)' : ''}${authText(h.proxy)}`,
      attested: isAttested(h, shown),
      credentialObserving: h.kind === 'proxy' && h.proxy.inspectsTls,
    })),
    attested: decision.attested,
    decision: decision.decision,
    reason: decision.reason,
    status: decision.status,
    detail: decision.detail,
    rules: authority === undefined ? null : authority.rules.map((r) => r.text),
    closest: authority === undefined || hop.canonical === null ? null : closestRule(authority.rules, hop.kind, hop.canonical),
    fix: badInput === null && decision.decision === 'deny' ? remedyFor(decision.reason, decision) : null,
    badInput,
  };
}

const MEDIATED_DETAIL = 'mediated: the CONNECT is accepted and each HTTP/1.1 request inside is its own hop, decided as this one';

/**
 * A CONNECT that only http:// rules grant is not refused by the proxy: it is mediated (proxy/mediated-
 * tunnel.ts), and each request inside is decided as an absolute-form request to the same destination.
 * Explained as that request would be; null when the CONNECT's own decision stands.
 */
async function asMediated(rt: ProxyRuntime, hop: Hop, grant: RuntimeGrant | undefined): Promise<Hop | null> {
  const dest = hop.canonical;
  if (hop.kind !== 'connect' || hop.reason !== 'destination_not_granted' || grant === undefined || dest === null) return null;
  const rule = authorize(grant.authority, 'forward', dest);
  if (!rule.ok || !rule.value.text.startsWith('http://')) return null;
  const inside = new Hop(1, 'forward', 'GET', `http://${dest.key}/`);
  inside.scheme = 'http';
  inside.canonical = dest;
  inside.principal = hop.principal;
  if (checkGrantLive(inside, grant, rt.now()) && (await decideDestination(rt, inside, grant))) inside.detail = MEDIATED_DETAIL;
  return inside;
}

/** The grant to decide against, or why there is none (an unknown id is bad input, not a denial). */
function grantOf(rt: ProxyRuntime, grantId: string, choice: GrantChoice): { grant: RuntimeGrant | undefined; problem: string | null } {
  const unknown = `grant ${JSON.stringify(grantId)} is not known to ${choice.from}`;
  if (choice.instance === undefined) {
    const grant = rt.registry.grants.get(grantId);
    return { grant, problem: grant === undefined ? unknown : null };
  }
  if (choice.instance === null) {
    // UX review 2026-12-04 finding 2: a run's grant is forgotten with its run, so say where its refusals went.
    const hint = rt.registry.grants.has(grantId)
      ? '; the config file has it, so that instance runs another config: reload it (SIGHUP or POST /v1/reload)'
      : '; a grant that `sluice run` issued is forgotten when its run ends: the run printed what its command was refused, each with its fix';
    return { grant: undefined, problem: unknown + hint };
  }
  const compiled = rt.registry.compile({ id: grantId, spec: choice.instance.spec, revoked: choice.instance.revoked, tokenSha256: null }, '');
  if (compiled.ok) return { grant: compiled.value, problem: null };
  const issues = compiled.issues.map((i) => `${i.path}: ${i.message}`).join('; ');
  return { grant: undefined, problem: `grant ${JSON.stringify(grantId)} from ${choice.from} does not compile here: ${issues}` };
}

/** `sluice explain`'s exit status: 0 allow, 1 deny, 2 bad input (malformed target, unknown grant). */
export function exitCodeOf(e: Pick<Explanation, 'decision' | 'badInput'>): 0 | 1 | 2 {
  if (e.badInput !== null) return 2;
  return e.decision === 'allow' ? 0 : 1;
}

export function formatExplanation(e: Explanation): string {
  const lines = [
    `grant:      ${e.grant}`,
    `source:     ${e.source}`,
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
    ...(e.rules === null ? [] : [`rules:      ${e.rules.length === 0 ? 'none' : e.rules.join(', ')}`]),
    ...(e.closest === null ? [] : [`closest:    ${e.closest.rule} (${e.closest.why})`]),
    ...(e.fix === null ? [] : [`fix:        ${e.fix}`]),
  ];
  return `${lines.join('\n')}\n`;
}

/**
 * Negotiate, NTLM and auto are named with the Kerberos service name they use; Basic and none read as before.
 * A PAC-named proxy outside route.pac.credentialProxies says that it gets no credentials.
 */
function authText(proxy: UpstreamProxy): string {
  if (proxy.credentialsWithheld === true) return ' (no credentials: not in route.pac.credentialProxies)';
  const mode = authModeOf(proxy);
  if (mode === 'none' || mode === 'basic') return '';
  return mode === 'ntlm' ? ' (auth ntlm)' : ` (auth ${mode}, Kerberos service ${proxy.spn ?? `HTTP@${proxy.host}`})`;
}
