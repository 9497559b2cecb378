// Owns running the real curl binary with a scrubbed environment and parsing its `-i` output.
import { expect } from 'vitest';
import { spawn } from 'node:child_process';

export interface CurlResult {
  /** Exit code, or null when curl was killed (e.g. by the hard timeout). */
  code: number | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

export interface CurlOptions {
  timeoutMs?: number;
  env?: NodeJS.ProcessEnv;
  /** Written to curl's standard input (for `--data-binary @-`). */
  stdin?: string | Buffer;
}

/** A copy of process.env with every *_proxy / *_PROXY variable removed. */
export function proxyFreeEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!/_proxy$/i.test(key)) env[key] = value;
  }
  return env;
}

/** Runs `curl -q --silent --show-error --noproxy '' ...args`; SIGKILLs it after timeoutMs (default 10 s). */
export function runCurl(args: string[], opts: CurlOptions = {}): Promise<CurlResult> {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  // -q must come first: it stops curl reading ~/.curlrc.
  const child = spawn('curl', ['-q', '--silent', '--show-error', '--noproxy', '', ...args], {
    env: opts.env ?? proxyFreeEnv(),
    stdio: [opts.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
  });
  if (opts.stdin !== undefined && child.stdin !== null) {
    child.stdin.on('error', () => undefined);
    child.stdin.end(opts.stdin);
  }
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.stdout?.on('data', (chunk: Buffer) => out.push(chunk));
  child.stderr?.on('data', (chunk: Buffer) => err.push(chunk));
  return new Promise<CurlResult>((resolve, reject) => {
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      let stderr = Buffer.concat(err).toString('utf8');
      if (timedOut) stderr += `\n[runCurl] killed after ${timeoutMs} ms`;
      resolve({ code, stdout: Buffer.concat(out).toString('utf8'), stderr, timedOut });
    });
  });
}

export interface CurlHeaderBlock {
  statusLine: string;
  status: number;
  /** Lowercased header names; the last occurrence wins. */
  headers: Record<string, string>;
  /** Raw header lines (excluding the status line), in order. */
  all: string[];
}

export interface CurlResponse extends CurlHeaderBlock {
  body: string;
  /** Every header block in order (e.g. proxy CONNECT 200, 100 Continue, redirects); the last is the main one. */
  blocks: CurlHeaderBlock[];
}

const STATUS_LINE = /^HTTP\/\d(?:\.\d)? (\d{3})/;

function parseBlock(text: string): CurlHeaderBlock {
  const lines = text.split(/\r?\n/);
  const statusLine = lines[0] ?? '';
  const all = lines.slice(1).filter((line) => line.length > 0);
  const headers: Record<string, string> = {};
  for (const line of all) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { statusLine, status: Number(STATUS_LINE.exec(statusLine)?.[1] ?? 0), headers, all };
}

/** True when curl may print another header block after this one (CONNECT reply, 1xx, redirect, 407). */
function mayBeFollowed(block: CurlHeaderBlock): boolean {
  const { status, headers } = block;
  if (status < 200 || (status >= 300 && status < 400) || status === 407) return true;
  return headers['content-length'] === undefined && headers['transfer-encoding'] === undefined;
}

/** Splits `curl -i` stdout into header blocks and body; the last block is the main response. */
export function curlHeadersAndBody(stdout: string): CurlResponse {
  const blocks: CurlHeaderBlock[] = [];
  let rest = stdout;
  while (STATUS_LINE.test(rest)) {
    const previous = blocks.at(-1);
    if (previous !== undefined && !mayBeFollowed(previous)) break;
    const end = /\r?\n\r?\n/.exec(rest);
    if (end === null) {
      blocks.push(parseBlock(rest));
      rest = '';
      break;
    }
    blocks.push(parseBlock(rest.slice(0, end.index)));
    rest = rest.slice(end.index + end[0].length);
  }
  const main = blocks.at(-1) ?? { statusLine: '', status: 0, headers: {}, all: [] };
  return { ...main, body: rest, blocks };
}

/**
 * Asserts that Sluice ends both a CONNECT tunnel (to `tunnelUrl`, verified with `caFile`) and a forwarded
 * request (to `plainUrl`) through `proxy` with 502 and `reason` in Proxy-Status, and never passes an
 * upstream's 407 challenge to the client.
 */
export async function expectBothRefused(proxy: string, tunnelUrl: string, caFile: string, plainUrl: string, reason: string): Promise<void> {
  const tunnel = curlHeadersAndBody((await runCurl(['-i', '--proxy', proxy, '--cacert', caFile, tunnelUrl])).stdout);
  expect(tunnel.blocks[0]?.status).toBe(502);
  expect(tunnel.blocks[0]?.headers['proxy-status']).toContain(`details="${reason}"`);
  const plain = curlHeadersAndBody((await runCurl(['-i', '--proxy', proxy, plainUrl])).stdout);
  expect(plain.status).toBe(502);
  expect(plain.headers['proxy-status']).toContain(`details="${reason}"`);
  expect(plain.headers['proxy-authenticate']).toBeUndefined();
}
