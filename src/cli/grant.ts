// The `sluice grant` command: a client of the admin API that prints its answers; never stores or logs a token, and reads no environment (main.ts passes it in).
import http from 'node:http';
import path from 'node:path';
import type { ControlIssue, GrantView } from '../core/index.js';

export interface GrantCommandArgs {
  readonly action: 'issue' | 'revoke' | 'list' | 'show' | 'rotate';
  /** `unix:/path/admin.sock` or `http://host:port`. */
  readonly admin: string;
  readonly adminToken?: string | undefined;
  readonly id?: string | undefined;
  readonly generation?: string | undefined;
  /** The POST /v1/grants body, e.g. from `parseGrantIssueOptions`. */
  readonly spec?: object | undefined;
  readonly json?: boolean | undefined;
  /** `rotate --grace-ms N`: how long the previous token keeps working (default 0: it stops at once). */
  readonly graceMs?: string | undefined;
}

export interface CommandOutput {
  stdout(s: string): void;
  stderr(s: string): void;
}

export interface GrantIssueFlags {
  readonly destination?: readonly string[] | undefined;
  readonly unrestricted?: boolean | undefined;
  readonly allowClass?: readonly string[] | undefined;
  readonly allowAddress?: readonly string[] | undefined;
  readonly generation?: string | undefined;
  readonly expiresAt?: string | undefined;
  readonly maxConcurrent?: string | undefined;
  readonly maxBytes?: string | undefined;
  readonly askTimeoutMs?: string | undefined;
  /** The client certificate that identifies the grant on an `identify: certificate` listener (issue 28). */
  readonly clientCertSha256?: string | undefined;
  readonly clientCertUri?: string | undefined;
  readonly listen?: string | undefined;
  /** A raw JSON spec; the other flags override its fields. */
  readonly json?: string | undefined;
  /** The CLI's working directory: a relative `unix:` listen means a path in it, not in Sluice's. */
  readonly cwd?: string | undefined;
}

const TIMEOUT_MS = 15_000;
const MAX_ANSWER_BYTES = 16 * 1024 * 1024;

export interface AdminCall {
  readonly method: 'GET' | 'POST' | 'DELETE';
  readonly path: string;
  readonly body?: object;
}

export interface AdminAnswer {
  readonly status: number;
  readonly body: unknown;
}

/**
 * Runs one `sluice grant` action; resolves with the exit code: 0 ok, 1 refused or unreachable, 2 bad
 * input, caught here (usage) or by the admin API (any 400 answer: the request itself is wrong, such as a
 * spec that does not validate). Scripts read 1 as "refused", so bad input is never 1.
 */
export async function runGrantCommand(args: GrantCommandArgs, out: CommandOutput): Promise<number> {
  const call = planCall(args);
  if (typeof call === 'string') {
    out.stderr(`sluice grant ${args.action}: ${call}\n`);
    return 2;
  }
  let answer: AdminAnswer;
  try {
    answer = await callAdmin(args.admin, args.adminToken, call);
  } catch (error) {
    out.stderr(`sluice grant ${args.action}: ${(error as Error).message}\n`);
    return 1;
  }
  if (answer.status < 200 || answer.status > 299) {
    const body = (answer.body ?? {}) as { error?: unknown; issues?: readonly ControlIssue[] };
    out.stderr(`sluice grant ${args.action}: ${answer.status} ${typeof body.error === 'string' ? body.error : 'error'}\n`);
    for (const issue of Array.isArray(body.issues) ? body.issues : []) out.stderr(`  ${issue.path}: ${issue.message}\n`);
    return answer.status === 400 ? 2 : 1;
  }
  if (args.json === true) out.stdout(`${JSON.stringify(answer.body, null, 2)}\n`);
  else printAnswer(args, answer.body, out);
  return 0;
}

function planCall(args: GrantCommandArgs): AdminCall | string {
  const id = args.id === undefined ? undefined : encodeURIComponent(args.id);
  switch (args.action) {
    case 'issue':
      return { method: 'POST', path: '/v1/grants', body: args.spec ?? {} };
    case 'list':
      return { method: 'GET', path: '/v1/grants' };
    case 'show':
      return id === undefined ? 'give a grant id' : { method: 'GET', path: `/v1/grants/${id}` };
    case 'rotate': {
      if (id === undefined) return 'give a grant id';
      if (args.graceMs !== undefined && !/^\d{1,9}$/.test(args.graceMs)) return `--grace-ms: expected milliseconds from 0 to 86400000, got "${args.graceMs}"`;
      return { method: 'POST', path: `/v1/grants/${id}/rotate`, body: args.graceMs === undefined ? {} : { graceMs: Number(args.graceMs) } };
    }
    case 'revoke':
      if (id === undefined && args.generation === undefined) return 'give the grant id to revoke, or --generation LABEL to revoke every grant of a generation';
      if (id !== undefined && args.generation !== undefined) return 'give either a grant id or --generation, not both';
      return id !== undefined ? { method: 'DELETE', path: `/v1/grants/${id}` } : { method: 'POST', path: `/v1/generations/${encodeURIComponent(args.generation ?? '')}/revoke` };
  }
}

