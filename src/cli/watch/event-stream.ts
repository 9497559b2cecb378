// One connection to the admin API's GET /v1/events: opens it (Unix socket or TCP), hands each body chunk
// to the caller, and settles with how it ended. Never retries (watch.ts does) and never logs the token.
import http from 'node:http';

export interface StreamRequest {
  /** `unix:/path/admin.sock` or `http://host:port`. */
  readonly admin: string;
  readonly adminToken?: string | undefined;
  /** `/v1/events?…` */
  readonly path: string;
  /** Sent as `Last-Event-ID` when not empty, so the stream resumes after it. */
  readonly lastEventId: string;
  readonly signal: AbortSignal;
}

/** How one connection ended: after the stream opened (200 `text/event-stream`), or before. */
export type StreamEnd =
  | { readonly isOpened: true; readonly detail: string }
  | { readonly isOpened: false; readonly isFatal: boolean; readonly detail: string; readonly status?: number };

/** How long the admin API has to answer with the stream's head; the stream itself has no deadline. */
const HEAD_TIMEOUT_MS = 15_000;
const MAX_ERROR_BODY_BYTES = 64 * 1024;

/** `unix:/path` or `http://host:port`, else null. */
export function parseAdminAddress(admin: string): { readonly target: http.RequestOptions; readonly where: string } | null {
  if (admin.startsWith('unix:') && admin.length > 5) return { target: { socketPath: admin.slice(5), host: 'sluice' }, where: `the admin socket at ${admin.slice(5)}` };
  if (!/^http:\/\/[^/]+\/?$/.test(admin)) return null;
  const url = new URL(admin);
  return { target: { host: url.hostname.replace(/^\[|\]$/g, ''), port: url.port || 80 }, where: `the admin API at ${url.origin}` };
}

/**
 * Opens the stream and feeds `onChunk` until it ends. `onChunk` may throw (a malformed stream): the
 * connection is then closed and the error is the detail. Resolves, never rejects.
 */
export function followEventStream(req: StreamRequest, onOpen: () => void, onChunk: (chunk: Buffer) => void): Promise<StreamEnd> {
  const address = parseAdminAddress(req.admin);
  if (address === null) return Promise.resolve({ isOpened: false, isFatal: true, detail: `admin address ${req.admin}: expected unix:/path or http://host:port` });
  const headers: Record<string, string> = { accept: 'text/event-stream', 'cache-control': 'no-cache' };
  if (req.lastEventId !== '') headers['last-event-id'] = req.lastEventId;
  if (req.adminToken !== undefined && req.adminToken !== '') headers['authorization'] = `Bearer ${req.adminToken}`;
  return new Promise<StreamEnd>((resolve) => {
    let end: StreamEnd | null = null;
    let isOpened = false;
    const settle = (value: StreamEnd): void => {
      if (end !== null) return;
      end = value;
      req.signal.removeEventListener('abort', onAbort);
      resolve(value);
    };
    const request = http.request({ ...address.target, method: 'GET', path: req.path, headers, agent: false });
    const onAbort = (): void => void request.destroy();
    req.signal.addEventListener('abort', onAbort, { once: true });
    const headTimer = setTimeout(() => request.destroy(new Error(`${address.where} did not answer within ${HEAD_TIMEOUT_MS / 1000} s`)), HEAD_TIMEOUT_MS);
    request.once('response', (res) => {
      clearTimeout(headTimer);
      const type = res.headers['content-type'] ?? '';
      if (res.statusCode !== 200 || !/^text\/event-stream\b/i.test(type)) {
        // A 200 that is not an event stream is not Sluice's /v1/events: retrying will not change it.
        const isFatal = res.statusCode === 200 || isFatalStatus(res.statusCode ?? 0);
        readError(res, (detail) => settle({ isOpened: false, isFatal, detail: `${address.where} answered ${detail}`, status: res.statusCode ?? 0 }));
        return;
      }
      isOpened = true;
      onOpen();
      res.on('data', (chunk: Buffer) => {
        try {
          onChunk(chunk);
        } catch (error) {
          res.destroy(error as Error);
        }
      });
      res.once('end', () => settle({ isOpened: true, detail: 'the stream ended' }));
      res.once('error', (error) => settle({ isOpened: true, detail: `the stream was cut (${error.message})` }));
      res.once('close', () => settle({ isOpened: true, detail: 'the stream was cut' }));
    });
    request.once('error', (error: NodeJS.ErrnoException) => {
      clearTimeout(headTimer);
      if (isOpened) settle({ isOpened, detail: `the stream was cut (${error.message})` });
      else settle({ isOpened, isFatal: false, detail: describeRequestError(error, address.where) });
    });
    request.once('close', () => {
      clearTimeout(headTimer);
      settle(isOpened ? { isOpened, detail: 'the stream was cut' } : { isOpened, isFatal: false, detail: `${address.where} closed the connection` });
    });
    request.end();
  });
}

/** A 4xx is the request itself (token, filter, an older Sluice without the route): retrying will not help. */
function isFatalStatus(status: number): boolean {
  return status >= 400 && status < 500 && status !== 408 && status !== 429;
}

function describeRequestError(error: NodeJS.ErrnoException, where: string): string {
  if (error.code === 'EACCES') return `cannot reach ${where}: permission denied (run as the user that runs sluice)`;
  if (error.code === undefined) return error.message;
  return `cannot reach ${where}: is sluice running? (${error.code})`;
}

/** `STATUS error_code` from an error answer's JSON body, read up to a bound. */
function readError(res: http.IncomingMessage, done: (detail: string) => void): void {
  const chunks: Buffer[] = [];
  let size = 0;
  const finish = (): void => {
    const body = Buffer.concat(chunks).toString('utf8');
    let code = '';
    try {
      const parsed = JSON.parse(body) as { error?: unknown };
      if (typeof parsed.error === 'string') code = parsed.error;
    } catch {
      code = body.trim().slice(0, 200);
    }
    const type = res.headers['content-type'] ?? 'no content-type';
    done(res.statusCode === 200 ? `200 with ${type}, not an event stream` : `${res.statusCode ?? 0} ${code === '' ? 'error' : code}`);
  };
  res.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size <= MAX_ERROR_BODY_BYTES) chunks.push(chunk);
    else res.destroy();
  });
  res.once('end', finish);
  res.once('close', finish);
}
