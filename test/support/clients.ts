// Owns the client compatibility matrix's fixtures: running real client binaries (curl, wget, python3,
// git, node, chromium) with a scrubbed environment and a hard timeout that kills the client's whole
// process group, a shared Sluice + origins fixture, and a git smart-HTTP origin (git http-backend as CGI).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash, X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createTestPki, type TestPki } from './pki.js';
import { startHttpOrigin, startHttpsOrigin, type Origin } from './origins.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from './sluice.js';
import { killGroup, REPO_ROOT } from './sluice-process.js';

/** The repository root: child `node` processes run here so that `import 'undici'` resolves. */
export { REPO_ROOT };

export interface ClientResult {
  /** Exit code, or null when the client was killed by a signal (e.g. the hard timeout). */
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

export interface RunClientOptions {
  /** Added to the scrubbed environment (see clientEnv). */
  env?: Record<string, string>;
  /** SIGKILL for the client's process group after this long (default 15 s). */
  timeoutMs?: number;
  cwd?: string;
  stdin?: string;
}

// Every client we start, so that nothing outlives the test worker even if a test throws mid-way.
const live = new Set<ChildProcess>();
const tempDirs: string[] = [];
let home: string | undefined;

/** Kills every client still running and removes every temporary directory (profiles, clones, HOME). Call it in afterAll. */
export function cleanupClients(): void {
  for (const child of live) killGroup(child);
  live.clear();
  for (const dir of tempDirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
  home = undefined;
}

// A backstop for a worker that exits without afterAll having run.
process.once('exit', cleanupClients);

/** A temporary directory removed when the worker exits (or earlier with fs.rmSync). */
export function tempDir(prefix: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `sluice-clients-${prefix}-`));
  tempDirs.push(dir);
  return dir;
}

/**
 * The environment every client runs with: PATH, an empty HOME (no ~/.curlrc, ~/.wgetrc, ~/.gitconfig,
 * ~/.config/chromium), a C UTF-8 locale, and `extra`. Nothing else of the test runner's environment
 * reaches the client: no *_proxy variables, no NODE_OPTIONS, no GIT_*, no SSL_CERT_*.
 */
export function clientEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  home ??= tempDir('home');
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    HOME: home,
    LANG: 'C.UTF-8',
    LC_ALL: 'C.UTF-8',
    TZ: 'UTC',
  };
  if (process.env.TMPDIR !== undefined) env.TMPDIR = process.env.TMPDIR;
  return { ...env, ...extra };
}

/** The client's absolute path: Debian's /usr/bin first (so pyenv shims do not need their own HOME), then PATH. */
export function findCommand(name: string): string | undefined {
  const dirs = ['/usr/bin', '/bin', ...(process.env.PATH ?? '').split(path.delimiter).filter((d) => d.length > 0)];
  for (const dir of dirs) {
    const candidate = path.join(dir, name);
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** Runs `command args` with clientEnv(opts.env); resolves when it exits, after SIGKILLing its process group. */
export function runClient(command: string, args: string[], opts: RunClientOptions = {}): Promise<ClientResult> {
  const timeoutMs = opts.timeoutMs ?? 15_000;
  const child = spawn(findCommand(command) ?? command, args, {
    env: clientEnv(opts.env),
    cwd: opts.cwd ?? REPO_ROOT,
    detached: true,
    stdio: [opts.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
  });
  live.add(child);
  if (opts.stdin !== undefined && child.stdin !== null) {
    child.stdin.on('error', () => undefined);
    child.stdin.end(opts.stdin);
  }
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.stdout?.on('data', (chunk: Buffer) => out.push(chunk));
  child.stderr?.on('data', (chunk: Buffer) => err.push(chunk));
  return new Promise<ClientResult>((resolve, reject) => {
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child);
    }, timeoutMs);
    child.once('error', (e) => {
      clearTimeout(timer);
      live.delete(child);
      reject(e);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      // Helpers the client left behind (chromium's zygote and renderers, git-remote-http) go too.
      killGroup(child);
      live.delete(child);
      let stderr = Buffer.concat(err).toString('utf8');
      if (timedOut) stderr += `\n[runClient] ${command} killed after ${timeoutMs} ms`;
      resolve({ code, signal, stdout: Buffer.concat(out).toString('utf8'), stderr, timedOut });
    });
  });
}

/** First line of `command --version` (or the given args), or undefined when the client is missing. */
export function clientVersion(command: string, args: string[] = ['--version']): string | undefined {
  const file = findCommand(command);
  if (file === undefined) return undefined;
  const r = spawnSync(file, args, { env: clientEnv(), encoding: 'utf8', timeout: 15_000 });
  const lines = `${r.stdout ?? ''}\n${r.stderr ?? ''}`.split('\n').map((l) => l.trim());
  // Debian's chromium wrapper script prints a shell warning before the version line.
  return lines.find((l) => l.length > 0 && !l.includes('unexpected operator'));
}

