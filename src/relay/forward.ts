// Forwards one absolute-form HTTP/1.1 request to its pinned address with undici: bodies stream both
// ways, origin connections are kept alive per pinned address, hop-by-hop fields and Proxy-Authorization
// are dropped, and Host is the canonical destination (RFC 9112 §3.2.2: URI and Host must agree).
import type http from 'node:http';
import { Transform, type TransformCallback } from 'node:stream';
import { Agent, Client, errors as undiciErrors, type Dispatcher } from 'undici';
import type { CloseReason, ReasonCode } from '../core/index.js';
import { endSocket } from './end-socket.js';
import { stripHopByHop, stripHopByHopObject } from './hop-by-hop.js';
import { takeWhenAvailable, type ByteBudget } from './tunnel.js';

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

/**
 * One connection to an upstream proxy whose authentication binds the connection (Negotiate, NTLM): the
 * handshake's legs and the request share it, and only its principal's later hops reuse it
 * (bound-upstreams.ts).
 */
export function createUpstreamClient(origin: string, options: ForwardAgentOptions): Dispatcher {
  return new Client(origin, {
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
  /**
   * A 407 from the upstream proxy settles as `challenged` (its body is read through, the connection kept
   * for the next leg) instead of ending the hop: the caller is authenticating (proxy/tunnel/forward-auth.ts).
   */
  readonly takesChallenge?: boolean;
  /** Replaces the method (an OPTIONS probe that carries an authentication leg but not the body). */
  readonly method?: string;
  /** Leave the client's body unread (a probe); the real request sends it. */
  readonly withoutBody?: boolean;
}

export type ForwardResult =
  | { readonly phase: 'challenged'; readonly challenges: readonly string[] }
  | { readonly phase: 'probed'; readonly status: number }
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

/**
 * The grant's byte budget as a forwarded request uses it: the same counter its tunnels take from (one per
 * grant, shared by every request and tunnel of the grant), plus whether anything is left before a
 * response head is relayed.
 */
export interface ForwardBudget extends ByteBudget {
  /** False once the budget is spent: nothing more may be relayed. */
  hasLeft(): boolean;
}

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

/**
 * Passes the request body through unchanged, counting bytes; reading stays paced by the consumer. With a
 * budget, each chunk is taken from it before it is passed on, as a tunnel does (relay/tunnel.ts): the
 * chunk that passes the budget is counted, not sent, and the hop ends (ResponseRelay.bodyPassedBudget).
 */
class ByteCounter extends Transform {
  bytes = 0;
  relay: ResponseRelay | null = null;
  private isOverBudget = false;

  constructor(private readonly budget: ForwardBudget | null) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    // Past the budget nothing more is counted or sent; the relay is already ending the hop.
    if (this.isOverBudget) return callback();
    this.bytes += chunk.length;
    const budget = this.budget;
    if (budget === null || budget.take(chunk.length)) return callback(null, chunk);
    if (budget.whenAvailable === undefined) return this.passedBudget(callback);
    // A fleet budget's reservation is on its way: the body waits for it (backpressure, no cut).
    void takeWhenAvailable(budget, chunk.length).then((taken) => (taken ? callback(null, chunk) : this.passedBudget(callback)));
  }

  private passedBudget(callback: TransformCallback): void {
    this.isOverBudget = true;
    callback();
    this.relay?.bodyPassedBudget();
  }
}

/** Removes the fields `drop` picks from a raw [name, value, …] list, in place. */
function dropFields(headers: string[], drop: (name: string, value: string) => boolean): string[] {
  for (let i = 0; i < headers.length; i += 2) {
    if (drop((headers[i] ?? '').toLowerCase(), headers[i + 1] ?? '')) {
      headers.splice(i, 2);
      i -= 2;
    }
  }
  return headers;
}

const isExpectContinue = (name: string, value: string): boolean => name === 'expect' && value.trim().toLowerCase() === '100-continue';
const isBodyFraming = (name: string): boolean => name === 'content-length' || name === 'transfer-encoding';

/** Whether the client sends a request body (so a denial must close, and a retry is unsafe). */
export function hasBody(req: http.IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/**
 * Relays one response to the client as undici delivers it (its dispatch API): no response stream and no
 * pipe per request, and backpressure by pausing the origin read while the client's socket is full.
 * Settles once: failed before a response head (nothing was written), or responded.
 */
class ResponseRelay implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | null = null;
  private status = 0;
  private headersAt = 0;
  private bytesDown = 0;
  private settled = false;
  private settle: (result: ForwardResult) => void = () => undefined;
  readonly done: Promise<ForwardResult>;

  constructor(
    private readonly res: http.ServerResponse,
    private readonly target: ForwardTarget,
    private readonly body: ByteCounter | null,
    private readonly budget: ForwardBudget | null,
  ) {
    this.done = new Promise((resolve) => {
      this.settle = resolve;
    });
    res.on('drain', () => this.controller?.resume());
    res.once('finish', () => this.responded(null));
    res.once('close', () => {
      if (this.settled) return;
      // Settled first: the abort reports back through onResponseError at once.
      if (this.status === 0) this.failed('client_gone', 'the client closed before the response head');
      else this.responded('response_error');
      this.controller?.abort(new Error('the client closed the connection'));
    });
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.settled) controller.abort(new Error('the hop already ended'));
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: Record<string, string | string[] | undefined>): void {
    // 1xx interim responses are not relayed (Node already answered the client's 100-continue).
    if (this.settled || statusCode < 200) return;
    if (this.budget !== null && !this.budget.hasLeft()) {
      // Spent by another request or tunnel of the grant since this one was authorized: the client gets
      // the 429 it would have got a moment later, and no byte of this response.
      this.failed('byte_limit_reached', 'the byte budget was spent before the response head');
      controller.abort(new Error('byte budget spent'));
      return;
    }
    if (this.target.viaUpstream && statusCode === 407 && this.target.takesChallenge === true) {
      // Not aborted: undici reads the 407's body through and keeps the connection for the next leg.
      const offered = headers['proxy-authenticate'];
      this.settle407(offered === undefined ? [] : Array.isArray(offered) ? offered : [offered]);
      return;
    }
    if (this.target.withoutBody === true) {
      // A probe's answer is for Sluice, never the client.
      this.settled = true;
      this.settle({ phase: 'probed', status: statusCode });
      return;
    }
    if (this.target.viaUpstream && statusCode === 407) {
      // The upstream's challenge is for Sluice, not the client: never relay it (the client would answer
      // it with its own secrets) and never retry around the proxy.
      this.failed('upstream_auth_required', 'the upstream proxy answered 407');
      controller.abort(new Error('upstream proxy answered 407'));
      return;
    }
    const responseHeaders = stripHopByHopObject(headers);
    responseHeaders.push('via', VIA);
    try {
      this.res.writeHead(statusCode, responseHeaders);
    } catch (error) {
      // A field value Node refuses to send (invalid characters): nothing reached the client yet.
      this.failed('origin_failed', `unsendable response head: ${(error as Error).message}`);
      controller.abort(error as Error);
      return;
    }
    this.status = statusCode;
    this.headersAt = performance.now();
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.status === 0 || this.settled) return;
    this.bytesDown += chunk.length;
    // Counted as it streams, chunk by chunk, against the budget every request and tunnel of the grant
    // shares (review 2026-12 finding 6): the chunk that passes it is not relayed (as in relay/tunnel.ts).
    const budget = this.budget;
    if (budget !== null && !budget.take(chunk.length)) {
      if (budget.whenAvailable === undefined) return this.endAtBudget(controller);
      // A fleet budget's reservation is on its way: hold the origin until it lands.
      controller.pause();
      void takeWhenAvailable(budget, chunk.length).then((taken) => {
        if (this.settled) return;
        if (!taken) return this.endAtBudget(controller);
        if (this.res.write(chunk)) controller.resume();
      });
      return;
    }
    if (!this.res.write(chunk)) controller.pause();
  }

  onResponseEnd(): void {
    if (this.status !== 0 && !this.settled) this.res.end();
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    if (this.settled) return;
    if (this.status === 0) return this.failed(failureReason(error, this.target.viaUpstream), error.message);
    this.res.destroy();
    this.responded('response_error');
  }

  /** The request body passed the budget: refused (429) before a response head, cut off after one. */
  bodyPassedBudget(): void {
    if (this.settled) return;
    if (this.status !== 0) return this.endAtBudget(this.controller);
    this.failed('byte_limit_reached', 'the request body passed the byte budget');
    this.controller?.abort(new Error('byte budget spent'));
  }

  /**
   * Ends a response mid-body at the budget, as a tunnel is ended: the client connection is reset
   * (end-socket.ts), so the client sees it fail before the announced length or last chunk, and the origin
   * request is aborted. The head goes out first (node:http holds it until the first body write), so a
   * client that has read it can tell a cut-off response from a refused one.
   */
  private endAtBudget(controller: Dispatcher.DispatchController | null): void {
    this.responded('byte_limit');
    this.res.flushHeaders();
    const socket = this.res.socket;
    if (socket === null) this.res.destroy();
    else endSocket(socket, 'byte_limit');
    controller?.abort(new Error('byte budget spent'));
  }

  private settle407(challenges: readonly string[]): void {
    if (this.settled) return;
    this.settled = true;
    this.settle({ phase: 'challenged', challenges });
  }

  private failed(reason: ReasonCode, detail: string): void {
    if (this.settled) return;
    this.settled = true;
    this.settle({ phase: 'failed', reason, detail, bytesUp: this.body?.bytes ?? 0 });
  }

  private responded(closedBy: CloseReason | null): void {
    if (this.settled || this.status === 0) return;
    this.settled = true;
    this.settle({ phase: 'responded', status: this.status, bytesUp: this.body?.bytes ?? 0, bytesDown: this.bytesDown, closedBy, headersAt: this.headersAt });
  }
}

