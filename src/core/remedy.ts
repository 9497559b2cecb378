// How to fix each denial, for the person who runs the sandbox or Sluice (not for the program that was
// denied): one short sentence per reason code, declared once beside the reason table. The denial body
// (proxy/ingress/respond.ts) and `sluice explain` print it; docs/reason-codes.md is checked against it by a test,
// and so is every flag and config key a fix names (UX review 2026-12-04 findings 2 and 3).
import type { ReasonCode } from './reason.js';
import { GRANTABLE_CLASSES, type AddressClass, type RequestKind, type Scheme } from './types.js';

/**
 * Placeholders filled from the decision: `<rule>` is the destination rule the hop would need (its scheme,
 * canonical host and port), `<class>` the classes of the destination's addresses the grant refused.
 * Codes no grant or config change can fix say so.
 */
export const Remedies = {
  granted: 'nothing to fix',
  token_missing: 'send the grant id and token as proxy credentials (HTTPS_PROXY=http://ID:TOKEN@HOST:PORT sends Proxy-Authorization: Basic), or connect through the grant’s own socket',
  token_invalid: 'send the token issued with the grant (sluice grant issue shows it once; sluice grant rotate gives a new one)',
  token_grant_mismatch: 'send no token, or this listener’s own grant token: the listener already acts for its grant',
  certificate_not_granted: 'name the certificate in exactly one grant’s clientCertificate: its SHA-256 (openssl x509 -noout -fingerprint -sha256) or one of its URI SANs (clientCertificate.uriSan)',
  tls_handshake_failed: 'present a client certificate that chains to listeners[].tls.clientCaFile, is within its validity and not on the CRL, over TLS 1.2 or later (the audit detail names the OpenSSL error)',
  tls_required: 'speak TLS to this listener: an https:// proxy URL (curl -x https://…, HTTPS_PROXY=https://…)',
  principal_changed: 'send the same grant token on every request of a connection; open a new connection for another grant',
  grant_unknown: 'bind the listener to a grant that exists (listeners[].grant), or issue a new grant',
  grant_expired: 'issue a new grant (sluice grant issue, or a new sluice run) with a later limits.expiresAt (--expires-at)',
  grant_revoked: 'a revoked grant stays revoked: issue a new grant (sluice grant issue, or a new sluice run)',
  connection_limit_reached: 'close idle connections, or raise limits.maxConcurrent on the grant (--max-concurrent)',
  connection_quota_exhausted: 'issue a new grant, or raise limits.maxConnections on the grant',
  byte_limit_reached: 'issue a new grant, or raise limits.maxBytes on the grant (--max-bytes)',
  request_malformed: 'send an HTTP/1.1 proxy request: CONNECT host:port, or an absolute-form http:// URI',
  headers_too_large: 'send fewer or smaller header fields, or raise limits.maxHeaderBytes or limits.maxHeaderCount in Sluice’s config',
  request_timeout: 'send the whole request head within timeouts.headersMs of connecting',
  expectation_unsupported: 'send no Expect header, or Expect: 100-continue',
  connections_exhausted: 'retry later, or raise limits.maxConnections or listeners[].maxConnections in Sluice’s config',
  auth_rate_limited: 'wait Retry-After seconds, then send the right token; limits.authFailuresPerMinute in Sluice’s config sets the budget',
  sni_mismatch: 'send the host the CONNECT names as the TLS server name (SNI): the grant has tls.requireSniMatch',
  tunnel_not_http: 'send only plain HTTP/1.1 requests in this tunnel, or add a destination rule for <rule> to the grant to carry TLS (sluice run --destination <rule>)',
  destination_malformed: 'name the destination as host:port or scheme://host:port, with a valid host name or IP literal and a port from 1 to 65535',
  scheme_forbidden: 'send https:// and wss:// through CONNECT (set HTTPS_PROXY), not as an absolute-form URI',
  host_mismatch: 'send a Host header that names the URI’s host and port',
  destination_not_granted: 'add a destination rule for <rule> to the grant (sluice run --destination <rule>)',
  approval_denied: 'ask the supervisor to allow <rule> (sluice watch --ask), or add a destination rule for it to the grant (sluice run --destination <rule>)',
  approval_timeout: 'answer the ask within ask.timeoutMs (sluice watch --ask), or add a destination rule for <rule> to the grant (sluice run --destination <rule>)',
  address_class_denied: 'allow it with allowAddressClasses: [<class>] on the grant (sluice run --allow-class <class>), or only its addresses with allowAddresses (--allow-address; sluice explain lists them)',
  address_self: 'nothing the grant can change: Sluice never connects to its own listeners, admin socket or metrics port',
  route_unsupported: 'nothing the grant can change: this build never answers it; report it if you see it',
  route_unattested: 'use a route where Sluice resolves the name (route.mode direct, or route.proxy.sendResolvedAddress), or drop requireAttestedAddress from the grant',
  route_none: 'check route in Sluice’s config: no alternative of the route could be tried (sluice explain lists them)',
  pac_failed: 'fix the PAC script (route.pac): Sluice’s log has its error, and sluice explain shows its answer',
  pac_unavailable: 'make route.pac.file or route.pac.url loadable: Sluice’s log says why it is not',
  pac_unsupported_entry: 'make the PAC answer name PROXY, HTTPS or DIRECT for this destination: Sluice does not carry SOCKS',
  pac_limit_reached: 'retry later, or raise limits.maxPacWaitingPerGrant in Sluice’s config',
  upstream_auth_required: 'give Sluice credentials for the upstream proxy (route.proxy.credentialsFile, or route.proxy.auth)',
  upstream_auth_failed: 'check Sluice’s Kerberos ticket or keytab, route.proxy.spn, or the NTLM route.proxy.credentialsFile; the audit record’s detail names the step',
  upstream_auth_unsupported: 'set route.proxy.auth to a scheme the upstream proxy offers (basic, negotiate, ntlm or auto)',
  upstream_refused: 'the upstream proxy refused the destination: ask its operator, or route it another way (route)',
  upstream_unreachable: 'check that the upstream proxy (route.proxy.url, or the PAC answer) is up and reachable from Sluice',
  upstream_tls_failed: 'give Sluice the upstream proxy’s CA (route.proxy.caFile), or fix the proxy’s certificate',
  upstream_timeout: 'check the upstream proxy, or raise timeouts.upstreamMs',
  upstream_failed: 'check that route.proxy.url names an HTTP proxy',
  dns_timeout: 'check dns.servers in Sluice’s config, or raise dns.timeoutMs',
  dns_no_address: 'check the host name, or give it an address in dns.hosts in Sluice’s config',
  dns_failed: 'check dns.servers in Sluice’s config',
  dns_busy: 'retry later, or raise limits.maxConcurrentLookups in Sluice’s config',
  lookup_limit_reached: 'retry later, or raise limits.maxConcurrentLookupsPerGrant in Sluice’s config',
  dial_refused: 'check that the destination listens on that port',
  dial_unreachable: 'check the network path from Sluice’s host to the destination',
  dial_timeout: 'check the destination and the network path, or raise timeouts.dialMs',
  origin_failed: 'check the origin server: it closed before a complete response',
  origin_timeout: 'check the origin server, or raise timeouts.originResponseMs',
  client_gone: 'nothing to fix: the client left before the hop completed',
  upgrade_unsupported: 'open WebSockets and other upgrades through CONNECT (set HTTPS_PROXY), which a wss:// or tcp:// rule admits',
  ledger_unavailable: 'bring the ledger store (ledger.redis) back within reach of this instance: hops resume once it answers',
  internal_error: 'report it: a bug in Sluice, whose log has the fault',
} as const satisfies Record<ReasonCode, string>;