/** base64(sha256(SubjectPublicKeyInfo)) of a PEM certificate: Chromium's --ignore-certificate-errors-spki-list format. */
export function spkiHash(certPem: string): string {
  const der = new X509Certificate(certPem).publicKey.export({ type: 'spki', format: 'der' });
  return createHash('sha256').update(der).digest('base64');
}

// ---------------------------------------------------------------------------------------------------
// The matrix fixture: one HTTP and one HTTPS origin on loopback, reached by the name app.test (resolved
// to 127.0.0.1 by Sluice's injected lookup); deny.test resolves too but is not in the grant.

export const GRANT = 'clients';
export const TOKEN = 'tok-clients-7f3a9c';
export const BROWSER_GRANT = 'browser';

export interface Matrix {
  pki: TestPki;
  http: Origin;
  https: Origin;
  sluice: TestSluice;
  /** Token-identified HTTP proxy listener. */
  proxyPort: number;
  /** Token-identified SOCKS5 listener. */
  socksPort: number;
  /** HTTP proxy listener dedicated to BROWSER_GRANT (no token needed, or possible). */
  dedicatedPort: number;
  /** http://GRANT:TOKEN@127.0.0.1:proxyPort */
  proxyUrl: string;
  httpUrl(p: string): string;
  httpsUrl(p: string): string;
  deniedHttpUrl(p: string): string;
  deniedHttpsUrl(p: string): string;
  /** Decision records whose canonical destination (or, before canonicalization, target) names app.test or deny.test. */
  decisionsFor(host: 'app.test' | 'deny.test'): ReturnType<TestSluice['decisions']>;
  close(): Promise<void>;
}

export interface MatrixOptions {
  /** Extra destination rules for GRANT, given the origin ports. */
  extraDestinations?: (ports: { http: number; https: number }) => string[];
}

export async function startMatrix(opts: MatrixOptions = {}): Promise<Matrix> {
  const pki = createTestPki(['app.test', 'deny.test']);
  const httpOrigin = await startHttpOrigin();
  const httpsOrigin = await startHttpsOrigin(pki);
  const ports = { http: httpOrigin.port, https: httpsOrigin.port };
  const destinations = [`http://app.test:${ports.http}`, `https://app.test:${ports.https}`];
  const sluice = await startSluice(
    {
      listeners: [
        { name: 'shared', listen: '127.0.0.1:0', identify: 'token' },
        { name: 'socks', listen: '127.0.0.1:0', identify: 'token', protocol: 'socks5' },
        { name: 'browser', listen: '127.0.0.1:0', grant: BROWSER_GRANT },
      ],
      grants: [
        {
          id: GRANT,
          tokenSha256: tokenHash(TOKEN),
          destinations: [...destinations, ...(opts.extraDestinations?.(ports) ?? [])],
          allowAddressClasses: ['loopback'],
        },
        { id: BROWSER_GRANT, destinations, allowAddressClasses: ['loopback'] },
      ],
    },
    { lookup: tableLookup({ 'app.test': ['127.0.0.1'], 'deny.test': ['127.0.0.1'] }) },
  );
  const portOf = (name: string): number => {
    const address = sluice.app.listeners.find((l) => l.name === name)?.address;
    if (address === undefined) throw new Error(`no listener ${name}`);
    return Number(address.slice(address.lastIndexOf(':') + 1));
  };
  const proxyPort = portOf('shared');
  return {
    pki,
    http: httpOrigin,
    https: httpsOrigin,
    sluice,
    proxyPort,
    socksPort: portOf('socks'),
    dedicatedPort: portOf('browser'),
    proxyUrl: `http://${GRANT}:${TOKEN}@127.0.0.1:${proxyPort}`,
    httpUrl: (p) => `http://app.test:${ports.http}${p}`,
    httpsUrl: (p) => `https://app.test:${ports.https}${p}`,
    deniedHttpUrl: (p) => `http://deny.test:${ports.http}${p}`,
    deniedHttpsUrl: (p) => `https://deny.test:${ports.https}${p}`,
    decisionsFor: (host) => sluice.decisions().filter((d) => (d.canonical ?? d.target).includes(`${host}:`)),
    close: async () => {
      await sluice.close();
      await httpOrigin.close();
      await httpsOrigin.close();
    },
  };
}

// ---------------------------------------------------------------------------------------------------
// A git origin: `git http-backend` run as a CGI program for every request (smart HTTP protocol).

export interface GitOrigin {
  port: number;
  /** Bare repositories live here; `repo.git` is created with one commit whose README says `readme`. */
  root: string;
  readonly connections: number;
  requests: { method: string; url: string; proxyAuthorization: boolean }[];
  close(): Promise<void>;
}

