// For a destination no rule grants, the grant's rule that comes closest, so `sluice explain` can say
// "you have https://origin.test:22443, not port 8443" instead of only "not granted" (UX review
// 2026-12-04 finding 3). Host-side only: the denial body never names a grant's rules.
import type { DestinationRule } from '../authority/index.js';
import type { CanonicalDestination, RequestKind } from '../core/index.js';

export interface ClosestRule {
  readonly rule: string;
  /** How it differs from the destination, in words. */
  readonly why: string;
}

const CONNECT_SCHEMES: readonly string[] = ['https', 'wss', 'tcp'];

function admits(rule: DestinationRule, kind: RequestKind): boolean {
  return CONNECT_SCHEMES.includes(rule.scheme) === (kind === 'connect');
}

function coversHost(rule: DestinationRule, dest: CanonicalDestination): boolean {
  return rule.isWildcard ? dest.hostKind === 'name' && dest.host.endsWith(`.${rule.host}`) : rule.host === dest.host;
}

/** Trailing DNS labels two names share: api.example.com and www.example.com share 2. */
function sharedLabels(a: string, b: string): number {
  const x = a.split('.').reverse();
  const y = b.split('.').reverse();
  let n = 0;
  while (n < x.length && n < y.length && x[n] === y[n]) n++;
  return n;
}

/**
 * In order: the same host and port under a rule of the other request kind; the same host on another
 * port; the same port and kind on another host, the one sharing most trailing labels (first in the
 * grant on a tie). Null when no rule shares the host or the port.
 */
export function closestRule(rules: readonly DestinationRule[], kind: RequestKind, dest: CanonicalDestination): ClosestRule | null {
  const kindNeeds = kind === 'connect' ? 'a CONNECT needs an https, wss or tcp rule' : 'an absolute-form request needs an http or ws rule';
  const sameHostAndPort = rules.find((r) => coversHost(r, dest) && r.port === dest.port);
  if (sameHostAndPort !== undefined) return { rule: sameHostAndPort.text, why: `same host and port, but ${kindNeeds}` };
  const sameHost = rules.find((r) => coversHost(r, dest) && admits(r, kind)) ?? rules.find((r) => coversHost(r, dest));
  if (sameHost !== undefined) return { rule: sameHost.text, why: `same host, port ${sameHost.port} instead of ${dest.port}` };
  let best: DestinationRule | null = null;
  let bestShared = -1;
  for (const r of rules) {
    if (r.port !== dest.port || !admits(r, kind)) continue;
    const shared = dest.hostKind === 'name' ? sharedLabels(r.host, dest.host) : 0;
    if (shared > bestShared) {
      best = r;
      bestShared = shared;
    }
  }
  return best === null ? null : { rule: best.text, why: 'same port, another host' };
}
