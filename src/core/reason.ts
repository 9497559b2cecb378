// The closed table of decision reason codes: each code's HTTP status and human message, declared once.
// Codes are never renamed or reused; docs/reason-codes.md is checked against this table by a test.

export type ReasonStatus = 200 | 400 | 403 | 407 | 408 | 417 | 429 | 500 | 502 | 503 | 504;
type ReasonSpec = { readonly status: ReasonStatus; readonly message: string };

export const Reasons = {
  granted: { status: 200, message: 'destination is in the principal’s grant' },
  token_missing: { status: 407, message: 'no grant token was presented' },
  token_invalid: { status: 407, message: 'the presented grant token is not valid' },
  token_grant_mismatch: { status: 407, message: 'a token valid for another grant was presented on a dedicated listener' },
  certificate_not_granted: { status: 403, message: 'the client certificate is valid but names no grant (or several)' },
  tls_handshake_failed: { status: 400, message: 'the TLS handshake on a TLS listener failed: no certificate, an untrusted, expired or revoked one, or an unsupported version' },
  tls_required: { status: 400, message: 'this listener speaks TLS, and the connection began in plain text' },
  principal_changed: { status: 403, message: 'a later request on this connection presented another principal' },
  grant_unknown: { status: 403, message: 'the listener is bound to a grant that does not exist' },
  grant_expired: { status: 403, message: 'the grant has expired' },
  grant_revoked: { status: 403, message: 'the grant has been revoked' },
  connection_limit_reached: { status: 429, message: 'the grant already has its maximum number of concurrent connections' },
  connection_quota_exhausted: { status: 429, message: 'the grant has used its maximum number of connections' },
  byte_limit_reached: { status: 429, message: 'the grant has used its byte budget' },
  request_malformed: { status: 400, message: 'the request is not a well-formed proxy request' },
  headers_too_large: { status: 400, message: 'the request head has too many or too large header fields' },
  request_timeout: { status: 408, message: 'the request head did not arrive in time' },
  expectation_unsupported: { status: 417, message: 'the request carries an Expect other than 100-continue' },
  connections_exhausted: { status: 429, message: 'Sluice or this listener already has its maximum number of connections' },
  auth_rate_limited: { status: 429, message: 'too many failed proxy authentications for this grant id or from this address; try again later' },
  sni_mismatch: { status: 403, message: 'the TLS ClientHello names another server than the authorized destination' },
  tunnel_not_http: { status: 403, message: 'a tunnel granted only by http:// rules carries HTTP/1.1 requests, and this is not one' },
  dns_busy: { status: 502, message: 'too many name lookups are already in flight' },
  lookup_limit_reached: { status: 429, message: 'the grant already has its maximum number of name lookups in flight' },
  destination_malformed: { status: 400, message: 'the destination is not a valid scheme, host and port' },
  scheme_forbidden: { status: 400, message: 'this scheme cannot be requested in absolute form; use CONNECT' },
  host_mismatch: { status: 400, message: 'the absolute-form URI and the Host header disagree' },
  destination_not_granted: { status: 403, message: 'destination is not in the principal’s grant' },
  approval_denied: { status: 403, message: 'the destination is not in the grant, and the supervisor denied it when asked' },
  approval_timeout: { status: 403, message: 'the destination is not in the grant, and nobody answered the ask within ask.timeoutMs' },
  address_class_denied: { status: 403, message: 'destination resolves only to addresses the grant does not allow' },
  address_self: { status: 403, message: 'destination is one of Sluice’s own listeners' },
  route_unsupported: { status: 502, message: 'the configured route cannot be honoured' },
  route_unattested: { status: 403, message: 'the grant requires an attested address but the route lets an upstream proxy resolve it' },
  route_none: { status: 502, message: 'the route left no way to reach the destination' },
  pac_failed: { status: 502, message: 'the PAC script failed, timed out or returned an unusable answer' },
  pac_unavailable: { status: 502, message: 'no PAC script has been loaded' },
  pac_unsupported_entry: { status: 502, message: 'the PAC answer lists only route types Sluice does not support' },
  pac_limit_reached: { status: 429, message: 'the grant already has its maximum number of PAC evaluations waiting' },
  upstream_auth_required: { status: 502, message: 'the upstream proxy demands authentication Sluice cannot satisfy' },
  upstream_auth_failed: { status: 502, message: 'the upstream proxy rejected Sluice’s Negotiate or NTLM authentication, or Sluice had no valid credentials to offer' },
  upstream_auth_unsupported: { status: 502, message: 'the upstream proxy offers only authentication schemes Sluice is not configured for' },
  upstream_refused: { status: 502, message: 'the upstream proxy refused the request' },
  upstream_unreachable: { status: 502, message: 'the upstream proxy could not be reached' },
  upstream_tls_failed: { status: 502, message: 'the TLS connection to the upstream proxy failed verification or handshake' },
  upstream_timeout: { status: 504, message: 'the upstream proxy did not answer in time' },
  upstream_failed: { status: 502, message: 'the upstream proxy answered with something that is not HTTP' },
  dns_timeout: { status: 504, message: 'resolving the destination timed out' },
  dns_no_address: { status: 502, message: 'the destination name has no address' },
  dns_failed: { status: 502, message: 'resolving the destination failed' },
  dial_refused: { status: 502, message: 'every checked address refused the connection' },
  dial_unreachable: { status: 502, message: 'no checked address could be reached' },
  dial_timeout: { status: 504, message: 'connecting to the checked address timed out' },
  origin_failed: { status: 502, message: 'the origin closed or failed before a complete response' },
  origin_timeout: { status: 504, message: 'the origin did not answer in time' },
  client_gone: { status: 400, message: 'the client closed the connection before the hop completed' },
  upgrade_unsupported: { status: 400, message: 'protocol upgrades in absolute form are not supported; use CONNECT' },
  ledger_unavailable: { status: 503, message: 'this instance has not reached the shared ledger store for longer than ledger.maxStaleMs' },
  internal_error: { status: 500, message: 'Sluice failed while handling the request; the connection was closed' },
} as const satisfies Record<string, ReasonSpec>;

