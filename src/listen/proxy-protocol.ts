// The PROXY protocol header a load balancer puts in front of a connection (HAProxy's proxy-protocol.txt,
// v1 text and v2 binary): parsed from bytes only, no socket and no clock, so it can be fuzzed. The
// verdict depends only on the first MAX_PROXY_HEADER_BYTES bytes: a reader never needs to buffer more.
import net from 'node:net';

/** v1: "the CRLF sequence [must be found] in the first 107 characters" (spec §2.1). */
export const MAX_V1_BYTES = 107;
/** v2: both formats "fit in the smallest TCP segment that any TCP/IP host is required to support (536 bytes)". */
export const MAX_V2_BYTES = 536;
export const MAX_PROXY_HEADER_BYTES = MAX_V2_BYTES;

const V2_SIGNATURE = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]);
const V1_PREFIX = Buffer.from('PROXY ', 'latin1');
const V2_FIXED = 16;

/**
 * A complete header: `source` is the client address it carries, or null when it carries none to use
 * (v1 UNKNOWN, a v2 LOCAL command such as a health check, an unspecified or Unix family): then the
 * connection's own peer is the client. `length` is the header's size; the bytes after it are the client's.
 */
export interface ProxyHeader {
  readonly version: 1 | 2;
  readonly source: { readonly address: string; readonly port: number } | null;
  readonly length: number;
}

export type ProxyHeaderResult =
  | { readonly state: 'incomplete' }
  | { readonly state: 'invalid'; readonly reason: string }
  | { readonly state: 'complete'; readonly header: ProxyHeader };

const INCOMPLETE = Object.freeze({ state: 'incomplete' as const });

function invalid(reason: string): ProxyHeaderResult {
  return { state: 'invalid', reason };
}

/** Whether `buf` (possibly shorter) agrees with `prefix` on their common length. */
function agrees(buf: Buffer, prefix: Buffer): boolean {
  const n = Math.min(buf.length, prefix.length);
  return buf.subarray(0, n).equals(prefix.subarray(0, n));
}

/** Reads a PROXY header from the start of `buf`. Never throws; looks at no byte past MAX_PROXY_HEADER_BYTES. */
export function parseProxyHeader(buf: Buffer): ProxyHeaderResult {
  if (buf.length === 0) return INCOMPLETE;
  if (agrees(buf, V2_SIGNATURE)) return buf.length < V2_FIXED ? INCOMPLETE : parseV2(buf);
  if (agrees(buf, V1_PREFIX)) return buf.length < V1_PREFIX.length ? INCOMPLETE : parseV1(buf);
  return invalid('does not start with a PROXY protocol signature');
}

function parseV1(buf: Buffer): ProxyHeaderResult {
  const window = buf.subarray(0, MAX_V1_BYTES);
  for (let i = 0; i < window.length; i++) {
    const byte = window[i]!;
    if (byte === 0x0d) {
      if (i + 1 >= window.length) return window.length < MAX_V1_BYTES ? INCOMPLETE : invalid('v1 line longer than 107 bytes');
      if (window[i + 1] !== 0x0a) return invalid('v1 line has a CR without LF');
      return parseV1Line(window.subarray(0, i).toString('latin1'), i + 2);
    }
    // Printable ASCII only: a stray LF or a control byte is refused at once, not after a wait.
    if (byte < 0x20 || byte > 0x7e) return invalid('v1 line holds a byte that is not printable ASCII');
  }
  return window.length < MAX_V1_BYTES ? INCOMPLETE : invalid('v1 line longer than 107 bytes');
}

const DECIMAL = /^(0|[1-9][0-9]{0,4})$/;
const IPV4 = /^(0|[1-9][0-9]{0,2})(\.(0|[1-9][0-9]{0,2})){3}$/;
const IPV6 = /^[0-9A-Fa-f:]{2,39}$/;

function portOf(text: string): number | null {
  if (!DECIMAL.test(text)) return null;
  const port = Number(text);
  return port <= 65535 ? port : null;
}

function addressOf(text: string, family: 'TCP4' | 'TCP6'): string | null {
  if (family === 'TCP4') return IPV4.test(text) && net.isIPv4(text) ? text : null;
  return IPV6.test(text) && net.isIPv6(text) ? ipv6Text(text) : null;
}

function parseV1Line(line: string, length: number): ProxyHeaderResult {
  const fields = line.split(' ');
  // "For UNKNOWN, the rest of the line before the CRLF may be omitted ... the receiver must ignore anything presented."
  if (fields[1] === 'UNKNOWN') return { state: 'complete', header: { version: 1, source: null, length } };
  if (fields.length !== 6) return invalid('v1 line does not have 6 fields');
  const family = fields[1];
  if (family !== 'TCP4' && family !== 'TCP6') return invalid('v1 protocol is not TCP4, TCP6 or UNKNOWN');
  const source = addressOf(fields[2]!, family);
  const destination = addressOf(fields[3]!, family);
  const sourcePort = portOf(fields[4]!);
  const destinationPort = portOf(fields[5]!);
  if (source === null || destination === null) return invalid(`v1 address is not a canonical ${family === 'TCP4' ? 'IPv4' : 'IPv6'} address`);
  if (sourcePort === null || destinationPort === null) return invalid('v1 port is not a decimal 0-65535 without leading zeros');
  return { state: 'complete', header: { version: 1, source: { address: source, port: sourcePort }, length } };
}

function parseV2(buf: Buffer): ProxyHeaderResult {
  const versionCommand = buf[12]!;
  const familyProtocol = buf[13]!;
  const addressLength = buf.readUInt16BE(14);
  if (versionCommand >> 4 !== 2) return invalid('v2 version is not 2');
  const command = versionCommand & 0x0f;
  if (command !== 0 && command !== 1) return invalid('v2 command is neither LOCAL nor PROXY');
  const length = V2_FIXED + addressLength;
  if (length > MAX_V2_BYTES) return invalid(`v2 header longer than ${MAX_V2_BYTES} bytes`);
  if (buf.length < length) return INCOMPLETE;
  // LOCAL (a health check from the balancer itself): the family is ignored, the block skipped.
  if (command === 0) return { state: 'complete', header: { version: 2, source: null, length } };
  const family = familyProtocol >> 4;
  const protocol = familyProtocol & 0x0f;
  if (family > 3 || protocol > 2) return invalid('v2 address family or protocol is unassigned');
  if (family === 0 || protocol === 0 || family === 3) return { state: 'complete', header: { version: 2, source: null, length } };
  if (protocol !== 1) return invalid('v2 protocol is not a stream (TCP)');
  const block = buf.subarray(V2_FIXED, length);
  const size = family === 1 ? 4 : 16;
  if (block.length < 2 * size + 4) return invalid('v2 address block is shorter than its family needs');
  const address = family === 1 ? ipv4Of(block.subarray(0, 4)) : ipv6Of(block.subarray(0, 16));
  return { state: 'complete', header: { version: 2, source: { address, port: block.readUInt16BE(2 * size) }, length } };
}

function ipv4Of(bytes: Buffer): string {
  return `${bytes[0]}.${bytes[1]}.${bytes[2]}.${bytes[3]}`;
}

/** The text node:net reports for such a peer (inet_ntop: RFC 5952, `::ffff:a.b.c.d` for a mapped IPv4). */
function ipv6Text(text: string): string {
  return new net.SocketAddress({ address: text, family: 'ipv6' }).address;
}

function ipv6Of(bytes: Buffer): string {
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(bytes.readUInt16BE(i).toString(16));
  return ipv6Text(groups.join(':'));
}
