// Forwards one absolute-form HTTP/1.1 request to its pinned address with undici: bodies stream both
// ways, origin connections are kept alive per pinned address, hop-by-hop fields and Proxy-Authorization
// are dropped, and Host is the canonical destination (RFC 9112 §3.2.2: URI and Host must agree).
import type http from 'node:http';
import { Transform, type TransformCallback } from 'node:stream';
import { Agent, errors as undiciErrors, type Dispatcher } from 'undici';
import type { CloseReason, ReasonCode } from '../core/index.js';
import { stripHopByHop, stripHopByHopObject } from './hop-by-hop.js';

export interface ForwardAgentOptions {
  readonly connect: (opts: { hostname: string; port: string | number }, cb: (err: Error | null, socket: import('node:net').Socket | null) => void) => void;
  readonly headersTimeoutMs: number;
  readonly bodyTimeoutMs: number;
}

/** The HTTP client the forward relay uses; other modules hold it by this name, never by undici's. */
export type ForwardAgent = Dispatcher;

export function createForwardAgent(options: ForwardAgentOptions): Dispatcher {
  return new Agent({
    connect: options.connect as never,
    headersTimeout: options.headersTimeoutMs,
    bodyTimeout: options.bodyTimeoutMs,
    keepAliveTimeout: 4_000,
    pipelining: 1,
  });
}

export interface ForwardTarget {
  /** `http://<pinned ip>:<port>` (the client only ever dials the pinned address), or the upstream proxy. */
  readonly origin: string;
  readonly hostHeader: string;
  /** Origin-form path, or the absolute-form URI when the request goes to an upstream proxy. */
  readonly pathAndQuery: string;
  /** This upstream proxy's own credentials; present only when `origin` is that proxy. */
  readonly proxyAuthorization: string | null;
  readonly viaUpstream: boolean;
}

export type ForwardResult =
  | { readonly phase: 'failed'; readonly reason: ReasonCode; readonly detail: string; readonly bytesUp: number }
  | {
      readonly phase: 'responded';
      readonly status: number;
      readonly bytesUp: number;
      readonly bytesDown: number;
      readonly closedBy: CloseReason | null;
      /** performance.now() when the response head arrived. */
      readonly headersAt: number;
    };

const VIA = '1.1 sluice';

function failureReason(error: unknown, viaUpstream: boolean): ReasonCode {
  if (viaUpstream) {
    const code = (error as NodeJS.ErrnoException | undefined)?.code ?? '';
    if (code === 'ECONNREFUSED' || code === 'EHOSTUNREACH' || code === 'ENETUNREACH' || code === 'ENOTFOUND') return 'upstream_unreachable';
    if (code === 'ETIMEDOUT' || error instanceof undiciErrors.ConnectTimeoutError) return 'upstream_timeout';
    if (code.startsWith('ERR_SSL') || code.startsWith('ERR_TLS') || code.includes('CERT')) return 'upstream_tls_failed';
  }
  if (error instanceof undiciErrors.HeadersTimeoutError || error instanceof undiciErrors.BodyTimeoutError) return 'origin_timeout';
  if (error instanceof undiciErrors.ConnectTimeoutError) return 'dial_timeout';
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'ETIMEDOUT') return 'dial_timeout';
  if (code === 'ECONNREFUSED') return 'dial_refused';
  if (code === 'EHOSTUNREACH' || code === 'ENETUNREACH' || code === 'EADDRNOTAVAIL') return 'dial_unreachable';
  return 'origin_failed';
}

/** Passes the request body through unchanged, counting bytes; reading stays paced by the consumer. */
class ByteCounter extends Transform {
  bytes = 0;
  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.bytes += chunk.length;
    callback(null, chunk);
  }
}

function dropExpectContinue(headers: string[]): string[] {
  for (let i = 0; i < headers.length; i += 2) {
    if ((headers[i] ?? '').toLowerCase() === 'expect' && (headers[i + 1] ?? '').trim().toLowerCase() === '100-continue') {
      headers.splice(i, 2);
      i -= 2;
    }
  }
  return headers;
}

/** Whether the client sends a request body (so a denial must close, and a retry is unsafe). */
export function hasBody(req: http.IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

export async function forwardRequest(agent: Dispatcher, req: http.IncomingMessage, res: http.ServerResponse, target: ForwardTarget): Promise<ForwardResult> {
  // Node's server already answered `Expect: 100-continue` to the client (RFC 9110 §10.1.1), and the
  // client library cannot forward it; the body follows without waiting.
  const headers = dropExpectContinue(stripHopByHop(req.rawHeaders));
  headers.push('host', target.hostHeader, 'via', VIA);
  if (target.proxyAuthorization !== null) headers.push('proxy-authorization', target.proxyAuthorization);
  let body: ByteCounter | null = null;
  if (hasBody(req)) {
    body = new ByteCounter();
    // pipe + error forwarding rather than stream.pipeline: pipeline allocates an AbortController and
    // DOMException per call, which showed up at ~12% of forwarding CPU in the profile.
    const counter = body;
    req.on('error', (error) => counter.destroy(error));
    req.pipe(counter);
  }
  let response: Dispatcher.ResponseData;
  try {
    response = await agent.request({
      origin: target.origin,
      path: target.pathAndQuery,
      method: req.method as Dispatcher.HttpMethod,
      headers,
      body,
    });
  } catch (error) {
    return { phase: 'failed', reason: failureReason(error, target.viaUpstream), detail: (error as Error).message, bytesUp: body?.bytes ?? 0 };
  }
  if (target.viaUpstream && response.statusCode === 407) {
    // The upstream's challenge is for Sluice, not the client: never relay it (the client would answer
    // it with its own secrets) and never retry around the proxy.
    response.body.on('error', () => undefined);
    response.body.destroy();
    return { phase: 'failed', reason: 'upstream_auth_required', detail: 'the upstream proxy answered 407', bytesUp: body?.bytes ?? 0 };
  }
  const headersAt = performance.now();
  const responseHeaders = stripHopByHopObject(response.headers);
  responseHeaders.push('via', VIA);
  res.writeHead(response.statusCode, responseHeaders);
  let bytesDown = 0;
  response.body.on('data', (chunk: Buffer) => {
    bytesDown += chunk.length;
  });
  return new Promise((resolve) => {
    let settled = false;
    const finish = (failed: boolean): void => {
      if (settled) return;
      settled = true;
      if (failed) {
        res.destroy();
        response.body.destroy();
      }
      resolve({ phase: 'responded', status: response.statusCode, bytesUp: body?.bytes ?? 0, bytesDown, closedBy: failed ? 'response_error' : null, headersAt });
    };
    response.body.once('error', () => finish(true));
    res.once('finish', () => finish(false));
    res.once('close', () => finish(!res.writableFinished));
    response.body.pipe(res);
  });
}
