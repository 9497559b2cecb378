// The admin HTTP/1.1 server: authenticates, routes and answers JSON; reaches the proxy only through ProxyControl and never logs a token or a body.
import http from 'node:http';
import type net from 'node:net';
import type { OperationalLog } from '../audit/index.js';
import type { ProxyControl } from '../core/index.js';
import { isAdminTokenValid } from './auth.js';
import { errorReply, type AdminReply } from './errors.js';
import { MAX_BODY_BYTES, parseJsonBody, readBody, sendJson } from './http-io.js';
import { isUnixListen } from '../config/index.js';
import { removeSocketFile, type UnixSocketProbe } from '../listen/index.js';
import type { EventRing } from '../telemetry/index.js';
import { EVENTS_PATH, EventStream, parseEventsRequest } from './events-stream.js';
import { bindAdminServer } from './listen.js';
import { matchRoute, PARAM_MESSAGE, type AdminRoute } from './router.js';
import { inspectAdminSocketDir } from './socket-dir.js';
import { ADMIN_ROUTES } from './routes/index.js';

export interface AdminServerOptions {
  /** `unix:/abs/path` (the file mode, plus the bearer token when one is configured) or `host:port` (bearer token required). */
  readonly listen: string;
  readonly control: ProxyControl;
  /** SHA-256 of the admin bearer token; required for a TCP listener, and once set required on a Unix socket too. */
  readonly adminTokenSha256: Buffer | null;
  readonly log: OperationalLog;
  /** Probes a leftover socket file before it is removed; app.ts passes egress's `isUnixSocketAlive`. */
  readonly isUnixSocketAlive: UnixSocketProbe;
  /** The event stream GET /v1/events serves (absent: the route answers 404). */
  readonly events?: EventRing;
}

export interface AdminServer {
  readonly address: string;
  close(): Promise<void>;
}

const CLOSE_GRACE_MS = 2000;
const BAD_REQUEST_BODY = '{"error":"bad_request"}\n';
const BAD_REQUEST = `HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: ${BAD_REQUEST_BODY.length}\r\n\r\n${BAD_REQUEST_BODY}`;
const UNAUTHORIZED_HEADERS = { 'www-authenticate': 'Bearer realm="sluice-admin"' } as const;

/** The one route that streams instead of answering JSON: matched with the table (so a POST gets 405), served by events-stream.ts. */
const EVENTS_ROUTE = { method: 'GET', template: EVENTS_PATH, streams: true } as const;
type ServedRoute = AdminRoute | typeof EVENTS_ROUTE;

interface AdminContext {
  readonly control: ProxyControl;
  readonly tokenSha256: Buffer | null;
  readonly log: OperationalLog;
  readonly routes: readonly ServedRoute[];
  readonly events: EventRing | null;
  /** Open event streams: the server's close ends them rather than waiting out CLOSE_GRACE_MS. */
  readonly streams: Set<EventStream>;
  isClosing: boolean;
}

