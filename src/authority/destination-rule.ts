// Parses a grant's destination rule `scheme://host-pattern[:port]` with the same canonicalizer as traffic.
// `*.example.com` matches subdomains only (never example.com itself); a wildcard is only ever a whole first label.
import { SCHEMES, deny, ok, type Scheme, type Verdict } from '../core/index.js';
import { canonicalizeHost, formatHostPort } from './canonical-host.js';
import { DEFAULT_PORTS, parsePort } from './canonical-destination.js';

export interface DestinationRule {
  readonly scheme: Scheme;
  /** Canonical host, or the canonical suffix after `*.` when `isWildcard`. */
  readonly host: string;
  readonly isWildcard: boolean;
  readonly port: number;
  /** The rule as written after canonicalization, e.g. `https://*.example.com:443`; recorded in decisions. */
  readonly text: string;
}

const RULE = /^([a-z]+):\/\/(.+)$/i;

export function parseDestinationRule(raw: string): Verdict<DestinationRule> {
  const match = RULE.exec(raw.trim());
  if (match === null) return deny('destination_malformed', 'expected scheme://host[:port]');
  const scheme = (match[1] ?? '').toLowerCase() as Scheme;
  if (!SCHEMES.includes(scheme)) return deny('destination_malformed', `unknown scheme "${scheme}" (one of ${SCHEMES.join(', ')})`);
  let authority = match[2] ?? '';
  if (authority.endsWith('/')) authority = authority.slice(0, -1);
  if (/[/?#@]/.test(authority)) return deny('destination_malformed', 'a rule names scheme, host and port only');
  let hostPart = authority;
  let portPart: string | undefined;
  const close = authority.lastIndexOf(']');
  const colon = authority.lastIndexOf(':');
  if (colon > close) {
    hostPart = authority.slice(0, colon);
    portPart = authority.slice(colon + 1);
  }
  const isWildcard = hostPart.startsWith('*.');
  if (hostPart.slice(isWildcard ? 2 : 0).includes('*')) {
    return deny('destination_malformed', 'a wildcard may only be the whole first label, as in *.example.com');
  }
  const host = canonicalizeHost(isWildcard ? hostPart.slice(2) : hostPart);
  if (!host.ok) return host;
  if (isWildcard && host.value.hostKind !== 'name') return deny('destination_malformed', 'a wildcard needs a domain name, not an address');
  let port = DEFAULT_PORTS[scheme];
  if (portPart !== undefined) {
    const parsed = parsePort(portPart);
    if (!parsed.ok) return parsed;
    port = parsed.value;
  }
  if (port === undefined) return deny('destination_malformed', `${scheme} rules need an explicit port`);
  const hostText = isWildcard ? `*.${host.value.host}` : host.value.host;
  return ok({
    scheme,
    host: host.value.host,
    isWildcard,
    port,
    text: `${scheme}://${formatHostPort(hostText, host.value.hostKind, port)}`,
  });
}
