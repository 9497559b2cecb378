// The SOCKS5 handshake on the wire (RFC 1928, RFC 1929): the greeting, username/password
// authentication and the request, read in exact lengths within MAX_HANDSHAKE_BYTES. Decides nothing:
// proxy/ingress/socks5.ts identifies the credentials and authorizes the target like any other hop.
import type net from 'node:net';

const VERSION = 5;
const NO_AUTH = 0x00;
const USER_PASS = 0x02;
const NO_ACCEPTABLE = 0xff;
const MAX_HANDSHAKE_BYTES = 1024;

/** A reply to the request: `code`, and an all-zero IPv4 bound address (RFC 1928 §6). */
export function socks5Reply(code: number): Buffer {
  return Buffer.from([VERSION, code, 0x00, 0x01, 0, 0, 0, 0, 0, 0]);
}

/** Reads exactly `n` bytes (or fewer if the socket ends), bounded by the handshake timeout. */
export class HandshakeReader {
  private buffer = Buffer.alloc(0);
  private waiting: { n: number; resolve: (b: Buffer | null) => void } | null = null;
  private ended = false;

  constructor(private readonly socket: net.Socket) {
    socket.on('data', this.onData);
    // A client that half-closes mid-handshake sends no more: settle now, not at the handshake timeout.
    socket.once('end', () => {
      this.ended = true;
      this.settle(null);
    });
    socket.once('close', () => this.settle(null));
  }

  private readonly onData = (chunk: Buffer): void => {
    this.buffer = Buffer.concat([this.buffer, chunk]);
    if (this.buffer.length > MAX_HANDSHAKE_BYTES) this.socket.destroy();
    this.pump();
  };

  private pump(): void {
    if (this.waiting !== null && this.buffer.length >= this.waiting.n) {
      const out = this.buffer.subarray(0, this.waiting.n);
      this.buffer = this.buffer.subarray(this.waiting.n);
      this.settle(out);
    }
  }

  private settle(value: Buffer | null): void {
    const w = this.waiting;
    this.waiting = null;
    w?.resolve(value);
  }

  read(n: number): Promise<Buffer | null> {
    return new Promise((resolve) => {
      this.waiting = { n, resolve };
      this.pump();
      if (this.ended || this.socket.destroyed) this.settle(null);
    });
  }

  /** Hands the socket over to the tunnel, with any bytes already read. */
  release(): Buffer {
    this.socket.removeListener('data', this.onData);
    this.socket.pause();
    return this.buffer;
  }
}

/**
 * The greeting and, if asked, RFC 1929 authentication: a Proxy-Authorization value (`Basic` of user:password),
 * undefined when a dedicated listener takes no credentials, null when the client offered nothing usable.
 */
export async function negotiateSocks5(dedicated: boolean, socket: net.Socket, r: HandshakeReader): Promise<string | undefined | null> {
  const greeting = await r.read(2);
  if (greeting === null || greeting[0] !== VERSION) return null;
  const methods = await r.read(greeting[1] ?? 0);
  if (methods === null) return null;
  const offered = new Set(methods);
  // A dedicated listener needs no credentials; a token listener insists on them.
  if (dedicated && offered.has(NO_AUTH) && !offered.has(USER_PASS)) {
    socket.write(Buffer.from([VERSION, NO_AUTH]));
    return undefined;
  }
  if (!offered.has(USER_PASS)) {
    socket.end(Buffer.from([VERSION, NO_ACCEPTABLE]));
    return null;
  }
  socket.write(Buffer.from([VERSION, USER_PASS]));
  const ulen = await r.read(2);
  if (ulen === null || ulen[0] !== 0x01) return null;
  const user = await r.read(ulen[1] ?? 0);
  const plen = await r.read(1);
  if (user === null || plen === null) return null;
  const pass = await r.read(plen[0] ?? 0);
  if (pass === null) return null;
  // RFC 1929: UNAME is the grant id, PASSWD the token; identified exactly like Proxy-Authorization Basic.
  return `Basic ${Buffer.concat([user, Buffer.from(':'), pass]).toString('base64')}`;
}

/** The request: its command and its target as an authority (`host:port`, IPv6 in brackets); null if cut short. */
export async function readSocks5Request(r: HandshakeReader): Promise<{ cmd: number; authority: string } | null> {
  const head = await r.read(4);
  if (head === null || head[0] !== VERSION) return null;
  const cmd = head[1] ?? 0;
  const atyp = head[3];
  let host: string;
  if (atyp === 0x01) {
    const a = await r.read(4);
    if (a === null) return null;
    host = [...a].join('.');
  } else if (atyp === 0x04) {
    const a = await r.read(16);
    if (a === null) return null;
    const groups: string[] = [];
    for (let i = 0; i < 16; i += 2) groups.push(a.readUInt16BE(i).toString(16));
    host = `[${groups.join(':')}]`;
  } else if (atyp === 0x03) {
    const len = await r.read(1);
    const name = len === null ? null : await r.read(len[0] ?? 0);
    if (name === null) return null;
    host = name.toString('latin1');
  } else return { cmd, authority: '' };
  const port = await r.read(2);
  if (port === null) return null;
  return { cmd, authority: `${host}:${port.readUInt16BE(0)}` };
}