export type ReasonCode = keyof typeof Reasons;

export function isReasonCode(value: string): value is ReasonCode {
  return Object.hasOwn(Reasons, value);
}

/**
 * Audit-only codes: recorded in the decision (reason, detail, metrics) but never sent. The client gets
 * the code each maps to, same status, headers and body. A token valid for another grant on a dedicated
 * listener is answered exactly like an invalid one, so the answer is no oracle for live tokens (review
 * 2026-12 finding 13).
 */
export const AuditOnlyReasons = {
  token_grant_mismatch: 'token_invalid',
} as const satisfies Partial<Record<ReasonCode, ReasonCode>>;

/** The code a client is answered with for a decision recorded as `reason`. */
export function sentReason(reason: ReasonCode): ReasonCode {
  return Object.hasOwn(AuditOnlyReasons, reason) ? AuditOnlyReasons[reason as keyof typeof AuditOnlyReasons] : reason;
}

/** Close reasons describe how an established tunnel or forward ended; they are recorded, never answered. */
export const CloseReasons = {
  completed: 'the forwarded response was delivered in full',
  client_closed: 'the client closed the connection',
  origin_closed: 'the origin closed the connection',
  client_reset: 'the client connection failed or was reset',
  origin_reset: 'the origin connection failed or was reset',
  idle_timeout: 'no bytes moved in either direction for the idle timeout',
  proxy_shutdown: 'Sluice is shutting down',
  response_error: 'the forwarded response failed mid-stream',
  revoked: 'the grant was revoked while the connection was live',
  expired: 'the grant expired while the connection was live',
  grant_changed: 'a reload changed the grant so that it no longer allows this connection',
  byte_limit: 'the grant passed its maxBytes budget',
  duration_limit: 'the connection passed the grant’s maxDurationMs',
  relay_failed: 'Sluice failed while relaying; the connection was closed',
} as const satisfies Record<string, string>;

export type CloseReason = keyof typeof CloseReasons;