const GIT_IDENTITY = {
  GIT_AUTHOR_NAME: 'Sluice Tests',
  GIT_AUTHOR_EMAIL: 'tests@sluice.invalid',
  GIT_COMMITTER_NAME: 'Sluice Tests',
  GIT_COMMITTER_EMAIL: 'tests@sluice.invalid',
  GIT_CONFIG_NOSYSTEM: '1',
};

function git(args: string[], cwd: string): void {
  const r = spawnSync(findCommand('git') ?? 'git', args, { cwd, env: clientEnv(GIT_IDENTITY), encoding: 'utf8', timeout: 15_000 });
  if (r.status !== 0) throw new Error(`git ${args.join(' ')} failed: ${r.stderr}`);
}

/** Creates `<root>/repo.git`, a bare repository with one commit (README = "readme\n"). */
export function makeBareRepo(root: string): void {
  const work = path.join(root, 'work');
  fs.mkdirSync(work);
  git(['init', '-q', '-b', 'main'], work);
  fs.writeFileSync(path.join(work, 'README'), 'readme\n');
  git(['add', 'README'], work);
  git(['commit', '-q', '-m', 'first'], work);
  git(['clone', '-q', '--bare', work, path.join(root, 'repo.git')], root);
  fs.rmSync(work, { recursive: true, force: true });
}

function serveCgi(root: string, req: http.IncomingMessage, res: http.ServerResponse): void {
  const url = new URL(req.url ?? '/', 'http://origin.invalid');
  const env: Record<string, string> = {
    GIT_PROJECT_ROOT: root,
    GIT_HTTP_EXPORT_ALL: '1',
    PATH_INFO: decodeURIComponent(url.pathname),
    QUERY_STRING: url.search.replace(/^\?/, ''),
    REQUEST_METHOD: req.method ?? 'GET',
    CONTENT_TYPE: req.headers['content-type'] ?? '',
    REMOTE_ADDR: req.socket.remoteAddress ?? '',
    GATEWAY_INTERFACE: 'CGI/1.1',
    SERVER_PROTOCOL: 'HTTP/1.1',
  };
  if (req.headers['content-length'] !== undefined) env.CONTENT_LENGTH = req.headers['content-length'];
  if (req.headers['content-encoding'] !== undefined) env.HTTP_CONTENT_ENCODING = req.headers['content-encoding'];
  if (typeof req.headers['git-protocol'] === 'string') env.HTTP_GIT_PROTOCOL = req.headers['git-protocol'];
  const child = spawn(findCommand('git') ?? 'git', ['http-backend'], { env: clientEnv(env), stdio: ['pipe', 'pipe', 'pipe'] });
  live.add(child);
  const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  const out: Buffer[] = [];
  child.stdout.on('data', (c: Buffer) => out.push(c));
  child.stderr.on('data', () => undefined);
  child.stdin.on('error', () => undefined);
  req.pipe(child.stdin);
  child.once('close', () => {
    clearTimeout(timer);
    live.delete(child);
    const all = Buffer.concat(out);
    const crlf = all.indexOf('\r\n\r\n');
    const lf = all.indexOf('\n\n');
    const [end, sep] = crlf >= 0 && (lf < 0 || crlf < lf) ? [crlf, 4] : [lf, 2];
    if (end < 0) {
      res.writeHead(500, { 'content-type': 'text/plain' }).end('git http-backend produced no headers');
      return;
    }
    let status = 200;
    const headers: Record<string, string> = {};
    for (const line of all.subarray(0, end).toString('latin1').split(/\r?\n/)) {
      const colon = line.indexOf(':');
      if (colon <= 0) continue;
      const name = line.slice(0, colon).trim();
      const value = line.slice(colon + 1).trim();
      if (name.toLowerCase() === 'status') status = Number.parseInt(value, 10) || 500;
      else headers[name] = value;
    }
    const body = all.subarray(end + sep);
    headers['content-length'] = String(body.length);
    res.writeHead(status, headers).end(body);
  });
}

/** A git smart-HTTP origin on 127.0.0.1:0 (HTTPS with the leaf from `pki` when given). */
export async function startGitOrigin(pki?: TestPki): Promise<GitOrigin> {
  const root = tempDir('git-origin');
  makeBareRepo(root);
  const requests: GitOrigin['requests'] = [];
  const onRequest = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    requests.push({ method: req.method ?? '', url: req.url ?? '', proxyAuthorization: req.headers['proxy-authorization'] !== undefined });
    serveCgi(root, req, res);
  };
  const server = pki === undefined ? http.createServer(onRequest) : https.createServer({ key: pki.keyPem, cert: pki.certPem }, onRequest);
  const sockets = new Set<Socket>();
  let accepted = 0;
  server.on('connection', (socket: Socket) => {
    accepted += 1;
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  const port = await new Promise<number>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port));
  });
  let closing: Promise<void> | undefined;
  return {
    port,
    root,
    get connections() {
      return accepted;
    },
    requests,
    close: () => {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
        for (const socket of sockets) socket.destroy();
      });
      return closing;
    },
  };
}