export function callAdmin(admin: string, token: string | undefined, call: AdminCall): Promise<AdminAnswer> {
  const isUnix = admin.startsWith('unix:');
  if (!isUnix && !/^http:\/\/[^/]+\/?$/.test(admin)) return Promise.reject(new Error(`admin address ${admin}: expected unix:/path or http://host:port`));
  const where = isUnix ? `the admin socket at ${admin.slice(5)}` : `the admin API at ${admin}`;
  const payload = call.body === undefined ? undefined : Buffer.from(JSON.stringify(call.body), 'utf8');
  const headers: Record<string, string | number> = { accept: 'application/json' };
  if (payload !== undefined) Object.assign(headers, { 'content-type': 'application/json', 'content-length': payload.length });
  if (token !== undefined && token !== '') headers['authorization'] = `Bearer ${token}`;
  const target: http.RequestOptions = isUnix ? { socketPath: admin.slice(5), host: 'sluice' } : { host: new URL(admin).hostname.replace(/^\[|\]$/g, ''), port: new URL(admin).port || 80 };
  return new Promise<AdminAnswer>((resolve, reject) => {
    const req = http.request({ ...target, method: call.method, path: call.path, headers, timeout: TIMEOUT_MS, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_ANSWER_BYTES) req.destroy(new Error(`${where} sent more than ${MAX_ANSWER_BYTES} bytes`));
        else chunks.push(chunk);
      });
      res.once('end', () => resolve({ status: res.statusCode ?? 0, body: parseAnswer(Buffer.concat(chunks).toString('utf8')) }));
      res.once('error', reject);
    });
    req.once('timeout', () => req.destroy(new Error(`${where} did not answer within ${TIMEOUT_MS / 1000} s`)));
    req.once('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'EACCES') reject(new Error(`cannot reach ${where}: permission denied (run as the user that runs sluice)`));
      else reject(error.code === undefined ? error : new Error(`cannot reach ${where}: is sluice running? (${error.code})`));
    });
    req.end(payload);
  });
}

function parseAnswer(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return { error: text.trim().slice(0, 200) || 'empty answer' };
  }
}

function printAnswer(args: GrantCommandArgs, body: unknown, out: CommandOutput): void {
  if (args.action === 'issue') {
    const issued = body as { id: string; token: string; grant: GrantView };
    out.stdout(`id     ${issued.id}\ntoken  ${issued.token}\n${issued.grant.listen === null ? '' : `listen ${issued.grant.listen}\n`}`);
    out.stderr('the token is shown only this once: store it now\n');
  } else if (args.action === 'rotate') {
    const rotated = body as { id: string; token: string; previousTokenUntil: string | null; endedConnections: number };
    out.stdout(`id     ${rotated.id}\ntoken  ${rotated.token}\n`);
    const previous = rotated.previousTokenUntil === null ? 'the previous token stopped now' : `the previous token works until ${rotated.previousTokenUntil}`;
    out.stderr(`the new token is shown only this once: store it now; ${previous} (${rotated.endedConnections} connection(s) ended)\n`);
  } else if (args.action === 'list') {
    out.stdout(formatGrantTable((body as { grants: readonly GrantView[] }).grants));
  } else if (args.action === 'show') {
    for (const [key, value] of Object.entries(body as GrantView)) out.stdout(`${key.padEnd(24)} ${typeof value === 'string' ? value : JSON.stringify(value)}\n`);
  } else if (args.id !== undefined) {
    const revoked = body as { revoked: GrantView; endedConnections: number };
    out.stdout(`revoked ${revoked.revoked.id} (${revoked.endedConnections} connection(s) ended)\n`);
  } else {
    const revoked = body as { revoked: readonly string[]; endedConnections: number };
    const ids = revoked.revoked.length === 0 ? '' : `: ${revoked.revoked.join(', ')}`;
    out.stdout(`revoked ${revoked.revoked.length} grant(s) of generation ${args.generation ?? ''}${ids} (${revoked.endedConnections} connection(s) ended)\n`);
  }
}

