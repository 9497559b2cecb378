// One admin API request over an instance's Unix socket, as an operator's client makes it: the answer's
// status and JSON body, bounded in time. Used by the fleet tests that drive `sluice start` children.
import http from 'node:http';
import { withTimeout } from './wait.js';

export interface AdminAnswer {
  readonly status: number;
  readonly body: Record<string, unknown>;
}

export function adminRequest(socketPath: string, method: string, route: string, body?: unknown, timeoutMs = 5000): Promise<AdminAnswer> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return withTimeout(
    new Promise<AdminAnswer>((resolve, reject) => {
      const req = http.request(
        {
          socketPath,
          method,
          path: route,
          agent: false,
          headers: payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          res.on('end', () => {
            try {
              resolve({ status: res.statusCode ?? 0, body: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>) });
            } catch (error) {
              reject(new Error(`${method} ${route}: not JSON (${res.statusCode}): ${text.slice(0, 200)}`, { cause: error }));
            }
          });
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(payload);
    }),
    timeoutMs,
    `${socketPath} ${method} ${route}`,
  );
}
