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

// The head is scanned as bytes against tables: no string is made of it but the target and the
// Proxy-Authorization value (issue 16: the head split into strings and matched line by line was 2% of
// tunnel setup and ~0.9 KB of garbage per tunnel).

function byteTable(chars: string): Uint8Array {
  const table = new Uint8Array(256);
  for (let i = 0; i < chars.length; i++) table[chars.charCodeAt(i)] = 1;
  return table;
}

const ALPHANUMERIC = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
// RFC 9110 §9.3.6: the CONNECT target is authority-form; RFC 3986 §3.2 authority characters only (llhttp
// refuses some others, such as `\` and `#`, itself).
const AUTHORITY = byteTable(`${ALPHANUMERIC}._~!$&'()*+,;=:@%[]-`);
// RFC 9110 §5.1 field-name = token.
const TCHAR = byteTable(`${ALPHANUMERIC}!#$%&'*+-.^_\`|~`);
const CONNECT_SP = Buffer.from('CONNECT ', 'latin1');
const SP_HTTP_1 = Buffer.from(' HTTP/1.', 'latin1');
const HEAD_END = Buffer.from('\r\n\r\n');
const CR = 0x0d;
const LF = 0x0a;
const SP = 0x20;
const HT = 0x09;
const COLON = 0x3a;

/** Field names that decide the fast path, lower case. */
const PROXY_AUTHORIZATION = Buffer.from('proxy-authorization');
// Framing and upgrade fields: their semantics are llhttp's to decide (RFC 9112 §6).
const NOT_FAST = ['content-length', 'transfer-encoding', 'expect', 'upgrade'].map((name) => Buffer.from(name));

function startsWithAt(chunk: Buffer, at: number, bytes: Buffer): boolean {
  if (at + bytes.length > chunk.length) return false;
  for (let i = 0; i < bytes.length; i++) if (chunk[at + i] !== bytes[i]) return false;
  return true;
}

/** ASCII case-insensitive: `lower` holds only lower-case letters and `-`, which no other token byte maps to with | 0x20. */
function isName(chunk: Buffer, start: number, end: number, lower: Buffer): boolean {
  if (end - start !== lower.length) return false;
  for (let i = 0; i < lower.length; i++) if (((chunk[start + i] ?? 0) | 0x20) !== lower[i]) return false;
  return true;
}

function isNotFast(chunk: Buffer, start: number, end: number): boolean {
  for (const name of NOT_FAST) if (isName(chunk, start, end, name)) return true;
  return false;
}

/** The parsed head, or null when node:http must parse this connection. */
export function parseConnectHead(chunk: Buffer, maxHeaderBytes: number): ConnectHead | null {
  if (chunk.length < 16 || chunk[0] !== CONNECT_SP[0]) return null;
  const end = chunk.indexOf(HEAD_END);
  if (end < 0 || end + 4 > maxHeaderBytes || !startsWithAt(chunk, 0, CONNECT_SP)) return null;
  // Request line: CONNECT SP authority SP HTTP/1.0|1 (RFC 9112 §3).
  let i = CONNECT_SP.length;
  while (i < end && AUTHORITY[chunk[i] ?? 0] === 1) i++;
  const targetEnd = i;
  if (targetEnd === CONNECT_SP.length || !startsWithAt(chunk, i, SP_HTTP_1)) return null;
  i += SP_HTTP_1.length;
  const minor = chunk[i];
  if (minor !== 0x30 && minor !== 0x31) return null;
  i += 1;
  let proxyAuthorization: string | undefined;
  let headerCount = 0;
  // Each field line: CR LF, then token ":" OWS value OWS, values of visible ASCII, SP and HTAB (RFC 9110 §5.5).
  while (i < end) {
    if (chunk[i] !== CR || chunk[i + 1] !== LF) return null;
    i += 2;
    const nameStart = i;
    while (i < end && TCHAR[chunk[i] ?? 0] === 1) i++;
    const nameEnd = i;
    if (nameEnd === nameStart || i >= end || chunk[i] !== COLON) return null;
    i += 1;
    while (i < end && (chunk[i] === SP || chunk[i] === HT)) i++;
    const valueStart = i;
    let valueEnd = i;
    while (i < end) {
      const b = chunk[i] ?? 0;
      if (b === CR) break;
      if (b > SP && b < 0x7f) valueEnd = i + 1;
      else if (b !== SP && b !== HT) return null;
      i++;
    }
    headerCount += 1;
    if (isName(chunk, nameStart, nameEnd, PROXY_AUTHORIZATION)) {
      if (proxyAuthorization !== undefined) return null;
      proxyAuthorization = chunk.toString('latin1', valueStart, valueEnd);
    } else if (isNotFast(chunk, nameStart, nameEnd)) {
      return null;
    }
  }
  return {
    target: chunk.toString('latin1', CONNECT_SP.length, targetEnd),
    versionMinor: minor === 0x30 ? 0 : 1,
    proxyAuthorization,
    headerCount,
    rest: chunk.subarray(end + 4),
  };
}
