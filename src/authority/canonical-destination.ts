// Turns a raw CONNECT authority or absolute-form URI into a CanonicalDestination, once, at the edge.
// RFC 9110 §9.3.6 (CONNECT authority-form host:port), RFC 9112 §3.2.2 (absolute-form), RFC 3986 §3.2.
import { deny, ok, type CanonicalDestination, type Scheme, type Verdict } from '../core/index.js';
import { canonicalizeHost, formatHostPort } from './canonical-host.js';

const PORT = /^[0-9]{1,5}$/;

export const DEFAULT_PORTS: Readonly<Record<Scheme, number | undefined>> = { http: 80, ws: 80, https: 443, wss: 443, tcp: undefined };

export function parsePort(raw: string): Verdict<number> {
  if (!PORT.test(raw)) return deny('destination_malformed', 'port is not a number');
  const port = Number(raw);
  if (port < 1 || port > 65535) return deny('destination_malformed', 'port is out of range 1-65535');
  return ok(port);
}

function makeDestination(host: string, hostKind: CanonicalDestination['hostKind'], port: number): CanonicalDestination {
  return { host, hostKind, port, key: formatHostPort(host, hostKind, port) } as CanonicalDestination;
}

/** Splits `host:port` or `[v6]:port` (port optional when defaultPort is given) and canonicalizes both. */
export function canonicalize(authority: string, defaultPort?: number): Verdict<CanonicalDestination> {
  let hostPart = authority;
  let portPart: string | undefined;
  if (authority.startsWith('[')) {
    const close = authority.indexOf(']');
    if (close < 0) return deny('destination_malformed', 'unterminated IPv6 literal');
    hostPart = authority.slice(0, close + 1);
    const rest = authority.slice(close + 1);
    if (rest !== '') {
      if (!rest.startsWith(':')) return deny('destination_malformed', 'junk after IPv6 literal');
      portPart = rest.slice(1);
    }
  } else {
    const colon = authority.lastIndexOf(':');
    if (colon >= 0) {
      hostPart = authority.slice(0, colon);
      portPart = authority.slice(colon + 1);
    }
  }
  let port: number;
  if (portPart === undefined) {
    if (defaultPort === undefined) return deny('destination_malformed', 'port is required');
    port = defaultPort;
  } else {
    const parsed = parsePort(portPart);
    if (!parsed.ok) return parsed;
    port = parsed.value;
  }
  const host = canonicalizeHost(hostPart);
  if (!host.ok) return host;
  return ok(makeDestination(host.value.host, host.value.hostKind, port));
}

export interface AbsoluteTarget {
  readonly scheme: Scheme;
  readonly destination: CanonicalDestination;
  /** Path and query exactly as sent; forwarded, never logged with its query. */
  readonly pathAndQuery: string;
}

const ABSOLUTE = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)([^#]*)$/;

/** An absolute-form target split, unchecked: `scheme://authority` exactly as sent, and the rest. */
export interface AbsoluteTargetParts {
  readonly origin: string;
  readonly rest: string;
}

/** Null when the target is not absolute-form at all (parseAbsoluteTarget then says why). */
export function splitAbsoluteTarget(target: string): AbsoluteTargetParts | null {
  const match = ABSOLUTE.exec(target);
  if (match === null) return null;
  const rest = match[3] ?? '';
  return { origin: target.slice(0, target.length - rest.length), rest };
}

/** The origin-form path and query of an absolute-form target's rest, as forwarded. */
export function pathAndQueryOf(rest: string): string {
  return rest === '' ? '/' : rest.startsWith('/') ? rest : `/${rest}`;
}

/** Parses an absolute-form request target. Only http and ws may be forwarded; https must use CONNECT. */
export function parseAbsoluteTarget(target: string): Verdict<AbsoluteTarget> {
  const match = ABSOLUTE.exec(target);
  if (match === null) return deny('request_malformed', 'request target is not an absolute URI');
  const scheme = (match[1] ?? '').toLowerCase();
  const authority = match[2] ?? '';
  const rest = match[3] ?? '';
  if (scheme === 'https' || scheme === 'wss') return deny('scheme_forbidden', `${scheme}:// must be requested with CONNECT`);
  if (scheme !== 'http' && scheme !== 'ws') return deny('scheme_forbidden', `scheme ${scheme} is not proxied`);
  if (authority.includes('@')) return deny('destination_malformed', 'userinfo is not allowed in the request target');
  const destination = canonicalize(authority, DEFAULT_PORTS[scheme]);
  if (!destination.ok) return destination;
  return ok({ scheme, destination: destination.value, pathAndQuery: pathAndQueryOf(rest) });
}

/** Parses a CONNECT request target (authority-form, explicit port). */
export function parseConnectTarget(target: string): Verdict<CanonicalDestination> {
  if (target.includes('@')) return deny('destination_malformed', 'userinfo is not allowed in a CONNECT target');
  if (target.includes('/')) return deny('destination_malformed', 'a CONNECT target is host:port only');
  return canonicalize(target);
}
