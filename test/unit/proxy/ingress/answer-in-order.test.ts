// RFC 9112 §9.3.2: a server MUST send the responses to pipelined requests in the order it received them.
// When a CONNECT or an Upgrade is pipelined behind requests whose responses are still being written,
// node:http hands the socket over at once; answerInOrder holds the answer until every response ahead of
// it is written (review 2026-12 finding 14: the GET's 200 was lost behind the CONNECT's 403). A client
// could try to have its CONNECT answered first, to get tunnel bytes parsed as requests, to stall the
// earlier response under backpressure, or to leave mid-response. A real node:http server on 127.0.0.1
// is wired the way server.ts wires it.
import http from 'node:http';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { answerInOrder, noteResponse, pendingResponse } from '../../../../src/proxy/ingress/answer-in-order.js';
import { waitFor, waitUntil, withTimeout } from '../../../support/wait.js';

const TIMEOUT_MS = 5_000;
const REFUSAL = 'HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n';

interface Handover {
  readonly event: 'connect' | 'upgrade';
  readonly socket: net.Socket;
  readonly head: Buffer;
  /** The response pendingResponse found ahead of it (null: none). */
  readonly pending: http.ServerResponse | null;
  answered: boolean;
  /** What the answer saw: was the socket destroyed, and its timeout. */
  destroyedAtAnswer: boolean | null;
  timeoutAtAnswer: number | undefined;
  /** writableFinished of every earlier response when the answer ran. */
  finishedAtAnswer: boolean[];
}

interface Fixture {
  readonly port: number;
  readonly server: http.Server;
  readonly responses: http.ServerResponse[];
  readonly handovers: Handover[];
  /** Called on the handover before answerInOrder (e.g. to fail the pending response). */
  beforeAnswer: ((pending: http.ServerResponse) => void) | null;
}

const servers: http.Server[] = [];
const sockets: net.Socket[] = [];

afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }
});