/**
 * Forwards one request and relays its response. With a budget (a grant with maxBytes), every body chunk
 * in either direction is taken from it as it streams; without one nothing is counted here, and the
 * caller charges the totals afterwards.
 */
export function forwardRequest(agent: Dispatcher, req: http.IncomingMessage, res: http.ServerResponse, target: ForwardTarget, budget: ForwardBudget | null): Promise<ForwardResult> {
  // Node's server already answered `Expect: 100-continue` to the client (RFC 9110 §10.1.1), and the
  // client library cannot forward it; the body follows without waiting.
  const headers = dropFields(stripHopByHop(req.rawHeaders), isExpectContinue);
  headers.push('host', target.hostHeader, 'via', VIA);
  if (target.proxyAuthorization !== null) headers.push('proxy-authorization', target.proxyAuthorization);
  let body: ByteCounter | null = null;
  if (target.withoutBody === true) dropFields(headers, isBodyFraming);
  else if (hasBody(req)) {
    body = new ByteCounter(budget);
    // pipe + error forwarding rather than stream.pipeline: pipeline allocates an AbortController and
    // DOMException per call, which showed up at ~12% of forwarding CPU in the profile.
    const counter = body;
    req.on('error', (error) => counter.destroy(error));
    req.pipe(counter);
  }
  const relay = new ResponseRelay(res, target, body, budget);
  if (body !== null) body.relay = relay;
  const method = (target.method ?? req.method) as Dispatcher.HttpMethod;
  // A connection that carried a body is never reused (reset: Connection: close, then closed): the origin
  // may have answered without reading it, and the unread bytes would start the next request on that
  // connection (review 2026-12-04 finding 6). Bodiless requests keep their connections alive.
  agent.dispatch({ origin: target.origin, path: target.pathAndQuery, method, headers, body, reset: body !== null }, relay);
  return relay.done;
}
