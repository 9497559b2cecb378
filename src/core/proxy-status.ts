// RFC 9209 Proxy-Status for Sluice's own answers: the proxy error type (§2.3) of each reason code, and
// the header value whose `details` is the code. Declared beside the reason table it maps; the table in
// docs/reason-codes.md is checked against it by a test.
import type { ReasonCode } from './reason.js';

export const PROXY_NAME = 'sluice';

// RFC 9209 §2.3 proxy error types for each reason code; codes absent here carry no `error` parameter.
// Audit-only codes (token_grant_mismatch) are never sent, so they have none.
export const PROXY_ERROR_TYPES: Partial<Record<ReasonCode, string>> = {
  request_malformed: 'http_request_error',
  headers_too_large: 'http_request_error',
  request_timeout: 'http_request_error',
  expectation_unsupported: 'http_request_error',
  connections_exhausted: 'proxy_internal_error',
  internal_error: 'proxy_internal_error',
  ledger_unavailable: 'proxy_internal_error',
  auth_rate_limited: 'http_request_denied',
  sni_mismatch: 'http_request_denied',
  tunnel_not_http: 'http_request_denied',
  dns_busy: 'dns_error',
  lookup_limit_reached: 'http_request_denied',
  destination_malformed: 'http_request_error',
  scheme_forbidden: 'http_request_denied',
  host_mismatch: 'http_request_error',
  upgrade_unsupported: 'http_request_denied',
  token_missing: 'http_request_denied',
  token_invalid: 'http_request_denied',
  certificate_not_granted: 'http_request_denied',
  tls_handshake_failed: 'tls_protocol_error',
  tls_required: 'http_request_error',
  principal_changed: 'http_request_denied',
  grant_unknown: 'http_request_denied',
  grant_expired: 'http_request_denied',
  grant_revoked: 'http_request_denied',
  connection_limit_reached: 'http_request_denied',
  connection_quota_exhausted: 'http_request_denied',
  byte_limit_reached: 'http_request_denied',
  destination_not_granted: 'http_request_denied',
  approval_denied: 'http_request_denied',
  approval_timeout: 'http_request_denied',
  address_class_denied: 'destination_ip_prohibited',
  address_self: 'proxy_loop_detected',
  route_unsupported: 'proxy_configuration_error',
  route_unattested: 'http_request_denied',
  route_none: 'proxy_configuration_error',
  pac_failed: 'proxy_configuration_error',
  pac_unavailable: 'proxy_configuration_error',
  pac_unsupported_entry: 'proxy_configuration_error',
  pac_limit_reached: 'http_request_denied',
  upstream_auth_required: 'proxy_configuration_error',
  upstream_auth_failed: 'proxy_configuration_error',
  upstream_auth_unsupported: 'proxy_configuration_error',
  upstream_refused: 'destination_unavailable',
  upstream_unreachable: 'destination_unavailable',
  upstream_tls_failed: 'tls_certificate_error',
  upstream_timeout: 'connection_timeout',
  upstream_failed: 'http_protocol_error',
  dns_timeout: 'dns_timeout',
  dns_no_address: 'dns_error',
  dns_failed: 'dns_error',
  dial_refused: 'connection_refused',
  dial_unreachable: 'destination_unavailable',
  dial_timeout: 'connection_timeout',
  origin_failed: 'http_response_incomplete',
  origin_timeout: 'http_response_timeout',
};

export function proxyStatus(reason: ReasonCode): string {
  const type = PROXY_ERROR_TYPES[reason];
  return type === undefined ? `${PROXY_NAME}; details="${reason}"` : `${PROXY_NAME}; error=${type}; details="${reason}"`;
}
