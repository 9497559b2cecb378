// Owns an NTLM-authenticating HTTP/1.1 proxy fixture on 127.0.0.1: connection-bound NTLMv2 (MS-NLMP) as
// Squid and IIS do it, then CONNECT tunnels and absolute-form forwarding to loopback addresses only.
// Verifies type 3 with src/egress/ntlm.ts and records which requests ran on which TCP connection.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { AV_ID, NTLM_FLAGS, currentFiletime, parseNtlmAuthenticate, verifyNtlmV2 } from '../../src/egress/ntlm.js';

export interface NtlmProxyOptions {
  /** 'DOMAIN\\user' (domain and user compared case-insensitively) or 'user' (any domain) → password. */
  users: Record<string, string>;
  /** Proxy-Authenticate values, each its own header, in order; default ['NTLM']. Only NTLM is ever accepted. */
  offer?: string[];
  /** Host name → 127.x address; IPv4 loopback literals are reachable without an entry, nothing else is. */
  hosts?: Record<string, string>;
  /** Fault: close the connection right after sending the type 2. */
  closeAfterChallenge?: boolean;
}

export interface NtlmProxyRequest { method: string; target: string; authorization: string | null; status: number }
export interface NtlmProxyConnection { id: number; user: string | null; requests: NtlmProxyRequest[] }
export interface NtlmProxy {
  port: number;
  url: string;
  connections(): NtlmProxyConnection[];
  close(): Promise<void>;
}

/** The fixture's target name and MsvAvNbDomainName. */
export const NTLM_PROXY_DOMAIN = 'SLUICETEST';
const MAX_HEAD_BYTES = 16 * 1024;
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authorization', 'proxy-authenticate', 'te', 'trailer', 'transfer-encoding', 'upgrade']);
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

interface Head { method: string; target: string; headers: Array<[string, string]> }

function avPair(id: number, value: Buffer): Buffer {
  const head = Buffer.alloc(4);
  head.writeUInt16LE(id, 0);
  head.writeUInt16LE(value.length, 2);
  return Buffer.concat([head, value]);
}

/** A CHALLENGE_MESSAGE (MS-NLMP 2.2.1.2) answering `negotiateFlags`, with MsvAvNbDomainName and MsvAvTimestamp. */
export function ntlmChallengeMessage(serverChallenge: Buffer, negotiateFlags: number): Buffer {
  const isUnicode = (negotiateFlags & NTLM_FLAGS.UNICODE) !== 0;
  const targetName = Buffer.from(NTLM_PROXY_DOMAIN, isUnicode ? 'utf16le' : 'latin1');
  const targetInfo = Buffer.concat([
    avPair(AV_ID.NB_DOMAIN_NAME, Buffer.from(NTLM_PROXY_DOMAIN, 'utf16le')),
    avPair(AV_ID.NB_COMPUTER_NAME, Buffer.from('NTLMPROXY', 'utf16le')),
    avPair(AV_ID.TIMESTAMP, currentFiletime()),
    avPair(AV_ID.EOL, Buffer.alloc(0)),
  ]);
  const flags = (isUnicode ? NTLM_FLAGS.UNICODE : NTLM_FLAGS.OEM) | NTLM_FLAGS.REQUEST_TARGET | NTLM_FLAGS.NTLM | NTLM_FLAGS.ALWAYS_SIGN |
    NTLM_FLAGS.TARGET_TYPE_DOMAIN | NTLM_FLAGS.TARGET_INFO | (negotiateFlags & NTLM_FLAGS.EXTENDED_SESSIONSECURITY);
  const head = Buffer.alloc(48);
  head.write('NTLMSSP\0', 0, 'latin1');
  head.writeUInt32LE(2, 8);
  head.writeUInt16LE(targetName.length, 12);
  head.writeUInt16LE(targetName.length, 14);
  head.writeUInt32LE(48, 16);
  head.writeUInt32LE(flags >>> 0, 20);
  serverChallenge.copy(head, 24);
  head.writeUInt16LE(targetInfo.length, 40);
  head.writeUInt16LE(targetInfo.length, 42);
  head.writeUInt32LE(48 + targetName.length, 44);
  return Buffer.concat([head, targetName, targetInfo]);
}

