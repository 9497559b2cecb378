// Reads the first bytes a client sends inside a mediated tunnel (mediated-tunnel.ts) and tells an HTTP/1.1
// request line from everything else, before node:http sees a byte. Never forwards, never alters: the
// bytes read are handed on unchanged when they start a request.
import type net from 'node:net';
import type { ReasonCode } from '../../core/index.js';
import { readFirstBytes } from '../../relay/index.js';

export type TunnelStart =
  | { readonly kind: 'incomplete' }
  | { readonly kind: 'http' }
  | { readonly kind: 'not_http'; readonly detail: string };

const INCOMPLETE: TunnelStart = Object.freeze({ kind: 'incomplete' });
const HTTP: TunnelStart = Object.freeze({ kind: 'http' });
/** RFC 8446 §5.1: a TLS record of content type handshake (22) opens every TLS connection. */
const TLS_HANDSHAKE = 0x16;
/** RFC 9113 §3.4: the HTTP/2 connection preface starts with the method PRI, registered for nothing else. */
const H2_PREFACE_START = Buffer.from('PRI ', 'latin1');
/** RFC 9110 §5.6.2 tchar: a request line starts with a method, which is a token. */
const TCHAR = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]$/;

/**
 * Classifies the start of what a client sent into the tunnel. A request line is left to node:http
 * (strict parser); only what can never be one is refused here, with a detail that says what it was.
 */
export function classifyTunnelStart(buf: Buffer): TunnelStart {
  if (buf.length === 0) return INCOMPLETE;
  if (buf[0] === TLS_HANDSHAKE) return { kind: 'not_http', detail: 'a TLS record (ClientHello): TLS needs an https:// or tcp:// rule for this destination' };
  const n = Math.min(buf.length, H2_PREFACE_START.length);
  if (buf.subarray(0, n).equals(H2_PREFACE_START.subarray(0, n))) {
    if (n < H2_PREFACE_START.length) return INCOMPLETE;
    return { kind: 'not_http', detail: 'the HTTP/2 connection preface (RFC 9113 §3.4)' };
  }
  if (!TCHAR.test(String.fromCharCode(buf[0] ?? 0))) return { kind: 'not_http', detail: 'bytes that do not start an HTTP/1.1 request line' };
  return HTTP;
}

export type TunnelStartRead =
  | { readonly ok: true; readonly head: Buffer }
  | { readonly ok: false; readonly reason: ReasonCode; readonly detail: string };

/**
 * Waits up to `timeoutMs` for enough bytes to classify (at most four), starting with `first` (what came
 * with the CONNECT head or the SOCKS5 request). Leaves the socket paused, its bytes in `head`.
 */
export function readTunnelStart(socket: net.Socket, first: Buffer, timeoutMs: number): Promise<TunnelStartRead> {
  return readFirstBytes<TunnelStartRead>(socket, first, timeoutMs, (buffer) => {
    const start = classifyTunnelStart(buffer);
    if (start.kind === 'incomplete') return null;
    return start.kind === 'http' ? { ok: true, head: buffer } : { ok: false, reason: 'tunnel_not_http', detail: start.detail };
  }, {
    timedOut: { ok: false, reason: 'request_timeout', detail: 'no request inside the tunnel within timeouts.headersMs' },
    closed: { ok: false, reason: 'client_gone', detail: 'the client closed the tunnel before sending a request' },
  });
}
