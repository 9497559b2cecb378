// Owns fixture origin servers (HTTP, HTTPS, TCP echo) listening on 127.0.0.1 with an ephemeral port.
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import type { TestPki } from './pki.js';

export interface RecordedRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  rawHeaders: string[];
  body: string;
  remoteAddress: string;
}

export type OriginHandler = (
  req: http.IncomingMessage,
  res: http.ServerResponse,
  body: string,
) => void | Promise<void>;

export interface OriginOptions {
  /** Replaces the default `200 origin:<method>:<url>` responder; the request is recorded first. */
  handler?: OriginHandler;
}

export interface Origin {
  port: number;
  url: string;
  readonly connections: number;
  requests: RecordedRequest[];
  close(): Promise<void>;
}

export interface EchoServer {
  port: number;
  readonly connections: number;
  close(): Promise<void>;
}

const defaultHandler: OriginHandler = (req, res) => {
  const body = `origin:${req.method ?? ''}:${req.url ?? ''}`;
  res.writeHead(200, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(body) });
  res.end(body);
};

function listen(server: net.Server): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/** Tracks accepted sockets and returns an idempotent close() that destroys them all. */
function track(server: net.Server): { count: () => number; close: () => Promise<void> } {
  const sockets = new Set<net.Socket>();
  let accepted = 0;
  let closing: Promise<void> | undefined;
  server.on('connection', (socket: net.Socket) => {
    accepted += 1;
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  const close = (): Promise<void> => {
    closing ??= new Promise<void>((resolve) => {
      server.close(() => resolve());
      // http.Server and https.Server both have closeAllConnections; net.Server does not.
      (server as { closeAllConnections?: () => void }).closeAllConnections?.();
      for (const socket of sockets) socket.destroy();
    });
    return closing;
  };
  return { count: () => accepted, close };
}

async function startOrigin(server: http.Server, scheme: 'http' | 'https', opts: OriginOptions): Promise<Origin> {
  const requests: RecordedRequest[] = [];
  const handler = opts.handler ?? defaultHandler;
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      requests.push({
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        rawHeaders: req.rawHeaders,
        body,
        remoteAddress: req.socket.remoteAddress ?? '',
      });
      Promise.resolve(handler(req, res, body)).catch((err: unknown) => {
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
        res.end(`origin handler error: ${String(err)}`);
      });
    });
  });
  const tracker = track(server);
  const port = await listen(server);
  return {
    port,
    url: `${scheme}://127.0.0.1:${port}`,
    get connections() {
      return tracker.count();
    },
    requests,
    close: tracker.close,
  };
}

/** Plain HTTP origin on 127.0.0.1:0 that records every request. */
export function startHttpOrigin(opts: OriginOptions = {}): Promise<Origin> {
  return startOrigin(http.createServer(), 'http', opts);
}

/** HTTPS origin on 127.0.0.1:0 serving the leaf certificate from `pki`. */
export function startHttpsOrigin(pki: TestPki, opts: OriginOptions = {}): Promise<Origin> {
  return startOrigin(https.createServer({ key: pki.keyPem, cert: pki.certPem }), 'https', opts);
}

/** TCP echo server; ends its side after echoing once the client half-closes. */
export async function startTcpEchoServer(): Promise<EchoServer> {
  const server = net.createServer({ allowHalfOpen: true }, (socket) => {
    socket.on('error', () => socket.destroy());
    socket.pipe(socket); // pipe() ends the writable side after the readable side ends.
  });
  const tracker = track(server);
  const port = await listen(server);
  return {
    port,
    get connections() {
      return tracker.count();
    },
    close: tracker.close,
  };
}
