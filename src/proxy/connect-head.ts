// The CONNECT fast path's head parser. A new connection's first chunk is read here before node:http
// sees it: when it holds one whole, plain CONNECT head, the tunnel is set up without Node's HTTP parser,
// IncomingMessage and connection tracking (about a sixth of tunnel setup's CPU: ADR 0012). Anything
// else goes to node:http unchanged.
//
// This is not a second HTTP parser to reason about: it accepts a strict subset of RFC 9112 and says
// null for everything outside it, and null means "let llhttp decide". The subset is: the request line
// `CONNECT <authority characters> HTTP/1.1` (or 1.0), header lines `token ":" OWS value OWS` with values of
// visible ASCII, space and tab only, every line ended by CR LF, the whole head in this chunk and within
// maxHeaderBytes. Obs-fold, bare CR or LF, NUL, other bytes, a duplicate Proxy-Authorization, and any
// framing or upgrade field (Content-Length, Transfer-Encoding, Expect, Upgrade) are outside it
// (RFC 9112 §2.2, §3, §5, §6; request smuggling is decided by llhttp alone).

export interface ConnectHead {
  /** The request target as sent (canonicalized later, like Node's req.url). */
  readonly target: string;
  readonly versionMinor: 0 | 1;
  readonly proxyAuthorization: string | undefined;
  readonly headerCount: number;
  /** Bytes after the head: the first bytes of the tunnel. */
  readonly rest: Buffer;
}

// RFC 9110 §9.3.6: the CONNECT target is authority-form; RFC 3986 §3.2 authority characters only (llhttp
// refuses some others, such as `\` and `#`, itself).
const REQUEST_LINE = /^CONNECT ([A-Za-z0-9._~!$&'()*+,;=:@%[\]-]+) HTTP\/1\.([01])$/;
// RFC 9110 §5.1 field-name = token; §5.5 field-value without obs-text, plus surrounding OWS.
const FIELD_LINE = /^([!#$%&'*+\-.^_`|~0-9A-Za-z]+):[\t ]*([\x21-\x7e](?:[\t\x20-\x7e]*[\x21-\x7e])?)?[\t ]*$/;
const NOT_FAST = new Set(['content-length', 'transfer-encoding', 'expect', 'upgrade']);
const C = 0x43;
const HEAD_END = Buffer.from('\r\n\r\n');

/** The parsed head, or null when node:http must parse this connection. */
export function parseConnectHead(chunk: Buffer, maxHeaderBytes: number): ConnectHead | null {
  if (chunk.length < 16 || chunk[0] !== C) return null;
  const end = chunk.indexOf(HEAD_END);
  if (end < 0 || end + 4 > maxHeaderBytes) return null;
  const lines = chunk.toString('latin1', 0, end).split('\r\n');
  const request = REQUEST_LINE.exec(lines[0] ?? '');
  if (request === null) return null;
  let proxyAuthorization: string | undefined;
  for (let i = 1; i < lines.length; i++) {
    const field = FIELD_LINE.exec(lines[i] ?? '');
    if (field === null) return null;
    const name = (field[1] ?? '').toLowerCase();
    if (name === 'proxy-authorization') {
      if (proxyAuthorization !== undefined) return null;
      proxyAuthorization = field[2] ?? '';
    } else if (NOT_FAST.has(name)) {
      return null;
    }
  }
  return {
    target: request[1] ?? '',
    versionMinor: request[2] === '0' ? 0 : 1,
    proxyAuthorization,
    headerCount: lines.length - 1,
    rest: chunk.subarray(end + 4),
  };
}
