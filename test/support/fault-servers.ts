// Owns fixture servers that fail on purpose, for the fault tests: a TCP origin that resets mid-stream, a
// tiny CONNECT proxy that can be killed mid-tunnel, a UDP DNS responder (A/AAAA, SERVFAIL, NXDOMAIN, or
// silence per name) and a PAC server whose answer (script, status, hang) can be switched. All listen on
// 127.0.0.1 with an ephemeral port and destroy every socket on close().
import dgram from 'node:dgram';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';

function listenTcp(server: net.Server): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/** Tracks live sockets so a fixture can reset or destroy them all. */
class SocketSet {
  readonly live = new Set<net.Socket>();
  accepted = 0;
  add(socket: net.Socket): void {
    this.accepted += 1;
    this.live.add(socket);
    socket.once('close', () => this.live.delete(socket));
  }
  /** Sends RST on every live socket (SO_LINGER 0), then forgets it. */
  resetAll(): void {
    for (const socket of this.live) socket.resetAndDestroy();
  }
  destroyAll(): void {
    for (const socket of this.live) socket.destroy();
  }
}

function closeServer(server: net.Server, sockets: SocketSet): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) {
      sockets.destroyAll();
      resolve();
      return;
    }
    server.close(() => resolve());
    sockets.destroyAll();
  });
}

export interface ResettingOrigin {
  readonly port: number;
  /** Connections accepted so far. */
  readonly accepted: number;
  /** Live origin-side sockets. */
  readonly live: number;
  close(): Promise<void>;
}

/**
 * A TCP origin that answers the first bytes of each connection with `reply`, then resets the connection
 * (RST, not FIN) after `resetAfterMs`: an origin that dies mid-stream.
 */
export async function startResettingTcpOrigin(opts: { reply?: string; resetAfterMs?: number } = {}): Promise<ResettingOrigin> {
  const sockets = new SocketSet();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.once('data', () => {
      socket.write(opts.reply ?? 'partial-reply');
      setTimeout(() => {
        if (!socket.destroyed) socket.resetAndDestroy();
      }, opts.resetAfterMs ?? 30);
    });
  });
  const port = await listenTcp(server);
  return {
    port,
    get accepted() {
      return sockets.accepted;
    },
    get live() {
      return sockets.live.size;
    },
    close: () => closeServer(server, sockets),
  };
}

export interface FixtureConnectProxy {
  readonly port: number;
  readonly url: string;
  /** CONNECT targets received, as sent. */
  readonly targets: string[];
  /** Live tunnels (client side). */
  readonly live: number;
  /** Dies: every live socket is reset and the listener closes, so later connections are refused. */
  kill(): Promise<void>;
  close(): Promise<void>;
}

/**
 * A minimal HTTP CONNECT proxy: `CONNECT host:port` is answered 200 and relayed to 127.0.0.1:port
 * (whatever the host: names resolve to loopback only). Other methods get 405.
 */
export async function startFixtureConnectProxy(): Promise<FixtureConnectProxy> {
  const sockets = new SocketSet();
  const targets: string[] = [];
  const server = net.createServer({ allowHalfOpen: true }, (client) => {
    sockets.add(client);
    client.on('error', () => client.destroy());
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) {
        if (head.length > 16_384) client.destroy();
        return;
      }
      client.off('data', onData);
      client.pause();
      const [method = '', target = ''] = head.subarray(0, end).toString('latin1').split(' ');
      const rest = head.subarray(end + 4);
      const port = Number(target.slice(target.lastIndexOf(':') + 1));
      if (method !== 'CONNECT' || !Number.isInteger(port) || port < 1 || port > 65535) {
        client.end('HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n');
        return;
      }
      targets.push(target);
      const upstream = net.connect({ host: '127.0.0.1', port, allowHalfOpen: true });
      sockets.add(upstream);
      upstream.on('error', () => client.destroy());
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
      upstream.once('connect', () => {
        client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        if (rest.length > 0) upstream.write(rest);
        client.pipe(upstream);
        upstream.pipe(client);
        client.resume();
      });
    };
    client.on('data', onData);
  });
  const port = await listenTcp(server);
  let dead = false;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    targets,
    get live() {
      return sockets.live.size;
    },
    kill: async () => {
      if (dead) return;
      dead = true;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      sockets.resetAll();
      await closed;
    },
    close: () => closeServer(server, sockets),
  };
}

export type DnsAnswer =
  | { readonly kind: 'address'; readonly addresses: readonly string[]; readonly ttlSeconds: number }
  | { readonly kind: 'servfail' }
  | { readonly kind: 'nxdomain' }
  | { readonly kind: 'drop' };

export interface DnsFixture {
  readonly port: number;
  /** `host:port` for `dns.servers`. */
  readonly server: string;
  /** Queries received, as `name TYPE`. */
  readonly queries: string[];
  close(): Promise<void>;
}

const QTYPE = { A: 1, AAAA: 28 } as const;

function readName(msg: Buffer, start: number): { name: string; next: number } | null {
  const labels: string[] = [];
  let at = start;
  for (let guard = 0; guard < 128; guard += 1) {
    const len = msg[at];
    if (len === undefined) return null;
    if (len === 0) return { name: labels.join('.').toLowerCase(), next: at + 1 };
    if (len > 63 || at + 1 + len > msg.length) return null; // no compression in questions we accept
    labels.push(msg.subarray(at + 1, at + 1 + len).toString('latin1'));
    at += 1 + len;
  }
  return null;
}