/** Strict HTTP/1.1 request head: CRLF lines, token header names, no obs-fold. Null when malformed. */
function parseHead(text: string): Head | null {
  const lines = text.split('\r\n');
  const match = /^([A-Z]+) (\S+) HTTP\/1\.1$/.exec(lines[0] ?? '');
  if (match === null) return null;
  const headers: Array<[string, string]> = [];
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    const name = line.slice(0, colon);
    if (colon <= 0 || !TOKEN.test(name) || /[\r\n\0]/.test(line)) return null;
    headers.push([name.toLowerCase(), line.slice(colon + 1).trim()]);
  }
  return { method: match[1]!, target: match[2]!, headers };
}

function lookupPassword(users: Record<string, string>, domain: string, user: string): string | undefined {
  const want = `${domain}\\${user}`.toLowerCase();
  for (const [key, password] of Object.entries(users)) {
    const k = key.toLowerCase();
    if (k === want || (!k.includes('\\') && k === user.toLowerCase())) return password;
  }
  return undefined;
}

function mapHost(hosts: Record<string, string>, host: string): string | null {
  const bare = host.replace(/^\[|\]$/g, '');
  const mapped = hosts[bare.toLowerCase()];
  if (mapped !== undefined) return mapped;
  return net.isIPv4(bare) && bare.startsWith('127.') ? bare : null;
}

class Connection {
  buffer = Buffer.alloc(0);
  isBusy = false;
  isTunnel = false;
  serverChallenge: Buffer | null = null;
  bodyRemaining = 0;
  bodySink: ((chunk: Buffer) => void) | null = null;
  bodyEnd: (() => void) | null = null;
  readonly record: NtlmProxyConnection;
  constructor(readonly socket: net.Socket, id: number, readonly proxy: Fixture) {
    this.record = { id, user: null, requests: [] };
  }

  onData(chunk: Buffer): void {
    this.buffer = Buffer.concat([this.buffer, chunk]);
    this.drain();
  }

  drain(): void {
    while (!this.socket.destroyed) {
      if (this.bodyRemaining > 0) {
        const n = Math.min(this.bodyRemaining, this.buffer.length);
        if (n === 0) return;
        this.bodySink?.(this.buffer.subarray(0, n));
        this.buffer = this.buffer.subarray(n);
        this.bodyRemaining -= n;
        if (this.bodyRemaining === 0) this.bodyEnd?.();
        continue;
      }
      if (this.isBusy || this.isTunnel) return;
      const end = this.buffer.indexOf('\r\n\r\n');
      if (end < 0) {
        if (this.buffer.length > MAX_HEAD_BYTES) this.reply(null, 431, 'Request Header Fields Too Large', [], true);
        return;
      }
      const head = parseHead(this.buffer.subarray(0, end).toString('latin1'));
      this.buffer = this.buffer.subarray(end + 4);
      if (head === null) return this.reply(null, 400, 'Bad Request', [], true);
      this.handle(head);
    }
  }

  /** Writes a short response with Content-Length; records it against `request`. */
  reply(request: NtlmProxyRequest | null, status: number, reason: string, headers: Array<[string, string]>, isClosing: boolean): void {
    if (request !== null) request.status = status;
    const body = `ntlm-proxy: ${status} ${reason}\n`;
    const lines = [`HTTP/1.1 ${status} ${reason}`, ...headers.map(([n, v]) => `${n}: ${v}`), 'Content-Type: text/plain',
      `Content-Length: ${Buffer.byteLength(body)}`, `Connection: ${isClosing ? 'close' : 'keep-alive'}`];
    // A response to HEAD has no body, though its Content-Length is that of the GET's (RFC 9110 §9.3.2).
    this.socket.write(`${lines.join('\r\n')}\r\n\r\n${request?.method === 'HEAD' ? '' : body}`);
    if (isClosing) {
      this.socket.end();
      this.buffer = Buffer.alloc(0);
      this.isBusy = true;
    }
  }