/** A node:http server that leaves every response to the test and answers a CONNECT or Upgrade 403, in order. */
async function pipelineServer(): Promise<Fixture> {
  const server = http.createServer();
  servers.push(server);
  const f: Fixture = { port: 0, server, responses: [], handovers: [], beforeAnswer: null };
  server.on('connection', (socket: net.Socket) => noteResponse(socket, null));
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    noteResponse(req.socket, res);
    f.responses.push(res);
  });
  const handOver = (event: Handover['event']) => (_req: http.IncomingMessage, socket: net.Socket, head: Buffer) => {
    sockets.push(socket);
    socket.on('error', () => undefined);
    const pending = pendingResponse(socket);
    const handover: Handover = { event, socket, head, pending, answered: false, destroyedAtAnswer: null, timeoutAtAnswer: undefined, finishedAtAnswer: [] };
    f.handovers.push(handover);
    const answer = (): void => {
      handover.answered = true;
      handover.destroyedAtAnswer = socket.destroyed;
      handover.timeoutAtAnswer = socket.timeout;
      handover.finishedAtAnswer = f.responses.map((r) => r.writableFinished);
      if (!socket.destroyed) socket.end(REFUSAL);
    };
    if (pending === null) return answer();
    f.beforeAnswer?.(pending);
    answerInOrder(socket, pending, answer);
  };
  server.on('connect', handOver('connect'));
  server.on('upgrade', handOver('upgrade'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return Object.assign(f, { port: (server.address() as net.AddressInfo).port });
}

interface Client {
  readonly socket: net.Socket;
  /** Everything received so far. */
  text(): string;
  /** Resolves with everything received once the server has closed the connection (FIN, reset or close). */
  closed(): Promise<string>;
}

function client(f: Fixture, options: { reading?: boolean } = {}): Client {
  const socket = net.connect({ port: f.port, host: '127.0.0.1' });
  sockets.push(socket);
  socket.on('error', () => undefined);
  const chunks: Buffer[] = [];
  const read = (): void => void socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  if (options.reading !== false) read();
  const gone = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  return {
    socket,
    text: () => Buffer.concat(chunks).toString('latin1'),
    closed: async () => {
      if (socket.listenerCount('data') === 0) read();
      await withTimeout(gone, TIMEOUT_MS, 'server closing the connection');
      return Buffer.concat(chunks).toString('latin1');
    },
  };
}

const GET = (path: string): string => `GET ${path} HTTP/1.1\r\nHost: a.test\r\n\r\n`;
const CONNECT = 'CONNECT b.test:443 HTTP/1.1\r\nHost: b.test:443\r\n\r\n';

const handedOver = (f: Fixture, count = 1): Promise<void> => waitUntil(() => f.handovers.length >= count, { timeoutMs: TIMEOUT_MS, label: 'the socket handed over' });

describe('pendingResponse', () => {
  it('is null at accept, and while nothing noted is unfinished', async () => {
    const f = await pipelineServer();
    const c = client(f);
    c.socket.write(CONNECT);
    await handedOver(f);
    expect(f.handovers[0]?.pending).toBeNull();
    expect(await c.closed()).toBe(REFUSAL);
  });

  it('is the latest response while it is being written, and null once it is written', async () => {
    const f = await pipelineServer();
    const c = client(f);
    c.socket.write(GET('/1'));
    await waitUntil(() => f.responses.length === 1, { timeoutMs: TIMEOUT_MS, label: 'request' });
    const res = f.responses[0] as http.ServerResponse;
    expect(pendingResponse(c.socket)).toBeNull(); // the client's socket was never noted
    expect(pendingResponse(res.socket as net.Socket)).toBe(res);
    const socket = res.socket as net.Socket;
    res.end('one');
    await waitFor(res, 'finish');
    expect(pendingResponse(socket)).toBeNull();
  });
});

describe('answerInOrder: a CONNECT pipelined behind a GET', () => {
  it('is answered only after the GET’s response is written, and after it on the wire', async () => {
    const f = await pipelineServer();
    const c = client(f);
    c.socket.write(GET('/1') + CONNECT);
    await handedOver(f);
    const handover = f.handovers[0] as Handover;
    expect(handover.pending).toBe(f.responses[0]);
    expect(handover.answered).toBe(false);
    // The GET's response is written in pieces; the CONNECT's answer may not come between them.
    const res = f.responses[0] as http.ServerResponse;
    res.writeHead(200, { 'Content-Length': '10' });
    res.write('hello');
    await waitUntil(() => c.text().endsWith('hello'), { timeoutMs: TIMEOUT_MS, label: 'first half of the body' });
    expect(handover.answered).toBe(false);
    res.end('world');
    const received = await c.closed();
    expect(received).toMatch(/^HTTP\/1\.1 200 OK\r\n[^]*\r\n\r\nhelloworldHTTP\/1\.1 403 Forbidden\r\n/);
    expect(received.endsWith(REFUSAL)).toBe(true);
    expect(handover.finishedAtAnswer).toEqual([true]);
    expect(handover.destroyedAtAnswer).toBe(false);
  });

  it('waits for every earlier response, even when a later one is finished first', async () => {
    const f = await pipelineServer();
    const c = client(f);
    c.socket.write(GET('/1') + GET('/2') + CONNECT);
    await handedOver(f);
    await waitUntil(() => f.responses.length === 2, { timeoutMs: TIMEOUT_MS, label: 'both requests' });
    const [first, second] = f.responses as [http.ServerResponse, http.ServerResponse];
    expect(f.handovers[0]?.pending).toBe(second);
    second.end('two');
    expect(f.handovers[0]?.answered).toBe(false);
    first.end('one');
    const received = await c.closed();
    const order = ['one', 'two', '403 Forbidden'].map((s) => received.indexOf(s));
    expect(order.every((at) => at >= 0)).toBe(true);
    expect([...order].sort((x, y) => x - y)).toEqual(order);
    expect(f.handovers[0]?.finishedAtAnswer).toEqual([true, true]);
  });

  it('reads nothing after the CONNECT head meanwhile: pipelined bytes are neither parsed as requests nor lost', async () => {
    const f = await pipelineServer();
    const c = client(f);
    const smuggled = '\x16\x03\x01GET http://evil.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n';
    c.socket.write(GET('/1') + CONNECT + smuggled);
    await handedOver(f);
    const handover = f.handovers[0] as Handover;
    expect(handover.head.toString('latin1')).toBe(smuggled);
    (f.responses[0] as http.ServerResponse).end('one');
    await c.closed();
    expect(f.responses).toHaveLength(1);
  });

  it('turns off the keep-alive timeout node:http re-armed for the finished response', async () => {
    const f = await pipelineServer();
    const c = client(f);
    c.socket.write(GET('/1') + CONNECT);
    await handedOver(f);
    const res = f.responses[0] as http.ServerResponse;
    const socket = res.socket as net.Socket;
    let timeoutAtFinish: number | undefined;
    // node:http's own 'finish' listener ran first and re-armed the keep-alive timeout.
    res.once('finish', () => (timeoutAtFinish = socket.timeout));
    res.end('one');
    await c.closed();
    expect(timeoutAtFinish).toBeGreaterThanOrEqual(f.server.keepAliveTimeout);
    expect(f.handovers[0]?.timeoutAtAnswer).toBe(0);
  });

  it('passes drain on to a response under backpressure, so it is not stalled forever behind the CONNECT', async () => {
    const f = await pipelineServer();
    const c = client(f, { reading: false });
    c.socket.write(GET('/big') + CONNECT);
    await handedOver(f);
    const res = f.responses[0] as http.ServerResponse;
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    const total = 256 * chunk.length; // 16 MiB: more than loopback socket buffers hold
    let written = 0;
    let blocked = 0;
    let writtenAtBlock: number | undefined;
    res.writeHead(200, { 'Content-Length': String(total) });
    const pump = (): void => {
      while (written < total) {
        written += chunk.length;
        if (!res.write(chunk)) {
          blocked += 1;
          writtenAtBlock ??= written;
          res.once('drain', pump);
          return;
        }
      }
      res.end();
    };
    pump();
    // The client reads nothing until the response is stuck on backpressure, after the handover.
    await waitUntil(() => blocked > 0, { timeoutMs: TIMEOUT_MS, label: 'response under backpressure' });
    expect(writtenAtBlock).toBeLessThan(total);
    expect(f.handovers[0]?.answered).toBe(false);
    const received = await withTimeout(c.closed(), TIMEOUT_MS * 2, 'the whole response and the answer');
    const bodyAt = received.indexOf('\r\n\r\n') + 4;
    expect(received.length - bodyAt - REFUSAL.length).toBe(total);
    expect(received.endsWith(REFUSAL)).toBe(true);
    expect(blocked).toBeGreaterThan(0);
  });
});

describe('answerInOrder: when a response ahead does not finish', () => {
  it('closes the connection when the response fails mid-body, and the answer finds the socket destroyed', async () => {
    const f = await pipelineServer();
    const c = client(f);
    c.socket.write(GET('/1') + CONNECT);
    await handedOver(f);
    const res = f.responses[0] as http.ServerResponse;
    res.writeHead(200, { 'Content-Length': '100' });
    res.write('partial');
    await waitUntil(() => c.text().endsWith('partial'), { timeoutMs: TIMEOUT_MS, label: 'partial body' });
    res.destroy();
    const received = await c.closed();
    expect(received).not.toContain('403');
    expect(f.handovers[0]?.answered).toBe(true);
    expect(f.handovers[0]?.destroyedAtAnswer).toBe(true);
  });

  it('closes at once and answers into a destroyed socket when the response ahead is already destroyed', async () => {
    const f = await pipelineServer();
    f.beforeAnswer = (pending) => pending.destroy();
    const c = client(f);
    c.socket.write(GET('/1') + CONNECT);
    await handedOver(f);
    // Synchronously, within the handover.
    expect(f.handovers[0]?.answered).toBe(true);
    expect(f.handovers[0]?.destroyedAtAnswer).toBe(true);
    expect(await c.closed()).not.toContain('403');
  });

  it('closes the connection when the response ahead ends it (Connection: close): nothing is written after it', async () => {
    const f = await pipelineServer();
    const c = client(f);
    c.socket.write(GET('/1') + CONNECT);
    await handedOver(f);
    const res = f.responses[0] as http.ServerResponse;
    res.setHeader('Connection', 'close');
    res.end('last');
    const received = await c.closed();
    expect(received).toMatch(/\r\n\r\nlast$/);
    expect(f.handovers[0]?.destroyedAtAnswer).toBe(true);
  });

  it('closes the connection when the client leaves before the response ahead is written', async () => {
    const f = await pipelineServer();
    const c = client(f);
    c.socket.write(GET('/1') + CONNECT);
    await handedOver(f);
    const socket = f.handovers[0]?.socket as net.Socket;
    c.socket.resetAndDestroy();
    await withTimeout(new Promise<void>((resolve) => socket.once('close', () => resolve())), TIMEOUT_MS, 'server side close');
    await waitUntil(() => f.handovers[0]?.answered === true, { timeoutMs: TIMEOUT_MS, label: 'answer' });
    expect(f.handovers[0]?.destroyedAtAnswer).toBe(true);
  });
});

describe('answerInOrder: an Upgrade pipelined behind a GET', () => {
  it('is answered after the GET’s response, in order', async () => {
    const f = await pipelineServer();
    const c = client(f);
    c.socket.write(GET('/1') + 'GET /ws HTTP/1.1\r\nHost: a.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n');
    await handedOver(f);
    expect(f.handovers[0]?.event).toBe('upgrade');
    expect(f.handovers[0]?.answered).toBe(false);
    (f.responses[0] as http.ServerResponse).end('one');
    const received = await c.closed();
    expect(received.indexOf('one')).toBeGreaterThan(0);
    expect(received.indexOf('one')).toBeLessThan(received.indexOf('403 Forbidden'));
  });
});