function ipv6Bytes(address: string): Buffer {
  const [head = '', tail = ''] = address.split('::');
  const groups = (s: string): string[] => (s === '' ? [] : s.split(':'));
  const left = groups(head);
  const right = groups(tail);
  const all = address.includes('::') ? [...left, ...Array(8 - left.length - right.length).fill('0'), ...right] : left;
  const out = Buffer.alloc(16);
  all.forEach((g, i) => out.writeUInt16BE(Number.parseInt(g, 16), i * 2));
  return out;
}

/** Builds the reply to one query (RFC 1035 §4.1): the question echoed, answers of the asked type. */
function reply(query: Buffer, qEnd: number, qtype: number, answer: Exclude<DnsAnswer, { kind: 'drop' }>): Buffer {
  const id = query.readUInt16BE(0);
  const queryFlags = query.readUInt16BE(2);
  const rcode = answer.kind === 'servfail' ? 2 : answer.kind === 'nxdomain' ? 3 : 0;
  const records: Buffer[] = [];
  if (answer.kind === 'address') {
    for (const address of answer.addresses) {
      const isV6 = net.isIPv6(address);
      if ((qtype === QTYPE.A && isV6) || (qtype === QTYPE.AAAA && !isV6) || (qtype !== QTYPE.A && qtype !== QTYPE.AAAA)) continue;
      const rdata = isV6 ? ipv6Bytes(address) : Buffer.from(address.split('.').map(Number));
      const rr = Buffer.alloc(12);
      rr.writeUInt16BE(0xc00c, 0); // pointer to the question's name
      rr.writeUInt16BE(qtype, 2);
      rr.writeUInt16BE(1, 4); // IN
      rr.writeUInt32BE(answer.ttlSeconds, 6);
      rr.writeUInt16BE(rdata.length, 10);
      records.push(rr, rdata);
    }
  }
  const header = Buffer.alloc(12);
  header.writeUInt16BE(id, 0);
  // QR, opcode and RD from the query, AA, RA, rcode.
  header.writeUInt16BE(0x8000 | (queryFlags & 0x7900) | 0x0400 | 0x0080 | rcode, 2);
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(records.length / 2, 6);
  return Buffer.concat([header, query.subarray(12, qEnd), ...records]);
}

/** A UDP DNS responder on 127.0.0.1 answering each name from `answers`; unknown names get NXDOMAIN. */
export async function startDnsFixture(answers: Readonly<Record<string, DnsAnswer>>): Promise<DnsFixture> {
  const socket = dgram.createSocket('udp4');
  const queries: string[] = [];
  socket.on('message', (msg, rinfo) => {
    if (msg.length < 12 || msg.readUInt16BE(4) !== 1) return;
    const q = readName(msg, 12);
    if (q === null || q.next + 4 > msg.length) return;
    const qtype = msg.readUInt16BE(q.next);
    queries.push(`${q.name} ${qtype === QTYPE.A ? 'A' : qtype === QTYPE.AAAA ? 'AAAA' : String(qtype)}`);
    const answer = answers[q.name] ?? { kind: 'nxdomain' };
    if (answer.kind === 'drop') return;
    socket.send(reply(msg, q.next + 4, qtype, answer), rinfo.port, rinfo.address);
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.bind(0, '127.0.0.1', () => {
      socket.off('error', reject);
      resolve();
    });
  });
  const port = socket.address().port;
  let closing: Promise<void> | undefined;
  return {
    port,
    server: `127.0.0.1:${port}`,
    queries,
    close: () => (closing ??= new Promise<void>((resolve) => socket.close(() => resolve()))),
  };
}

export type PacBehaviour = { readonly kind: 'script'; readonly body: string } | { readonly kind: 'status'; readonly status: number } | { readonly kind: 'hang' };

export interface PacServer {
  readonly url: string;
  readonly fetches: number;
  /** Switches what later fetches get. */
  set(behaviour: PacBehaviour): void;
  close(): Promise<void>;
}

/** Serves a PAC script at /proxy.pac, or fails with a status, or accepts and never answers. */
export async function startPacServer(initial: PacBehaviour): Promise<PacServer> {
  let behaviour = initial;
  let fetches = 0;
  const sockets = new SocketSet();
  const server = http.createServer((req, res) => {
    fetches += 1;
    req.resume();
    if (behaviour.kind === 'hang') return; // never answers; the socket is destroyed on close()
    if (behaviour.kind === 'status') {
      res.writeHead(behaviour.status, { 'content-type': 'text/plain', connection: 'close' });
      res.end('no PAC here');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/x-ns-proxy-autoconfig', connection: 'close' });
    res.end(behaviour.body);
  });
  server.on('connection', (socket: net.Socket) => sockets.add(socket));
  const port = await listenTcp(server);
  return {
    url: `http://127.0.0.1:${port}/proxy.pac`,
    get fetches() {
      return fetches;
    },
    set: (next) => {
      behaviour = next;
    },
    close: () => closeServer(server, sockets),
  };
}
