// Owns raw TCP clients for byte-exact HTTP requests and CONNECT tunnels to the proxy under test.
import net from 'node:net';

export interface RawResponse {
  data: Buffer;
  text: string;
  /** True when the server closed (or reset) the connection. */
  closed: boolean;
  /** Socket error seen after connecting (e.g. ECONNRESET), if any. */
  error?: string;
}

export interface ParsedHead {
  /** Byte length of the head including the terminating CRLFCRLF. */
  headLength: number;
  status: number;
  head: string;
  /** Lowercased header names; the last occurrence wins. */
  headers: Record<string, string>;
}

const HEAD_END = Buffer.from('\r\n\r\n');

/** Parses an HTTP response head at the start of `buf`, or returns null if it is not complete yet. */
export function parseResponseHead(buf: Buffer): ParsedHead | null {
  const end = buf.indexOf(HEAD_END);
  if (end === -1) return null;
  const head = buf.subarray(0, end).toString('latin1');
  const [statusLine = '', ...lines] = head.split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const status = Number(/^HTTP\/\d\.\d (\d{3})/.exec(statusLine)?.[1] ?? 0);
  return { headLength: end + HEAD_END.length, status, head, headers };
}

/** True once `buf` holds a complete final response (1xx heads skipped; Content-Length or chunked body). */
function responseComplete(buf: Buffer): boolean {
  let rest = buf;
  for (;;) {
    const parsed = parseResponseHead(rest);
    if (parsed === null) return false;
    const body = rest.subarray(parsed.headLength);
    if (parsed.status >= 100 && parsed.status < 200) {
      rest = body;
      continue;
    }
    if (parsed.status === 204 || parsed.status === 304) return true;
    if (/\bchunked\b/i.test(parsed.headers['transfer-encoding'] ?? '')) {
      return body.includes('\r\n0\r\n\r\n') || body.subarray(0, 5).equals(Buffer.from('0\r\n\r\n'));
    }
    const length = parsed.headers['content-length'];
    return length !== undefined && body.length >= Number(length);
  }
}

export interface RawRequestOptions {
  host?: string;
  timeoutMs?: number;
  /** Keep reading until the server closes, even after a complete response. */
  untilClose?: boolean;
}

/** Writes `data` to host:port and collects the reply; rejects if the bound (default 5 s) passes first. */
export function rawRequest(port: number, data: string | Buffer, opts: RawRequestOptions = {}): Promise<RawResponse> {
  const { host = '127.0.0.1', timeoutMs = 5000, untilClose = false } = opts;
  return new Promise<RawResponse>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let connected = false;
    let error: string | undefined;
    const socket = net.connect({ port, host });
    const collected = (): Buffer => Buffer.concat(chunks);
    const finish = (closed: boolean): void => {
      clearTimeout(timer);
      socket.removeAllListeners('data');
      socket.destroy();
      const buf = collected();
      resolve({ data: buf, text: buf.toString('utf8'), closed, ...(error !== undefined ? { error } : {}) });
    };
    const timer = setTimeout(() => {
      socket.destroy();
      const got = collected().toString('latin1');
      reject(new Error(`rawRequest: no ${untilClose ? 'close' : 'complete response'} within ${timeoutMs} ms; got ${JSON.stringify(got.slice(0, 500))}`));
    }, timeoutMs);
    socket.on('connect', () => {
      connected = true;
      socket.write(data);
    });
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      if (!untilClose && responseComplete(collected())) finish(false);
    });
    socket.on('error', (err) => {
      if (!connected) {
        clearTimeout(timer);
        reject(err);
      } else {
        error = err.message;
      }
    });
    socket.on('close', () => {
      if (connected) finish(true);
    });
  });
}

export interface ConnectTunnel {
  socket: net.Socket;
  status: number;
  head: string;
  /** Bytes after the response head: early tunnel bytes on 200, the error body otherwise. */
  rest: Buffer;
}

/**
 * Sends `CONNECT target` to 127.0.0.1:proxyPort and parses the reply head. On 200 the socket stays open,
 * not flowing, and unread (attach 'data' or pipe it); otherwise the body is read per Content-Length
 * (or until close). Errors after resolution are swallowed; watch 'close' to detect teardown.
 */
export function openConnectTunnel(
  proxyPort: number,
  target: string,
  headers: Record<string, string> = {},
  opts: { host?: string; timeoutMs?: number } = {},
): Promise<ConnectTunnel> {
  const { host = '127.0.0.1', timeoutMs = 5000 } = opts;
  const extra = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join('');
  return new Promise<ConnectTunnel>((resolve, reject) => {
    let buf = Buffer.alloc(0);
    let parsed: ParsedHead | null = null;
    const socket = net.connect({ port: proxyPort, host });
    const fail = (message: string): void => {
      cleanup();
      socket.destroy();
      reject(new Error(`openConnectTunnel(${target}): ${message}; got ${JSON.stringify(buf.toString('latin1').slice(0, 500))}`));
    };
    const timer = setTimeout(() => fail(`no complete response within ${timeoutMs} ms`), timeoutMs);
    const done = (head: ParsedHead): void => {
      cleanup();
      // Keep a late ECONNRESET from crashing the worker; callers observe 'close' or add their own listener.
      socket.on('error', () => undefined);
      resolve({ socket, status: head.status, head: head.head, rest: buf.subarray(head.headLength) });
    };
    const onReadable = (): void => {
      for (let chunk = socket.read() as Buffer | null; chunk !== null; chunk = socket.read() as Buffer | null) {
        buf = Buffer.concat([buf, chunk]);
      }
      parsed ??= parseResponseHead(buf);
      if (parsed === null) return;
      if (parsed.status === 200) return done(parsed);
      const length = Number(parsed.headers['content-length'] ?? NaN);
      if (buf.length - parsed.headLength >= length) done(parsed);
    };
    const onError = (err: Error): void => fail(err.message);
    const onClose = (): void => {
      if (parsed !== null) done(parsed);
      else fail('connection closed before the response head');
    };
    function cleanup(): void {
      clearTimeout(timer);
      // Removing the last 'readable' listener leaves the stream unflowing, so a later 'data' listener starts it.
      socket.off('readable', onReadable);
      socket.off('error', onError);
      socket.off('close', onClose);
    }
    socket.on('readable', onReadable);
    socket.on('error', onError);
    socket.on('close', onClose);
    socket.on('connect', () => {
      socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n${extra}\r\n`);
    });
  });
}

/** Writes `text` into an open tunnel and resolves with the first bytes that come back, bounded. */
export function roundTrip(socket: net.Socket, text: string, timeoutMs = 3000): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      socket.removeListener('data', onData);
      reject(new Error(`round trip "${text}" got no reply within ${timeoutMs} ms`));
    }, timeoutMs);
    function onData(chunk: Buffer): void {
      clearTimeout(timer);
      resolve(chunk.toString());
    }
    socket.once('data', onData);
    socket.write(text);
  });
}
