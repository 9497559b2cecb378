// Reads capped request bodies and writes JSON answers for the admin server; never logs a body.
import type http from 'node:http';
import type { AdminReply } from './errors.js';

export const MAX_BODY_BYTES = 64 * 1024;

export type BodyResult = { readonly ok: true; readonly bytes: Buffer } | { readonly ok: false; readonly reason: 'too_large' | 'aborted' };

/** Collects at most `limitBytes`; answers too_large as soon as Content-Length or the stream says so. */
export function readBody(req: http.IncomingMessage, limitBytes = MAX_BODY_BYTES): Promise<BodyResult> {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (Number.isFinite(declared) && declared > limitBytes) return Promise.resolve({ ok: false, reason: 'too_large' });
  return new Promise<BodyResult>((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (result: BodyResult): void => {
      req.removeListener('data', onData);
      req.removeListener('end', onEnd);
      req.removeListener('error', onError);
      req.removeListener('aborted', onError);
      resolve(result);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limitBytes) {
        req.pause();
        finish({ ok: false, reason: 'too_large' });
      } else {
        chunks.push(chunk);
      }
    };
    const onEnd = (): void => finish({ ok: true, bytes: Buffer.concat(chunks) });
    const onError = (): void => finish({ ok: false, reason: 'aborted' });
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('error', onError);
    req.once('aborted', onError);
  });
}

export type JsonResult = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly message: string };

export function parseJsonBody(bytes: Buffer): JsonResult {
  const text = bytes.toString('utf8');
  if (text.trim() === '') return { ok: false, message: 'the body is empty; send a JSON object' };
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch {
    // V8's message quotes the input; a body may hold a secret, so it is never echoed back.
    return { ok: false, message: 'the body is not valid JSON' };
  }
}

/** Every admin answer: JSON, never cached (an issue answer carries the only copy of a token). */
export function sendJson(res: http.ServerResponse, reply: AdminReply, closeConnection = false): void {
  const payload = Buffer.from(`${JSON.stringify(reply.body)}\n`, 'utf8');
  res.statusCode = reply.status;
  res.setHeader('content-type', 'application/json; charset=utf-8');
  res.setHeader('content-length', payload.length);
  res.setHeader('cache-control', 'no-store');
  for (const [name, value] of Object.entries(reply.headers ?? {})) res.setHeader(name, value);
  if (closeConnection) res.setHeader('connection', 'close');
  res.end(payload);
}