  /** Consumes `length` body bytes into `sink` (null: discard), then calls `onEnd`. */
  readBody(length: number, sink: ((chunk: Buffer) => void) | null, onEnd: (() => void) | null): void {
    this.bodyRemaining = length;
    this.bodySink = sink;
    this.bodyEnd = onEnd;
    if (length === 0) onEnd?.();
  }

  handle(head: Head): void {
    const values = (name: string): string[] => head.headers.filter(([n]) => n === name).map(([, v]) => v);
    const authorizations = values('proxy-authorization');
    const authorization = authorizations[0] ?? null;
    const request: NtlmProxyRequest = { method: head.method, target: head.target, authorization: authorization?.split(' ')[0] ?? null, status: 0 };
    this.record.requests.push(request);
    const lengths = values('content-length');
    if (values('transfer-encoding').length > 0) return this.reply(request, 501, 'Chunked Request Bodies Not Implemented', [], true);
    if (authorizations.length > 1 || lengths.length > 1 || (lengths[0] !== undefined && !/^\d{1,9}$/.test(lengths[0]))) {
      return this.reply(request, 400, 'Bad Request', [], true);
    }
    const bodyLength = Number(lengths[0] ?? '0');
    if (authorization === null && this.record.user !== null) return this.serve(head, request, bodyLength);
    const offers = this.proxy.offer.map((value): [string, string] => ['Proxy-Authenticate', value]);
    if (authorization === null) {
      this.reply(request, 407, 'Proxy Authentication Required', offers, false);
      return this.readBody(bodyLength, null, null);
    }
    const [scheme, token = ''] = authorization.split(/ +/);
    const message = Buffer.from(token, 'base64');
    const type = scheme?.toUpperCase() === 'NTLM' && message.length >= 12 && message.toString('latin1', 0, 8) === 'NTLMSSP\0' ? message.readUInt32LE(8) : 0;
    if (type === 1 && message.length >= 16) {
      // A new handshake de-authenticates the connection until its type 3 verifies (MS-NLMP 3.2.5).
      this.record.user = null;
      this.serverChallenge = randomBytes(8);
      const challenge = ntlmChallengeMessage(this.serverChallenge, message.readUInt32LE(12)).toString('base64');
      this.reply(request, 407, 'Proxy Authentication Required', [['Proxy-Authenticate', `NTLM ${challenge}`]], this.proxy.closeAfterChallenge);
      return this.readBody(bodyLength, null, null);
    }
    if (type === 3 && this.serverChallenge !== null) {
      const authenticate = parseNtlmAuthenticate(message);
      const password = authenticate === null ? undefined : lookupPassword(this.proxy.users, authenticate.domain, authenticate.user);
      const serverChallenge = this.serverChallenge;
      this.serverChallenge = null; // one type 3 per challenge: no second guess against the same nonce
      if (authenticate !== null && password !== undefined && verifyNtlmV2(authenticate, serverChallenge, password)) {
        this.record.user = authenticate.domain === '' ? authenticate.user : `${authenticate.domain}\\${authenticate.user}`;
        return this.serve(head, request, bodyLength);
      }
    }
    // A bad type 3, one on a connection that got no type 2, or any other scheme: refuse and close, as Squid does.
    this.reply(request, 407, 'Proxy Authentication Required', offers, true);
  }

  serve(head: Head, request: NtlmProxyRequest, bodyLength: number): void {
    if (head.method === 'CONNECT') return this.tunnel(head, request);
    let url: URL;
    try {
      url = new URL(head.target);
    } catch {
      return this.reply(request, 400, 'Bad Request', [], true);
    }
    const address = url.protocol === 'http:' ? mapHost(this.proxy.hosts, url.hostname) : null;
    if (address === null) {
      this.reply(request, 502, 'Bad Gateway', [], false);
      return this.readBody(bodyLength, null, null);
    }
    this.forward(head, request, url, address, bodyLength);
  }

