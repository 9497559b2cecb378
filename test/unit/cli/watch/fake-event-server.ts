// A stand-in for Sluice's admin API as `sluice watch` sees it, on a Unix socket in a temp directory:
// GET /v1/events as Server-Sent Events (resumes after Last-Event-ID, can be cut), GET /v1/asks, and
// POST /v1/asks/{id} with scripted answers. It records every request so tests can check what was sent.
import { EventEmitter } from 'node:events';
import fs from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { withTimeout } from '../../../support/wait.js';

export interface PublishedEvent {
  readonly id: number | null;
  readonly event: string;
  readonly data: Readonly<Record<string, unknown>>;
}

export interface RecordedRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
  /** performance.now() when the request arrived. */
  readonly at: number;
}

export interface ScriptedReply {
  readonly status: number;
  readonly body: Readonly<Record<string, unknown>>;
}

export class FakeEventServer extends EventEmitter {
  readonly requests: RecordedRequest[] = [];
  readonly published: PublishedEvent[] = [];
  /** What GET /v1/asks lists. */
  pendingAsks: Record<string, unknown>[] = [];
  /** POST /v1/asks/{id} answers, by ask id; 200 when absent. */
  readonly askReplies = new Map<string, ScriptedReply>();
  /** When set, GET /v1/events answers this instead of a stream. */
  eventsReply: ScriptedReply | null = null;
  /** The bearer token every request must carry, or null for none. */
  token: string | null = null;
  /** As Sluice does: a Last-Event-ID above the newest id opens the stream with `id: 0` and a restart gap. */
  sendsRestartGap = true;
  private readonly streams = new Set<http.ServerResponse>();
  private nextId = 1;

  private constructor(
    private readonly server: http.Server,
    readonly dir: string,
    readonly socketPath: string,
  ) {
    super();
  }

  static async start(): Promise<FakeEventServer> {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'sluice-watch-'));
    const socketPath = path.join(dir, 'admin.sock');
    const server = http.createServer();
    const fake = new FakeEventServer(server, dir, socketPath);
    server.on('request', (req, res) => fake.onRequest(req, res));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(socketPath, resolve);
    });
    return fake;
  }

  get admin(): string {
    return `unix:${this.socketPath}`;
  }

  /** The GET /v1/events requests so far. */
  get streamRequests(): RecordedRequest[] {
    return this.requests.filter((r) => r.method === 'GET' && r.url.startsWith('/v1/events'));
  }

  get askAnswers(): RecordedRequest[] {
    return this.requests.filter((r) => r.method === 'POST' && r.url.startsWith('/v1/asks/'));
  }

  get openStreams(): number {
    return this.streams.size;
  }

  /** Appends an event (with the next id, unless `withoutId`) and sends it to every open stream. */
  publish(event: string, data: Record<string, unknown>, withoutId = false): PublishedEvent {
    const published: PublishedEvent = { id: withoutId ? null : this.nextId++, event, data };
    if (!withoutId) this.published.push(published);
    for (const res of this.streams) res.write(frame(published));
    return published;
  }

  /** Writes raw bytes to every open stream (a malformed or repeated event). */
  writeRaw(text: string): void {
    for (const res of this.streams) res.write(text);
  }

  /** A restarted Sluice: streams cut, the ring empty, ids from 1 again. */
  restart(): void {
    this.dropStreams();
    this.published.length = 0;
    this.nextId = 1;
  }

  /** Cuts every open stream, as a restart or a network fault would. */
  dropStreams(): void {
    for (const res of this.streams) res.socket?.destroy();
    this.streams.clear();
  }

  /** Resolves when the n-th GET /v1/events has its stream open (or its scripted reply sent). */
  waitForStream(n: number, timeoutMs = 5000): Promise<void> {
    if (this.streamRequests.length >= n) return Promise.resolve();
    return withTimeout(
      new Promise<void>((resolve) => {
        const check = (): void => {
          if (this.streamRequests.length < n) return;
          this.off('stream', check);
          resolve();
        };
        this.on('stream', check);
      }),
      timeoutMs,
      `stream request ${n}`,
    );
  }

  /** Resolves when the n-th POST /v1/asks/{id} has been answered. */
  waitForAnswer(n: number, timeoutMs = 5000): Promise<RecordedRequest> {
    return withTimeout(
      new Promise<RecordedRequest>((resolve) => {
        const check = (): void => {
          const answer = this.askAnswers[n - 1];
          if (answer === undefined) return;
          this.off('answer', check);
          resolve(answer);
        };
        this.on('answer', check);
        check();
      }),
      timeoutMs,
      `ask answer ${n}`,
    );
  }

  async close(): Promise<void> {
    this.dropStreams();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    await fs.rm(this.dir, { recursive: true, force: true });
  }

  /** Stops listening (the socket file goes) but keeps the directory: later connects fail with ENOENT. */
  async stopListening(): Promise<void> {
    this.dropStreams();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private onRequest(req: http.IncomingMessage, res: http.ServerResponse): void {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    const at = performance.now();
    req.on('end', () => {
      const recorded = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body, at };
      this.requests.push(recorded);
      this.route(recorded, res);
    });
  }

  private route(req: RecordedRequest, res: http.ServerResponse): void {
    if (this.token !== null && req.headers['authorization'] !== `Bearer ${this.token}`) {
      reply(res, { status: 401, body: { error: 'admin_token_invalid' } });
      if (req.url.startsWith('/v1/events')) this.emit('stream');
      return;
    }
    if (req.method === 'GET' && req.url.startsWith('/v1/events')) {
      if (this.eventsReply !== null) reply(res, this.eventsReply);
      else this.openStream(req, res);
      this.emit('stream');
    } else if (req.method === 'GET' && req.url === '/v1/asks') {
      reply(res, { status: 200, body: { asks: this.pendingAsks } });
    } else if (req.method === 'POST' && req.url.startsWith('/v1/asks/')) {
      const id = decodeURIComponent(req.url.slice('/v1/asks/'.length));
      reply(res, this.askReplies.get(id) ?? { status: 200, body: { ask: id, ...(JSON.parse(req.body) as object) } });
      this.emit('answer');
    } else {
      reply(res, { status: 404, body: { error: 'not_found' } });
    }
  }

  private openStream(req: RecordedRequest, res: http.ServerResponse): void {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store' });
    res.write(': keep-alive\n\n');
    const after = Number(req.headers['last-event-id'] ?? 0);
    if (this.sendsRestartGap && after > this.nextId - 1) res.write(frame({ id: 0, event: 'gap', data: { from: null, to: null, reason: 'restart' } }));
    for (const event of this.published) if ((event.id ?? 0) > after) res.write(frame(event));
    this.streams.add(res);
    res.on('close', () => this.streams.delete(res));
  }
}

function frame(event: PublishedEvent): string {
  return `${event.id === null ? '' : `id: ${event.id}\n`}event: ${event.event}\ndata: ${JSON.stringify(event.data)}\n\n`;
}

function reply(res: http.ServerResponse, scripted: ScriptedReply): void {
  const text = JSON.stringify(scripted.body);
  res.writeHead(scripted.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