/** A fixed-width table: id, source, generation, destination rules, expiry, revocation. */
export function formatGrantTable(grants: readonly GrantView[]): string {
  if (grants.length === 0) return 'no grants\n';
  const rows = [
    ['ID', 'SOURCE', 'GENERATION', 'DESTINATIONS', 'EXPIRES', 'REVOKED'],
    ...grants.map((g) => [g.id, g.source, g.generation ?? '-', destinationsCell(g), g.expiresAt ?? '-', g.revokedAt ?? '-']),
  ];
  const widths = rows[0]?.map((_, col) => Math.max(...rows.map((row) => (row[col] ?? '').length))) ?? [];
  return rows.map((row) => `${row.map((cell, col) => cell.padEnd(widths[col] ?? 0)).join('  ').trimEnd()}\n`).join('');
}

/** The most rules a table row lists; `sluice grant show` (or --json) lists every one. */
const TABLE_RULES = 3;

/**
 * `any` for an unrestricted grant, `-` for none, else the first rules and `+N more`, so a row stays one
 * line (UX review 2026-12-04 finding 11; issue 25).
 */
function destinationsCell(grant: GrantView): string {
  if (grant.unrestricted) return 'any';
  if (grant.destinations.length === 0) return '-';
  const shown = grant.destinations.slice(0, TABLE_RULES).join(',');
  const more = grant.destinations.length - TABLE_RULES;
  return more > 0 ? `${shown} +${more} more` : shown;
}

/** Builds a POST /v1/grants body from `sluice grant issue` flags; throws an Error naming the bad flag. */
export function parseGrantIssueOptions(opts: GrantIssueFlags): Record<string, unknown> {
  const spec = opts.json === undefined ? {} : parseJsonSpec(opts.json);
  const limits: Record<string, unknown> = isObject(spec['limits']) ? { ...spec['limits'] } : {};
  if (opts.destination !== undefined && opts.destination.length > 0) spec['destinations'] = [...opts.destination];
  if (opts.unrestricted === true) spec['unrestricted'] = true;
  if (opts.allowClass !== undefined && opts.allowClass.length > 0) spec['allowAddressClasses'] = [...opts.allowClass];
  if (opts.allowAddress !== undefined && opts.allowAddress.length > 0) spec['allowAddresses'] = [...opts.allowAddress];
  if (opts.generation !== undefined) spec['generation'] = opts.generation;
  if (opts.listen !== undefined) spec['listen'] = opts.listen;
  if (typeof spec['listen'] === 'string' && opts.cwd !== undefined) spec['listen'] = absoluteUnixListen(spec['listen'], opts.cwd);
  if (opts.expiresAt !== undefined) limits['expiresAt'] = opts.expiresAt;
  if (opts.maxConcurrent !== undefined) limits['maxConcurrent'] = parsePositiveInteger('--max-concurrent', opts.maxConcurrent);
  if (opts.maxBytes !== undefined) limits['maxBytes'] = parsePositiveInteger('--max-bytes', opts.maxBytes);
  if (Object.keys(limits).length > 0 || spec['limits'] !== undefined) spec['limits'] = limits;
  if (opts.askTimeoutMs !== undefined) spec['ask'] = { timeoutMs: parsePositiveInteger('--ask-timeout-ms', opts.askTimeoutMs) };
  if (opts.clientCertSha256 !== undefined && opts.clientCertUri !== undefined) throw new Error('give --client-cert-sha256 or --client-cert-uri, not both: a grant names one certificate');
  if (opts.clientCertSha256 !== undefined) spec['clientCertificate'] = { sha256: opts.clientCertSha256 };
  if (opts.clientCertUri !== undefined) spec['clientCertificate'] = { uriSan: opts.clientCertUri };
  return spec;
}

/**
 * `unix:REL` as `unix:CWD/REL`, anything else as given. Joined, not normalized, so that what the admin
 * API refuses (`unix:`, `unix:dir/`, `unix:.`) is still refused by name; the server resolves the rest.
 */
function absoluteUnixListen(listen: string, cwd: string): string {
  const file = listen.slice('unix:'.length);
  if (!listen.startsWith('unix:') || file.trim() === '' || path.isAbsolute(file)) return listen;
  return `unix:${cwd.endsWith('/') ? cwd : `${cwd}/`}${file}`;
}

function parseJsonSpec(text: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch {
    throw new Error('--json: not valid JSON');
  }
  if (!isObject(value)) throw new Error('--json: expected a JSON object');
  return { ...value };
}

function parsePositiveInteger(flag: string, text: string): number {
  const value = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(value) || value < 1) throw new Error(`${flag}: expected a positive integer, got "${text}"`);
  return value;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
