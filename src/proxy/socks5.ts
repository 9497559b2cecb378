// A SOCKS5 listener (RFC 1928) on the same pipeline as HTTP CONNECT: username/password authentication
// (RFC 1929) carries grant id and token, or a dedicated listener names the grant; CONNECT only (BIND and
// UDP ASSOCIATE are refused, 0x07); domain and IP address types are canonicalized and authorized
// exactly like CONNECT targets; reply codes come from the reason codes.
import type net from 'node:net';
import { canonicalize } from '../authority/index.js';
import type { ReasonCode } from '../core/index.js';
import type { ConnectionContext } from './connection-context.js';
import type { Decision } from './decision.js';
import { Hop } from './hop.js';
import { identifyPresented } from './identify-hop.js';
import { runHop } from './run-hop.js';
import type { ProxyRuntime } from './runtime.js';
import { answerTunnel, tunnelStages, type TunnelClient, type TunnelResponder } from './tunnel-stages.js';

const VERSION = 5;
const NO_AUTH = 0x00;
const USER_PASS = 0x02;
const NO_ACCEPTABLE = 0xff;
const MAX_HANDSHAKE_BYTES = 1024;

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
    case 'address_class_denied':
    case 'address_self':
    case 'route_unattested':
    case 'grant_expired':
    case 'grant_revoked':
    case 'token_grant_mismatch':
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

function reply(code: number): Buffer {
  return Buffer.from([VERSION, code, 0x00, 0x01, 0, 0, 0, 0, 0, 0]);
}

const SOCKS_RESPONDER: TunnelResponder = {
  established: (socket) => void socket.write(reply(0x00)),
  deny: (socket, decision) => {
    if (!socket.destroyed) socket.end(reply(socksReplyCode(decision.reason)));
  },
};

/** Reads exactly `n` bytes (or fewer if the socket ends), bounded by the handshake timeout. */
class HandshakeReader {
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

async function negotiate(ctx: ConnectionContext, socket: net.Socket, r: HandshakeReader): Promise<string | undefined | null> {
  const greeting = await r.read(2);
  if (greeting === null || greeting[0] !== VERSION) return null;
  const methods = await r.read(greeting[1] ?? 0);
  if (methods === null) return null;
  const offered = new Set(methods);
  // A dedicated listener needs no credentials; a token listener insists on them.
  if (ctx.identity.boundGrant !== null && offered.has(NO_AUTH) && !offered.has(USER_PASS)) {
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

async function readTarget(r: HandshakeReader): Promise<{ cmd: number; authority: string } | null> {
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

export async function onSocksConnection(rt: ProxyRuntime, ctx: ConnectionContext, socket: net.Socket): Promise<void> {
  socket.on('error', () => socket.destroy());
  const timer = setTimeout(() => socket.destroy(), rt.handshakeTimeoutMs);
  const r = new HandshakeReader(socket);
  const auth = await negotiate(ctx, socket, r);
  if (auth === null) {
    // No request was made: the connection ends without a hop.
    clearTimeout(timer);
    socket.destroy();
    return;
  }
  const hop = new Hop(ctx.nextHop(), 'connect', 'SOCKS5', '');
  const client: TunnelClient = { socket, head: Buffer.alloc(0), responder: SOCKS_RESPONDER, established: false };
  // Until the request is read, a denial has no reply of its own (the authentication reply said it).
  let answer = (decision: Decision): void => {
    if (!socket.destroyed) socket.end();
    void decision;
  };
  await runHop(rt, ctx, hop, async (run) => {
    let grant = identifyPresented(rt, ctx, hop, auth, 0);
    if (grant instanceof Promise) grant = await grant;
    if (auth !== undefined) socket.write(Buffer.from([0x01, grant === null ? 0x01 : 0x00]));
    if (grant === null) return clearTimeout(timer);
    const target = await readTarget(r);
    clearTimeout(timer);
    if (target === null) {
      answer = () => socket.destroy();
      return void hop.fail('request_malformed', 'incomplete SOCKS5 request');
    }
    hop.target = target.authority;
    answer = (decision) => answerTunnel(client, decision);
    if (target.cmd !== 0x01) {
      answer = () => void socket.end(reply(0x07));
      return void hop.fail('request_malformed', `SOCKS5 command ${target.cmd} is not supported (CONNECT only)`);
    }
    const dest = canonicalize(target.authority);
    if (!dest.ok) return void hop.fail(dest.reason, dest.detail);
    hop.canonical = dest.value;
    await tunnelStages(rt, ctx, run, grant, { ...client, head: r.release() });
  }, (decision) => answer(decision));
}
