// Writes the responses Sluice generates itself: status from the reason table, an RFC 9209 Proxy-Status
// whose `details` is the reason code, and a one-line body naming the canonical destination and grant.
// Never a token, never a header value from the request, never an audit-only code (core/reason.ts).
import type http from 'node:http';
import type net from 'node:net';
import { Reasons, sentReason, type ReasonCode } from '../core/index.js';
import type { Decision } from './decision.js';

export const PROXY_NAME = 'sluice';

// RFC 9209 §2.3 proxy error types for each reason code; codes absent here carry no `error` parameter.
// Audit-only codes (token_grant_mismatch) are never sent, so they have none.
const ERROR_TYPES: Partial<Record<ReasonCode, string>> = {
  request_malformed: 'http_request_error',
  headers_too_large: 'http_request_error',
  request_timeout: 'http_request_error',
  expectation_unsupported: 'http_request_error',
  connections_exhausted: 'proxy_internal_error',
  internal_error: 'proxy_internal_error',
  auth_rate_limited: 'http_request_denied',
  sni_mismatch: 'http_request_denied',
  dns_busy: 'dns_error',
  lookup_limit_reached: 'http_request_denied',
  destination_malformed: 'http_request_error',
  scheme_forbidden: 'http_request_denied',
  host_mismatch: 'http_request_error',
  upgrade_unsupported: 'http_request_denied',
  token_missing: 'http_request_denied',
  token_invalid: 'http_request_denied',
  principal_changed: 'http_request_denied',
  grant_unknown: 'http_request_denied',
  grant_expired: 'http_request_denied',
  grant_revoked: 'http_request_denied',
  connection_limit_reached: 'http_request_denied',
  connection_quota_exhausted: 'http_request_denied',
  byte_limit_reached: 'http_request_denied',
  destination_not_granted: 'http_request_denied',
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
  const type = ERROR_TYPES[reason];
  return type === undefined ? `${PROXY_NAME}; details="${reason}"` : `${PROXY_NAME}; error=${type}; details="${reason}"`;
}

/**
 * What a denial answer reads of the hop's decision (decision.ts): its code (an audit-only code is
 * answered as the code it maps to), the canonical destination and the principal's grant.
 */
export type DenialContext = Pick<Decision, 'reason' | 'canonical' | 'principal'>;

export function denialBody(ctx: DenialContext): string {
  const reason = sentReason(ctx.reason);
  const spec = Reasons[reason];
  return `sluice: ${spec.status} ${reason}: ${spec.message} (destination ${ctx.canonical ?? 'unknown'}, grant ${ctx.principal ?? 'none'})\n`;
}

function denialHeaders(reason: ReasonCode, body: string, close: boolean): [string, string][] {
  const headers: [string, string][] = [
    ['Proxy-Status', proxyStatus(reason)],
    ['Content-Type', 'text/plain; charset=utf-8'],
    ['Content-Length', String(Buffer.byteLength(body))],
    ['Cache-Control', 'no-store'],
  ];
  if (Reasons[reason].status === 407) headers.push(['Proxy-Authenticate', 'Basic realm="sluice"']);
  if (close) headers.push(['Connection', 'close']);
  return headers;
}

/** A denial on a raw socket (CONNECT, parse errors): written, then the connection is closed. */
export function writeSocketDenial(socket: net.Socket, ctx: DenialContext): void {
  if (socket.destroyed || !socket.writable) {
    socket.destroy();
    return;
  }
  const reason = sentReason(ctx.reason);
  const body = denialBody(ctx);
  const head = denialHeaders(reason, body, true).map(([k, v]) => `${k}: ${v}\r\n`).join('');
  const status = Reasons[reason].status;
  socket.end(`HTTP/1.1 ${status} ${statusText(status)}\r\n${head}\r\n${body}`);
  socket.destroySoon();
}

/** A denial of an absolute-form request; the connection stays open unless `close`. */
export function writeResponseDenial(res: http.ServerResponse, ctx: DenialContext, close: boolean): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const reason = sentReason(ctx.reason);
  const body = denialBody(ctx);
  res.shouldKeepAlive = res.shouldKeepAlive && !close;
  res.writeHead(Reasons[reason].status, denialHeaders(reason, body, close).flat());
  res.end(body);
}

const CONNECT_ESTABLISHED = Buffer.from(`HTTP/1.1 200 Connection Established\r\nProxy-Status: ${PROXY_NAME}; details="granted"\r\n\r\n`, 'latin1');

export function connectEstablished(): Buffer {
  return CONNECT_ESTABLISHED;
}

function statusText(status: number): string {
  switch (status) {
    case 400: return 'Bad Request';
    case 403: return 'Forbidden';
    case 407: return 'Proxy Authentication Required';
    case 408: return 'Request Timeout';
    case 417: return 'Expectation Failed';
    case 429: return 'Too Many Requests';
    case 500: return 'Internal Server Error';
    case 502: return 'Bad Gateway';
    case 504: return 'Gateway Timeout';
    default: return 'OK';
  }
}
