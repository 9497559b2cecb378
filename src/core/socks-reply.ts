// The SOCKS5 reply (RFC 1928 §6) each reason code is answered with, beside the reason table, as
// proxy-status.ts maps each code to its RFC 9209 error type.
import type { ReasonCode } from './reason.js';

/** RFC 1928 §6 reply codes for each way a hop can end before the tunnel. */
export function socksReplyCode(reason: ReasonCode): number {
  switch (reason) {
    case 'granted':
      return 0x00;
    case 'dial_refused':
      return 0x05; // connection refused
    case 'dial_unreachable':
    case 'dns_no_address':
    case 'upstream_unreachable':
      return 0x04; // host unreachable
    case 'dial_timeout':
    case 'dns_timeout':
    case 'upstream_timeout':
      return 0x06; // TTL expired: the closest code for a timeout
    case 'destination_malformed':
      return 0x08; // address type not supported
    case 'destination_not_granted':
    case 'approval_denied':
    case 'approval_timeout':
    case 'address_class_denied':
    case 'address_self':
    case 'route_unattested':
    case 'grant_expired':
    case 'grant_revoked':
    case 'token_grant_mismatch':
    case 'certificate_not_granted':
    case 'connection_limit_reached':
    case 'connection_quota_exhausted':
    case 'byte_limit_reached':
    case 'auth_rate_limited':
    case 'lookup_limit_reached':
    case 'pac_limit_reached':
    case 'sni_mismatch':
      return 0x02; // connection not allowed by ruleset
    default:
      return 0x01; // general SOCKS server failure
  }
}