/**
 * address_class_denied when no refused class is grantable (unspecified, multicast): naming them in
 * allowAddressClasses would be a config error, not a fix.
 */
export const UNGRANTABLE_CLASS_REMEDY = 'nothing the grant can change: Sluice never dials unspecified or multicast addresses; check what the name resolves to (dns.hosts, the DNS)';

/** What a fix is filled from: the decision's own fields (a Decision satisfies this as it is). */
export interface RemedyFacts {
  readonly request: RequestKind;
  readonly scheme: Scheme | null;
  /** The canonical destination, `host:port` or `[v6]:port`; null before it was parsed. */
  readonly canonical: string | null;
  readonly addresses: readonly { readonly class: AddressClass; readonly allowed: boolean }[];
}

/** The classes of the destination's addresses the grant refused, each once, in answer order. */
export function deniedClasses(facts: Pick<RemedyFacts, 'addresses'>): AddressClass[] {
  const classes: AddressClass[] = [];
  for (const a of facts.addresses) if (!a.allowed && !classes.includes(a.class)) classes.push(a.class);
  return classes;
}

/**
 * The rule the hop would need: a CONNECT is admitted by https, wss or tcp rules, and https is what
 * nearly every client tunnels; an absolute-form request by its own scheme (http or ws).
 */
export function wantedRule(facts: Pick<RemedyFacts, 'request' | 'scheme' | 'canonical'>): string | null {
  if (facts.canonical === null) return null;
  const scheme = facts.scheme ?? (facts.request === 'connect' ? 'https' : 'http');
  return `${scheme}://${facts.canonical}`;
}

/**
 * The fix for `reason`, filled from the hop's facts. The caller passes the code the client is answered
 * with (sentReason), so an audit-only code never shows through its fix.
 */
export function remedyFor(reason: ReasonCode, facts: RemedyFacts): string {
  const template: string = Remedies[reason];
  if (reason === 'address_class_denied') {
    const denied = deniedClasses(facts);
    const grantable = denied.filter((c) => GRANTABLE_CLASSES.includes(c));
    if (denied.length > 0 && grantable.length === 0) return UNGRANTABLE_CLASS_REMEDY;
    if (grantable.length === 0) return template;
    return template.replaceAll('--allow-class <class>', grantable.map((c) => `--allow-class ${c}`).join(' ')).replaceAll('<class>', grantable.join(', '));
  }
  const rule = wantedRule(facts);
  return rule === null ? template : template.replaceAll('<rule>', rule);
}
