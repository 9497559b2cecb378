// Writes the responses Sluice generates itself: status from the reason table, an RFC 9209 Proxy-Status
// whose `details` is the reason code, and a one-line body naming the canonical destination and grant,
// and how to fix the denial (core/remedy.ts). Never a token, never a header value from the request,
// never an address, never an audit-only code (core/reason.ts).
import type http from 'node:http';
import type net from 'node:net';
import { deniedClasses, PROXY_NAME, proxyStatus, Reasons, remedyFor, sentReason, type ReasonCode } from '../../core/index.js';
import { AUTH_THROTTLE_WINDOW_SECONDS } from '../../grant/index.js';
import type { Decision } from '../hop/decision.js';

/**
 * What a denial answer reads of the hop's decision (decision.ts): its code (an audit-only code is
 * answered as the code it maps to), the canonical destination and the principal's grant, and for the
 * fix the request kind, scheme and the classes (never the addresses) of the destination's answers.
 */
export type DenialContext = Pick<Decision, 'reason' | 'canonical' | 'principal' | 'request' | 'scheme' | 'addresses'>;

/**
 * `sluice: <status> <code>: <message> (destination …, grant …[, denied class …]); fix: …`. Clients and
 * scripts read the line's start (git prints it as `remote: sluice: 403 …`). The classes are those of the
 * destination the principal itself asked for, as smokescreen says too; the grant's other rules are not
 * named: a grant is opaque to its principal, and `sluice explain` lists them to the host.
 */
export function denialBody(ctx: DenialContext): string {
  const reason = sentReason(ctx.reason);
  const spec = Reasons[reason];
  const classes = reason === 'address_class_denied' ? deniedClasses(ctx) : [];
  const denied = classes.length === 0 ? '' : `, denied class${classes.length === 1 ? '' : 'es'} ${classes.join(', ')}`;
  return `sluice: ${spec.status} ${reason}: ${spec.message} (destination ${ctx.canonical ?? 'unknown'}, grant ${ctx.principal ?? 'none'}${denied}); fix: ${remedyFor(reason, ctx)}\n`;
}

function denialHeaders(reason: ReasonCode, body: string, close: boolean): [string, string][] {
  const headers: [string, string][] = [
    ['Proxy-Status', proxyStatus(reason)],
    ['Content-Type', 'text/plain; charset=utf-8'],
    ['Content-Length', String(Buffer.byteLength(body))],
    ['Cache-Control', 'no-store'],
  ];
  if (Reasons[reason].status === 407) headers.push(['Proxy-Authenticate', 'Basic realm="sluice"']);
  // RFC 9110 §10.2.3, RFC 6585 §4: the throttle's counts start again within one window, so waiting it
  // out is always enough (the hop carries no finer figure to here).
  if (reason === 'auth_rate_limited') headers.push(['Retry-After', String(AUTH_THROTTLE_WINDOW_SECONDS)]);
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
    case 503: return 'Service Unavailable';
    case 502: return 'Bad Gateway';
    case 504: return 'Gateway Timeout';
    default: return 'OK';
  }
}