  tunnel(head: Head, request: NtlmProxyRequest): void {
    const match = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(head.target);
    const address = match === null ? null : mapHost(this.proxy.hosts, match[1]!);
    if (match === null || address === null) return this.reply(request, 502, 'Bad Gateway', [], false);
    this.isBusy = true;
    const upstream = net.connect({ host: address, port: Number(match[2]) });
    this.proxy.sockets.add(upstream);
    upstream.once('close', () => this.proxy.sockets.delete(upstream));
    upstream.once('error', () => {
      if (!this.isTunnel) this.reply(request, 502, 'Bad Gateway', [], true);
      this.socket.destroy();
    });
    upstream.once('connect', () => {
      request.status = 200;
      this.isTunnel = true;
      this.socket.write('HTTP/1.1 200 Connection established\r\n\r\n');
      this.socket.removeAllListeners('data');
      if (this.buffer.length > 0) upstream.write(this.buffer);
      this.buffer = Buffer.alloc(0);
      this.socket.pipe(upstream);
      upstream.pipe(this.socket);
      this.socket.once('close', () => upstream.destroy());
      upstream.once('close', () => this.socket.destroy());
    });
  }

  forward(head: Head, request: NtlmProxyRequest, url: URL, address: string, bodyLength: number): void {
    this.isBusy = true;
    const headers = head.headers.filter(([n]) => !HOP_BY_HOP.has(n)).flat();
    const upstreamRequest = http.request({ host: address, port: Number(url.port || 80), method: head.method, path: `${url.pathname}${url.search}`, headers, agent: false });
    upstreamRequest.once('error', () => {
      if (request.status === 0) this.reply(request, 502, 'Bad Gateway', [], true);
      else this.socket.destroy();
    });
    upstreamRequest.once('response', (res) => {
      request.status = res.statusCode ?? 502;
      const length = res.headers['content-length'];
      const hasNoBody = head.method === 'HEAD' || request.status === 204 || request.status === 304;
      const isChunked = !hasNoBody && length === undefined;
      const lines = [`HTTP/1.1 ${request.status} ${res.statusMessage ?? ''}`];
      for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) {
        if (!HOP_BY_HOP.has(res.rawHeaders[i]!.toLowerCase())) lines.push(`${res.rawHeaders[i]!}: ${res.rawHeaders[i + 1]!}`);
      }
      if (isChunked) lines.push('Transfer-Encoding: chunked');
      lines.push('Connection: keep-alive');
      this.socket.write(`${lines.join('\r\n')}\r\n\r\n`);
      res.on('data', (chunk: Buffer) => {
        if (isChunked) this.socket.write(`${chunk.length.toString(16)}\r\n`);
        this.socket.write(chunk);
        if (isChunked) this.socket.write('\r\n');
      });
      res.once('end', () => {
        if (isChunked) this.socket.write('0\r\n\r\n');
        this.isBusy = false;
        this.drain();
      });
    });
    this.readBody(bodyLength, (chunk) => upstreamRequest.write(chunk), () => upstreamRequest.end());
  }
}

class Fixture {
  readonly sockets = new Set<net.Socket>();
  readonly records: NtlmProxyConnection[] = [];
  readonly offer: string[];
  readonly hosts: Record<string, string>;
  readonly users: Record<string, string>;
  readonly closeAfterChallenge: boolean;
  constructor(opts: NtlmProxyOptions) {
    this.offer = opts.offer ?? ['NTLM'];
    this.hosts = Object.fromEntries(Object.entries(opts.hosts ?? {}).map(([k, v]) => [k.toLowerCase(), v]));
    this.users = opts.users;
    this.closeAfterChallenge = opts.closeAfterChallenge ?? false;
  }

  accept(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    const connection = new Connection(socket, this.records.length + 1, this);
    this.records.push(connection.record);
    socket.on('data', (chunk: Buffer) => connection.onData(chunk));
  }
}

/** Starts the fixture on 127.0.0.1 at a free port. */
export async function startNtlmProxy(opts: NtlmProxyOptions): Promise<NtlmProxy> {
  const fixture = new Fixture(opts);
  const server = net.createServer((socket) => fixture.accept(socket));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  let closing: Promise<void> | undefined;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    connections: () => fixture.records.map((r) => ({ ...r, requests: r.requests.map((q) => ({ ...q })) })),
    close: () => {
      closing ??= new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 2000);
        server.close(() => {
          clearTimeout(timer);
          resolve();
        });
        for (const socket of fixture.sockets) socket.destroy();
      });
      return closing;
    },
  };
}
