// Reads an upstream proxy's answer to CONNECT (RFC 9112): the status, the Proxy-Authenticate challenges,
// and, for a refusal such as a 407, where its body ends, so the next leg of an authentication handshake
// can go on the same connection (NTLM authenticates the connection: MS-NLMP §3.1.5, RFC 4559 §6).

export interface ProxyAnswer {
  readonly status: number;
  readonly headLength: number;
  /** Proxy-Authenticate field values, in order. */
  readonly challenges: readonly string[];
  /**
   * Where the body of a non-2xx answer ends, relative to the head's end: a length, `chunked`, or `close`
   * (it runs until the proxy closes: the connection cannot carry another leg).
   */
  readonly body: number | 'chunked' | 'close';
}

export const MAX_HEAD_BYTES = 16 * 1024;
/** A 407 body longer than this is not read through: its connection is dropped instead. */
export const MAX_SKIPPED_BODY_BYTES = 64 * 1024;

export function parseProxyAnswer(buffer: Buffer): ProxyAnswer | 'incomplete' | 'garbage' {
  const end = buffer.indexOf('\r\n\r\n');
  if (end < 0) return buffer.length > MAX_HEAD_BYTES ? 'garbage' : 'incomplete';
  if (end > MAX_HEAD_BYTES) return 'garbage';
  const lines = buffer.toString('latin1', 0, end).split('\r\n');
  const match = /^HTTP\/1\.([01]) (\d{3})(?: |$)/.exec(lines[0] ?? '');
  if (match === null) return 'garbage';
  const status = Number(match[2]);
  const challenges: string[] = [];
  let length: number | null = null;
  let chunked = false;
  let transferEncoding = false;
  let close = match[1] === '0';
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i] ?? '';
    const colon = line.indexOf(':');
    if (colon <= 0) return 'garbage';
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    if (name === 'proxy-authenticate') challenges.push(value);
    else if (name === 'content-length') {
      // Differing lengths are a framing attack (RFC 9112 §6.3): the connection is not reused.
      if (!/^\d{1,15}$/.test(value) || (length !== null && length !== Number(value))) close = true;
      else length = Number(value);
    } else if (name === 'transfer-encoding') {
      transferEncoding = true;
      chunked = value.toLowerCase().split(',').map((v) => v.trim()).at(-1) === 'chunked';
    }
    else if (name === 'connection') {
      const options = value.toLowerCase().split(',').map((v) => v.trim());
      if (options.includes('close')) close = true;
      else if (options.includes('keep-alive') && match[1] === '0') close = false;
    }
  }
  // Transfer-Encoding beside Content-Length is a smuggling sign (RFC 9112 §6.3 item 3), one not ending in
  // chunked runs until close (item 4), and on HTTP/1.0 the framing is faulty (§6.1): no next leg follows.
  if (transferEncoding && (!chunked || length !== null || match[1] === '0')) close = true;
  const body: ProxyAnswer['body'] = close ? 'close' : chunked ? 'chunked' : length ?? 'close';
  return { status, headLength: end + 4, challenges, body };
}

/**
 * How many bytes of `data` the body takes when it is complete: `incomplete` while more must arrive,
 * `garbage` for a chunked body that does not parse or a body longer than MAX_SKIPPED_BODY_BYTES.
 */
export function bodyEnd(data: Buffer, body: number | 'chunked'): number | 'incomplete' | 'garbage' {
  if (typeof body === 'number') {
    if (body > MAX_SKIPPED_BODY_BYTES) return 'garbage';
    return data.length >= body ? body : 'incomplete';
  }
  let at = 0;
  for (;;) {
    const lineEnd = data.indexOf('\r\n', at);
    if (lineEnd < 0) return data.length - at > 1024 ? 'garbage' : 'incomplete';
    const size = /^([0-9A-Fa-f]{1,8})(?:[ \t]*;.*)?$/.exec(data.toString('latin1', at, lineEnd));
    if (size === null) return 'garbage';
    const n = parseInt(size[1] ?? '', 16);
    if (n === 0) {
      // The last chunk, then trailer fields up to an empty line (RFC 9112 §7.1.2).
      const close = data.indexOf('\r\n\r\n', lineEnd);
      if (data.indexOf('\r\n', lineEnd + 2) === lineEnd + 2) return lineEnd + 4;
      if (close < 0) return data.length > MAX_SKIPPED_BODY_BYTES ? 'garbage' : 'incomplete';
      return close + 4;
    }
    at = lineEnd + 2 + n + 2;
    if (at > MAX_SKIPPED_BODY_BYTES) return 'garbage';
    if (data.length < at) return 'incomplete';
    if (data.toString('latin1', at - 2, at) !== '\r\n') return 'garbage';
  }
}
