// Reads the server name from a TLS ClientHello without decrypting or altering anything: the record
// header (RFC 8446 §5.1), the handshake header (§4), and the server_name extension (RFC 6066 §3). Used
// by the domain-fronting guard; it only ever looks at bytes the client sends in the clear.

export type ClientHelloResult =
  | { readonly kind: 'incomplete' }
  | { readonly kind: 'not_tls' }
  | { readonly kind: 'hello'; readonly serverName: string | null };

/** The most Sluice buffers while waiting for one ClientHello (a record is at most 2^14 + 5 bytes). */
export const MAX_CLIENT_HELLO_BYTES = 16_384 + 5;

export function parseClientHello(buf: Buffer): ClientHelloResult {
  if (buf.length < 5) return buf.length > 0 && buf[0] !== 22 ? { kind: 'not_tls' } : { kind: 'incomplete' };
  if (buf[0] !== 22 || buf[1] !== 3) return { kind: 'not_tls' };
  const recordLength = buf.readUInt16BE(3);
  if (recordLength > 16_384) return { kind: 'not_tls' };
  if (buf.length < 5 + recordLength) return { kind: 'incomplete' };
  // A ClientHello split across records is legal but rare; we require it in the first record.
  const body = buf.subarray(5, 5 + recordLength);
  if (body.length < 4 || body[0] !== 1) return { kind: 'not_tls' };
  const helloLength = body.readUIntBE(1, 3);
  if (helloLength + 4 > body.length) return { kind: 'not_tls' };
  const hello = body.subarray(4, 4 + helloLength);
  let at = 2 + 32; // legacy_version, random
  if (at >= hello.length) return { kind: 'not_tls' };
  at += 1 + (hello[at] ?? 0); // legacy_session_id
  if (at + 2 > hello.length) return { kind: 'not_tls' };
  at += 2 + hello.readUInt16BE(at); // cipher_suites
  if (at >= hello.length) return { kind: 'not_tls' };
  at += 1 + (hello[at] ?? 0); // legacy_compression_methods
  if (at === hello.length) return { kind: 'hello', serverName: null }; // no extensions
  if (at + 2 > hello.length) return { kind: 'not_tls' };
  const extensionsEnd = at + 2 + hello.readUInt16BE(at);
  if (extensionsEnd > hello.length) return { kind: 'not_tls' };
  at += 2;
  while (at + 4 <= extensionsEnd) {
    const type = hello.readUInt16BE(at);
    const length = hello.readUInt16BE(at + 2);
    const data = hello.subarray(at + 4, at + 4 + length);
    if (data.length !== length) return { kind: 'not_tls' };
    if (type === 0) return serverNameOf(data);
    at += 4 + length;
  }
  return { kind: 'hello', serverName: null };
}

function serverNameOf(data: Buffer): ClientHelloResult {
  if (data.length < 2) return { kind: 'not_tls' };
  const listEnd = 2 + data.readUInt16BE(0);
  let at = 2;
  while (at + 3 <= Math.min(listEnd, data.length)) {
    const nameType = data[at];
    const length = data.readUInt16BE(at + 1);
    const name = data.subarray(at + 3, at + 3 + length);
    if (name.length !== length) return { kind: 'not_tls' };
    // host_name (0) is the only defined type; it is ASCII (RFC 6066 §3: A-labels, no trailing dot).
    if (nameType === 0) return { kind: 'hello', serverName: name.toString('latin1') };
    at += 3 + length;
  }
  return { kind: 'hello', serverName: null };
}