export async function startAdminServer(options: AdminServerOptions): Promise<AdminServer> {
  const isUnix = isUnixListen(options.listen);
  const tokenSha256 = adminToken(options.listen, isUnix, options.adminTokenSha256);
  const ctx: AdminContext = {
    control: options.control,
    tokenSha256,
    log: options.log,
    routes: [...ADMIN_ROUTES, EVENTS_ROUTE],
    events: options.events ?? null,
    streams: new Set(),
    isClosing: false,
  };
  const server = http.createServer({ headersTimeout: 10_000, requestTimeout: 30_000 });
  const secure = { value: false };
  const sockets = new Set<net.Socket>();
  server.on('connection', (socket: net.Socket) => {
    // A Unix socket is not yet chmod 0600 until `secure` flips: refuse anyone who raced in.
    if (!secure.value) return void socket.destroy();
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => void serveRequest(ctx, req, res));
  // Expect: 100-continue: invite the body only when it could be accepted; otherwise answer straight away.
  server.on('checkContinue', (req: http.IncomingMessage, res: http.ServerResponse) => {
    const isAuthorized = ctx.tokenSha256 === null || isAdminTokenValid(req.headers.authorization, ctx.tokenSha256);
    if (isAuthorized && Number(req.headers['content-length'] ?? 0) <= MAX_BODY_BYTES) res.writeContinue();
    void serveRequest(ctx, req, res);
  });
  server.on('clientError', (_error: Error, socket: net.Socket) => {
    if (socket.writable) socket.end(BAD_REQUEST);
    else socket.destroy();
  });
  const dir = await inspectAdminSocketDir(options.listen);
  if (dir.refusal !== null) throw new Error(`admin.listen: ${dir.refusal}`);
  if (dir.warning !== null) options.log.warn({ directory: dir.directory }, dir.warning);
  const bound = await bindAdminServer(server, options.listen, options.isUnixSocketAlive, secure).catch((error: unknown) => {
    if (server.listening) server.close();
    throw error;
  });
  return {
    address: bound.address,
    close: () =>
      new Promise<void>((resolve) => {
        // An event stream never finishes by itself: it ends now, and its reader reconnects elsewhere or later.
        ctx.isClosing = true;
        for (const stream of ctx.streams) stream.end();
        // Let an answer in flight finish (a revoke, say); cut whatever is left after CLOSE_GRACE_MS.
        const timer = setTimeout(() => sockets.forEach((socket) => socket.destroy()), CLOSE_GRACE_MS);
        server.close(() => {
          clearTimeout(timer);
          void removeSocketFile(bound.socketFile).then(resolve);
        });
        server.closeIdleConnections();
      }),
  };
}

/**
 * TCP always needs a token. A Unix socket needs one when one is configured: reaching the file must not be
 * enough for a process that shares Sluice's uid or was handed the socket (review 2026-12, findings 2, 12).
 */
function adminToken(listen: string, isUnix: boolean, digest: Buffer | null): Buffer | null {
  if (digest === null) {
    if (isUnix) return null;
    throw new Error(`admin.listen ${listen} is TCP: set admin.tokenSha256 or admin.tokenEnv (a TCP admin listener requires a bearer token), or use unix:/path`);
  }
  if (digest.length !== 32) throw new Error('the admin token digest must be 32 bytes (SHA-256)');
  return digest;
}

async function serveRequest(ctx: AdminContext, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const method = req.method ?? 'GET';
  let decided: Decided | Streamed;
  try {
    decided = await decide(ctx, req, method);
  } catch (error) {
    ctx.log.error({ method, route: null, err: describeError(error) }, 'admin request failed');
    decided = { template: null, reply: errorReply('internal_error'), closeConnection: true };
  }
  if (res.headersSent || res.destroyed) return void res.destroy();
  if ('streams' in decided) return serveEvents(ctx, req, res, method, decided.template);
  const { template, reply, closeConnection } = decided;
  sendJson(res, reply, closeConnection);
  logRequest(ctx, method, template, reply.status);
}

function logRequest(ctx: AdminContext, method: string, template: string | null, status: number): void {
  const entry = { method, route: template, status };
  if (status >= 500) ctx.log.error(entry, 'admin request');
  else if (status === 401) ctx.log.warn(entry, 'admin request');
  else ctx.log.info(entry, 'admin request');
}

/** GET /v1/events, authenticated like every route: a 400 for a bad filter or Last-Event-ID, else the stream. */
function serveEvents(ctx: AdminContext, req: http.IncomingMessage, res: http.ServerResponse, method: string, template: string): void {
  const ring = ctx.events;
  if (ring === null) return answer(ctx, res, method, template, errorReply('not_found'));
  const parsed = parseEventsRequest(new URL(req.url ?? '/', 'http://admin').searchParams, req.headers['last-event-id']);
  if (!parsed.ok) return answer(ctx, res, method, template, errorReply(parsed.error, parsed.issues));
  const stream = new EventStream(ring, res, parsed.value);
  ctx.streams.add(stream);
  stream.onClose(() => ctx.streams.delete(stream));
  logRequest(ctx, method, template, 200);
  if (ctx.isClosing) stream.end();
}

function answer(ctx: AdminContext, res: http.ServerResponse, method: string, template: string | null, reply: AdminReply): void {
  sendJson(res, reply);
  logRequest(ctx, method, template, reply.status);
}

interface Decided {
  readonly template: string | null;
  readonly reply: AdminReply;
  readonly closeConnection: boolean;
}

/** The request is for the event stream, authorized; serveEvents answers it. */
interface Streamed {
  readonly template: string;
  readonly streams: true;
}

async function decide(ctx: AdminContext, req: http.IncomingMessage, method: string): Promise<Decided | Streamed> {
  if (ctx.tokenSha256 !== null && !isAdminTokenValid(req.headers.authorization, ctx.tokenSha256)) {
    return { template: null, reply: errorReply('admin_token_invalid', undefined, UNAUTHORIZED_HEADERS), closeConnection: true };
  }
  const pathname = new URL(req.url ?? '/', 'http://admin').pathname;
  const match = matchRoute(ctx.routes, method, pathname);
  const template = match.kind === 'not_found' ? null : match.template;
  const body = await readBody(req);
  if (!body.ok && body.reason === 'too_large') return { template, reply: errorReply('body_too_large'), closeConnection: true };
  if (!body.ok) return { template, reply: errorReply('body_invalid_json', [{ path: '(body)', message: 'the body was cut off' }]), closeConnection: true };
  if (match.kind === 'not_found') return { template, reply: errorReply('not_found'), closeConnection: false };
  if (match.kind === 'method_not_allowed') {
    return { template, reply: errorReply('method_not_allowed', undefined, { allow: match.allow.join(', ') }), closeConnection: false };
  }
  if (match.kind === 'param_invalid') {
    return { template, reply: errorReply(match.error, [{ path: match.param, message: PARAM_MESSAGE }]), closeConnection: false };
  }
  if ('streams' in match.route) return { template: match.template, streams: true };
  let parsed: unknown;
  if (match.route.hasBody) {
    const json = parseJsonBody(body.bytes);
    if (!json.ok) return { template, reply: errorReply('body_invalid_json', [{ path: '(body)', message: json.message }]), closeConnection: false };
    parsed = json.value;
  }
  try {
    const reply = await match.route.action(ctx.control, { params: match.params, body: parsed, events: ctx.events ?? undefined });
    return { template, reply, closeConnection: false };
  } catch (error) {
    ctx.log.error({ method, route: template, err: describeError(error) }, 'admin handler failed');
    return { template, reply: errorReply('internal_error'), closeConnection: false };
  }
}

/** An error's name, code and message for the log; never the request that caused it. */
function describeError(error: unknown): object {
  if (!(error instanceof Error)) return { message: String(error) };
  return { name: error.name, message: error.message, code: (error as NodeJS.ErrnoException).code, stack: error.stack };
}
