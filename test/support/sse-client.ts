// A Server-Sent Events reader for tests of GET /v1/events: one node:http request (Unix socket or loopback
// TCP), the WHATWG event-stream parsing of id/event/data fields and comment lines, the raw text kept for
// byte-level checks (a token must never appear), and bounded waits on what has arrived. Never reconnects
// by itself: a test resumes by opening a new stream with Last-Event-ID.
import { EventEmitter } from 'node:events';
import http from 'node:http';

export interface SseEvent {
  /** The `id:` field, or null when the event had none. */
  readonly id: string | null;
  readonly event: string;
  readonly data: string;
}

export type SseTarget = { readonly socketPath: string } | { readonly host: string; readonly port: number };

/** An answer that is not a stream (a 400, 401, 404, 405): its status, headers and body. */
export interface SseRefusal {
  readonly kind: 'refused';
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly text: string;
}

export class SseStream {
  readonly kind = 'stream';
  readonly events: SseEvent[] = [];
  readonly comments: string[] = [];
  raw = '';
  isEnded = false;
  private pending = '';
  private readonly signals = new EventEmitter();

  constructor(
    readonly status: number,
    readonly headers: http.IncomingHttpHeaders,
    private readonly res: http.IncomingMessage,
  ) {
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => this.take(chunk));
    res.once('close', () => {
      this.isEnded = true;
      this.signals.emit('change');
    });
    res.on('error', () => undefined);
  }

  /** The parsed data of every event named `event`. */
  data<T = Record<string, unknown>>(event: string): T[] {
    return this.events.filter((e) => e.event === event).map((e) => JSON.parse(e.data) as T);
  }

  /** Resolves once `predicate` holds over what has arrived; rejects after `timeoutMs` or if the stream ends first. */
  until(predicate: (stream: SseStream) => boolean, timeoutMs: number, label: string): Promise<void> {
    if (predicate(this)) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const finish = (error?: Error): void => {
        clearTimeout(timer);
        this.signals.off('change', check);
        if (error === undefined) resolve();
        else reject(error);
      };
      const check = (): void => {
        if (predicate(this)) finish();
        else if (this.isEnded) finish(new Error(`sse: the stream ended before ${label}; got ${this.events.length} events, last ${JSON.stringify(this.events.at(-1))}`));
      };
      const timer = setTimeout(() => finish(new Error(`sse: ${label} not within ${timeoutMs} ms; got ${this.events.length} events, last ${JSON.stringify(this.events.at(-1))}`)), timeoutMs);
      this.signals.on('change', check);
    });
  }

  /** Stops reading: the socket fills and the server sees a reader that does not keep up. */
  pause(): void {
    this.res.pause();
  }

  resume(): void {
    this.res.resume();
  }

  /** Goes away as a client would (the server sees the connection close); resolves once it is closed. */
  close(timeoutMs = 5000): Promise<void> {
    this.res.destroy();
    return this.until((s) => s.isEnded, timeoutMs, 'the close');
  }

  private take(chunk: string): void {
    this.raw += chunk;
    this.pending += chunk;
    // Only whole events (up to a blank line) are parsed; the rest waits for the next chunk.
    for (let at = this.pending.indexOf('\n\n'); at !== -1; at = this.pending.indexOf('\n\n')) {
      const lines = this.pending.slice(0, at).split('\n');
      this.pending = this.pending.slice(at + 2);
      let id: string | null = null;
      let event = 'message';
      const data: string[] = [];
      let hasField = false;
      for (const line of lines) {
        if (line.startsWith(':')) {
          this.comments.push(line.slice(1).trim());
          continue;
        }
        const colon = line.indexOf(':');
        const name = colon === -1 ? line : line.slice(0, colon);
        const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
        hasField = true;
        if (name === 'id') id = value;
        else if (name === 'event') event = value;
        else if (name === 'data') data.push(value);
      }
      if (hasField) this.events.push({ id, event, data: data.join('\n') });
    }
    this.signals.emit('change');
  }
}

/** Opens `path` as an event stream; resolves with the stream on 200, or with the refusal otherwise. */
export function openSse(target: SseTarget, path: string, headers: Record<string, string> = {}, timeoutMs = 5000): Promise<SseStream | SseRefusal> {
  return new Promise((resolve, reject) => {
    const req = http.request({ ...target, method: 'GET', path, headers: { accept: 'text/event-stream', ...headers }, agent: false }, (res) => {
      clearTimeout(timer);
      if (res.statusCode === 200) return resolve(new SseStream(200, res.headers, res));
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.once('end', () => resolve({ kind: 'refused', status: res.statusCode ?? 0, headers: res.headers, text }));
    });
    const timer = setTimeout(() => {
      req.destroy();
      reject(new Error(`sse: no answer to GET ${path} within ${timeoutMs} ms`));
    }, timeoutMs);
    req.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    req.end();
  });
}

/** Opens a stream that must be one (status 200). */
export async function openStream(target: SseTarget, path: string, headers: Record<string, string> = {}): Promise<SseStream> {
  const answer = await openSse(target, path, headers);
  if (answer.kind !== 'stream') throw new Error(`sse: GET ${path} answered ${answer.status}: ${answer.text}`);
  return answer;
}