// ---------------------------------------------------------------------------------------------------
// Headless Chromium: one fresh profile per run, the page's DOM on stdout (--dump-dom), and the proxy's
// CONNECT replies read back from Chromium's own net log (a denied tunnel never reaches the page).

export const CHROMIUM = findCommand('chromium');

export interface TunnelExchange {
  /** `CONNECT host:port HTTP/1.1` as Chromium sent it. */
  request: string;
  /** The proxy's reply: status line first, then each header line. */
  response: string[];
}

export interface ChromiumResult extends ClientResult {
  /**
   * What --dump-dom printed: the page, or after a failed load '' or Chromium's own error page, depending
   * on its version (150 prints an empty document, 156 nothing). Tests assert on it only for loads that
   * succeed or that show Sluice's own body.
   */
  dom: string;
  /**
   * `net::ERR_…` that ended the navigation: the "Page load failed" log line where this version prints
   * one, else the URL request's own net_error in the net log (which for a 407 is the tunnel failure).
   */
  loadError: string | undefined;
  tunnels: TunnelExchange[];
}

/** The flags every run uses: headless, no sandbox (root in CI), nothing that phones home on its own. */
export function chromiumFlags(profile: string): string[] {
  return [
    '--headless=new',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    `--user-data-dir=${profile}`,
  ];
}

interface NetLog {
  constants?: { netError?: Record<string, number>; logSourceType?: Record<string, number> };
  events?: { source?: { id?: number; type?: number }; params?: { line?: unknown; headers?: unknown; url?: unknown; net_error?: unknown } }[];
}

function readNetLog(file: string): NetLog {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8')) as NetLog;
  } catch {
    return {};
  }
}

function tunnelExchanges(log: NetLog): TunnelExchange[] {
  const requests = new Map<number, string>();
  const out: TunnelExchange[] = [];
  for (const event of log.events ?? []) {
    const id = event.source?.id;
    const params = event.params;
    if (id === undefined || params === undefined) continue;
    if (typeof params.line === 'string' && params.line.startsWith('CONNECT ')) requests.set(id, params.line.trim());
    else if (Array.isArray(params.headers) && typeof params.headers[0] === 'string' && params.headers[0].startsWith('HTTP/')) {
      const request = requests.get(id);
      if (request !== undefined) out.push({ request, response: params.headers.map(String) });
    }
  }
  return out;
}

/**
 * The error that ended the URL request for `url`: the last one logged for it (an auth retry logs the
 * tunnel failure first). The net log names its own codes in constants.netError, so this holds across
 * Chromium versions, unlike the rendered error page.
 */
function navigationError(log: NetLog, url: string): string | undefined {
  const names = new Map(Object.entries(log.constants?.netError ?? {}).map(([name, code]) => [code, name]));
  const urlRequest = log.constants?.logSourceType?.['URL_REQUEST'];
  const target = new URL(url).href;
  const urlOf = new Map<number, string>();
  let last: string | undefined;
  for (const event of log.events ?? []) {
    const { id, type } = event.source ?? {};
    const params = event.params;
    if (id === undefined || params === undefined || type !== urlRequest) continue;
    if (typeof params.url === 'string') urlOf.set(id, params.url);
    const code = params.net_error;
    if (typeof code === 'number' && code < 0 && urlOf.get(id) === target) {
      const name = names.get(code);
      if (name !== undefined) last = name.startsWith('net::') ? name : `net::${name}`;
    }
  }
  return last;
}

/** Runs headless Chromium with `flags` (proxy settings, certificate trust) and `--dump-dom url`. */
export async function runChromium(flags: string[], url: string, timeoutMs = 40_000): Promise<ChromiumResult> {
  const profile = tempDir('chromium');
  const netLog = path.join(profile, 'netlog.json');
  try {
    const r = await runClient(
      CHROMIUM ?? 'chromium',
      [...chromiumFlags(profile), '--enable-logging=stderr', '--v=0', `--log-net-log=${netLog}`, ...flags, '--dump-dom', url],
      { timeoutMs },
    );
    const log = readNetLog(netLog);
    const loadError = /Page load failed: (net::ERR_[A-Z_]+)/.exec(r.stderr)?.[1] ?? navigationError(log, url);
    return { ...r, dom: r.stdout, loadError, tunnels: tunnelExchanges(log) };
  } finally {
    fs.rmSync(profile, { recursive: true, force: true });
  }
}
