// Owns the real-Squid upstream fixture: a private squid.conf in a temp dir, a loopback-only listener,
// optional proxy authentication (Basic via htpasswd + basic_ncsa_auth, Negotiate/Kerberos via
// negotiate_kerberos_auth and a keytab from test/support/kdc.ts, NTLM via ntlm_fake_auth), a parsed access
// log, and bounded start/stop.
import { execFile, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, copyFileSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findExecutable, forget, isExecutable, registerLive, stopChild, tryConnect } from './child-process.js';
import { unusedPort } from './ports.js';

export interface SquidOptions {
  /** Basic-auth users (name → password). When given, every request must carry valid proxy credentials. */
  users?: Record<string, string>;
  /** Static name → address map served from Squid's hosts_file, e.g. `{ 'origin.test': '127.0.0.1' }`. Loopback only. */
  hosts?: Record<string, string>;
  /** Bound on waiting for the listener to accept connections (default 15 s). */
  startTimeoutMs?: number;
  /**
   * Require Kerberos via SPNEGO (`Proxy-Authenticate: Negotiate`), checked by negotiate_kerberos_auth with
   * this keytab (e.g. from `kdc.addService('HTTP/localhost')`) and realm config (`kdc.krb5Config`). Both
   * files are copied into the fixture's dir (readable by Squid's effective user). `servicePrincipal`
   * (e.g. `HTTP/localhost@SLUICE.TEST`) restricts the acceptor; default: any principal in the keytab.
   */
  negotiate?: { keytab: string; krb5Config: string; servicePrincipal?: string };
  /**
   * Require NTLM (`Proxy-Authenticate: NTLM`) via ntlm_fake_auth: any well-formed type-3 message is
   * accepted, so it proves the connection-bound handshake, not the password.
   */
  ntlm?: true;
  /**
   * `false` writes `server_persistent_connections off`: Squid opens a new connection to the origin for
   * every request instead of keeping a pool of them shared by all its clients (default: Squid's own, on).
   */
  serverPersistentConnections?: boolean;
}

/** One access-log line, written with `logformat sluice` (see SQUID_LOGFORMAT). */
export interface SquidLogEntry {
  /** Completion time, epoch milliseconds. */
  time: number;
  /** Client address as Squid saw it (%>a). */
  client: string;
  /** Squid result code, e.g. TCP_MISS, TCP_TUNNEL, TCP_DENIED (%Ss). */
  result: string;
  /** HTTP status Squid sent to the client (%>Hs); 200 for an established CONNECT tunnel. */
  status: number;
  /** Request method (%rm), e.g. GET or CONNECT. */
  method: string;
  /** Request URL (%ru): absolute URL for plain HTTP, `host:port` for CONNECT. */
  url: string;
  /** Address Squid dialed upstream (%<a), or null when it dialed nothing (denied, 407, DNS failure). */
  serverAddress: string | null;
  /** Port Squid dialed upstream (%<p), or null when it dialed nothing. */
  serverPort: number | null;
  /** Authenticated (or presented) user name (%un), or null; `user@REALM` for Negotiate. */
  user: string | null;
  /** The client's source port (%>p): hops from one connection share it. */
  clientPort: number;
  /** The raw log line. */
  raw: string;
}

export interface Squid {
  port: number;
  /** `http://127.0.0.1:<port>` (no credentials). */
  url: string;
  /** The private temp dir holding squid.conf, logs, the hosts file and the htpasswd file. */
  dir: string;
  /** The generated squid.conf text. */
  config: string;
  /** Reads and parses the access log (readiness-probe noise is dropped). */
  accessLog(): Promise<SquidLogEntry[]>;
  /** Polls accessLog() until `predicate(entries)` is true; rejects after timeoutMs (default 5 s). */
  waitForLog(predicate: (entries: SquidLogEntry[]) => boolean, timeoutMs?: number): Promise<SquidLogEntry[]>;
  /** SIGTERM, bounded wait, SIGKILL fallback, then removes the temp dir. Idempotent. */
  close(): Promise<void>;
}

export const SQUID_LOGFORMAT = '%ts.%03tu %>a %Ss %>Hs %rm %<a %<p %un %>p %ru';
export const BASIC_NCSA_AUTH = '/usr/lib/squid/basic_ncsa_auth';
export const NEGOTIATE_KERBEROS_AUTH = '/usr/lib/squid/negotiate_kerberos_auth';
export const NTLM_FAKE_AUTH = '/usr/lib/squid/ntlm_fake_auth';
const SQUID_CANDIDATES = ['/usr/sbin/squid', '/usr/local/sbin/squid', '/usr/local/squid/sbin/squid'];
const PROBE_NOISE = 'error:transaction-end-before-headers';
const OUTPUT_TAIL_BYTES = 16 * 1024;
const START_ATTEMPTS = 3;



/** Path of the squid binary, or undefined when Squid is not installed. */
export function squidBinary(): string | undefined {
  return findExecutable('squid', SQUID_CANDIDATES);
}

/** True when a squid binary is installed (tests use this with describe.skipIf). */
export function squidAvailable(): boolean {
  return squidBinary() !== undefined;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function isLoopback(address: string): boolean {
  if (net.isIPv4(address)) return address.startsWith('127.');
  if (net.isIPv6(address)) return address === '::1' || address === '0:0:0:0:0:0:0:1';
  return false;
}

function assertToken(kind: string, value: string): void {
  if (value.length === 0 || /[\s#:]/.test(value)) {
    throw new Error(`startSquid: invalid ${kind} ${JSON.stringify(value)} (no whitespace, '#' or ':')`);
  }
}

/** Squid started as root drops to cache_effective_user; find one that exists. Undefined when not root. */
function effectiveUser(): { name: string; uid: number; gid: number } | undefined {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return undefined;
  const passwd = readFileSync('/etc/passwd', 'utf8').split('\n');
  for (const name of ['proxy', 'squid', 'nobody']) {
    const fields = passwd.find((line) => line.startsWith(`${name}:`))?.split(':');
    if (fields !== undefined && fields.length >= 4) {
      return { name, uid: Number(fields[2]), gid: Number(fields[3]) };
    }
  }
  throw new Error('startSquid: running as root but no proxy/squid/nobody user exists for cache_effective_user');
}

/** An enforcing AppArmor profile for /usr/sbin/squid forbids reading a config outside /etc/squid. */
function apparmorBlocksSquid(): boolean {
  try {
    const profiles = readFileSync('/sys/kernel/security/apparmor/profiles', 'utf8');
    return /^\/usr\/sbin\/squid \(enforce\)$/m.test(profiles);
  } catch {
    return false;
  }
}

function htpasswdLine(user: string, password: string): Promise<string> {
  const htpasswd = findExecutable('htpasswd');
  if (htpasswd === undefined) {
    throw new Error('startSquid: `htpasswd` not found; install the Debian package apache2-utils');
  }
  return new Promise((resolve, reject) => {
    // -n: print to stdout, -b: password from argv, -B: bcrypt (basic_ncsa_auth verifies it via crypt(3)).
    execFile(htpasswd, ['-n', '-b', '-B', user, password], { timeout: 10_000 }, (err, stdout, stderr) => {
      if (err !== null) reject(new Error(`startSquid: htpasswd failed: ${err.message} ${stderr}`));
      else resolve(stdout.trim());
    });
  });
}

interface Layout {
  dir: string;
  conf: string;
  pid: string;
  cacheLog: string;
  accessLog: string;
  hosts: string;
  passwd: string;
  keytab: string;
  krb5Conf: string;
}

/** Which proxy-auth schemes squid.conf configures; Squid offers them in its 407 in the order written. */
interface AuthSchemes {
  negotiate: { servicePrincipal: string } | undefined;
  ntlm: boolean;
  basic: boolean;
}

function renderAuth(l: Layout, auth: AuthSchemes): string[] {
  const lines: string[] = [];
  if (auth.negotiate !== undefined) {
    // -k: the keytab copy in our dir; -s: the acceptor name (GSS_C_NO_NAME: any keytab entry);
    // -c: the replay cache lives in our dir too, never in a shared /var/tmp.
    lines.push(
      `auth_param negotiate program ${NEGOTIATE_KERBEROS_AUTH} -k ${l.keytab} -s ${auth.negotiate.servicePrincipal} -c ${l.dir}`,
      'auth_param negotiate children 5 startup=1 idle=1',
      'auth_param negotiate keep_alive on',
    );
  }
  if (auth.ntlm) {
    lines.push(
      `auth_param ntlm program ${NTLM_FAKE_AUTH}`,
      'auth_param ntlm children 5 startup=1 idle=1',
      'auth_param ntlm keep_alive on',
    );
  }
  if (auth.basic) {
    lines.push(
      `auth_param basic program ${BASIC_NCSA_AUTH} ${l.passwd}`,
      'auth_param basic children 5 startup=1 idle=1',
      'auth_param basic realm sluice-test-squid',
    );
  }
  return lines;
}

function renderConfig(l: Layout, port: number, auth: AuthSchemes, user: string | undefined, serverPersistent: boolean): string {
  const withAuth = auth.negotiate !== undefined || auth.ntlm || auth.basic;
  const lines = [
    '# Generated by test/support/squid.ts; private to one test fixture instance.',
    `http_port 127.0.0.1:${port}`,
    `pid_filename ${l.pid}`,
    `cache_log ${l.cacheLog}`,
    `logformat sluice ${SQUID_LOGFORMAT}`,
    `access_log stdio:${l.accessLog} logformat=sluice`,
    'buffered_logs off',
    'logfile_rotate 0',
    'cache_store_log none',
    'netdb_filename none',
    `coredump_dir ${l.dir}`,
    '',
    '# No caching at all: memory only, nothing stored.',
    'cache deny all',
    'cache_mem 8 MB',
    '',
    '# Names come from the private hosts file; DNS only ever goes to loopback (nothing answers there).',
    `hosts_file ${l.hosts}`,
    'dns_nameservers 127.0.0.1',
    'dns_timeout 2 seconds',
    '',
    'acl sluice_clients src 127.0.0.0/8 ::1',
    'acl sluice_any_dst dst all',
    'acl sluice_loopback_dst dst 127.0.0.0/8 ::1',
    'http_access deny !sluice_clients',
    '# Safety net: never dial anything that resolved to a non-loopback address.',
    'http_access deny sluice_any_dst !sluice_loopback_dst',
  ];
  if (withAuth) {
    lines.push(
      ...renderAuth(l, auth),
      'acl authed proxy_auth REQUIRED',
      'http_access allow authed',
      'http_access deny all',
    );
  } else {
    lines.push('http_access allow sluice_clients', 'http_access deny all');
  }
  lines.push(
    '',
    'via off',
    'forwarded_for delete',
    'httpd_suppress_version_string on',
    'visible_hostname sluice-test-squid',
    'shutdown_lifetime 0 seconds',
    'pinger_enable off',
  );
  if (!serverPersistent) lines.push('server_persistent_connections off');
  if (user !== undefined) lines.push(`cache_effective_user ${user}`);
  return lines.join('\n') + '\n';
}

function parseLine(raw: string): SquidLogEntry | undefined {
  const fields = raw.split(' ');
  if (fields.length < 10) return undefined;
  const [ts, client, result, status, method, serverAddress, serverPort, user, clientPort] = fields as [
    string, string, string, string, string, string, string, string, string,
  ];
  const url = fields.slice(9).join(' ');
  if (url.startsWith(PROBE_NOISE)) return undefined;
  const dash = (v: string): string | null => (v === '-' || v === '' ? null : v);
  const portNum = Number(serverPort);
  return {
    time: Math.round(Number(ts) * 1000),
    client,
    result,
    status: Number(status),
    method,
    url,
    serverAddress: dash(serverAddress),
    serverPort: Number.isInteger(portNum) && portNum > 0 ? portNum : null,
    user: dash(user),
    clientPort: Number(clientPort),
    raw,
  };
}

async function readAccessLog(file: string): Promise<SquidLogEntry[]> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  const entries: SquidLogEntry[] = [];
  for (const line of text.split('\n')) {
    const entry = line.length > 0 ? parseLine(line) : undefined;
    if (entry !== undefined) entries.push(entry);
  }
  return entries;
}

/** Polls `squid.accessLog()` until `predicate(entries)` holds; rejects with the log so far after timeoutMs. */
export async function waitForLog(
  squid: Pick<Squid, 'accessLog'>,
  predicate: (entries: SquidLogEntry[]) => boolean,
  timeoutMs = 5000,
): Promise<SquidLogEntry[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const entries = await squid.accessLog();
    if (predicate(entries)) return entries;
    if (Date.now() >= deadline) {
      const shown = entries.map((e) => `  ${e.raw}`).join('\n') || '  (empty)';
      throw new Error(`waitForLog: predicate not satisfied within ${timeoutMs} ms; access log:\n${shown}`);
    }
    await sleep(25);
  }
}




interface Attempt {
  child: ChildProcess;
  output: () => string;
  /** True once squid itself reported the listener (so a connect is not answered by a port thief). */
  listening: () => boolean;
}

function spawnSquid(binary: string, conf: string, port: number, env: NodeJS.ProcessEnv): Attempt {
  // -N: foreground, no daemon/kids; -d 1: level-1 debug to stderr (kept for error reports).
  const child = spawn(binary, ['-N', '-d', '1', '-f', conf], { stdio: ['ignore', 'pipe', 'pipe'], env });
  const accepting = new RegExp(`Accepting HTTP Socket connections at \\S+ local=127\\.0\\.0\\.1:${port}\\b`);
  let tail = '';
  let listening = false;
  const collect = (chunk: Buffer): void => {
    tail = (tail + chunk.toString('utf8')).slice(-OUTPUT_TAIL_BYTES);
    listening ||= accepting.test(tail);
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  child.on('error', (err) => collect(Buffer.from(`\n[spawn error] ${err.message}\n`)));
  return { child, output: () => tail, listening: () => listening };
}


/** Starts a private Squid on 127.0.0.1:<free port>; throws a clear error when Squid is not installed. */
export async function startSquid(opts: SquidOptions = {}): Promise<Squid> {
  const binary = squidBinary();
  if (binary === undefined) {
    throw new Error('startSquid: squid is not installed (apt-get install squid apache2-utils); guard tests with squidAvailable()');
  }
  if (apparmorBlocksSquid()) {
    throw new Error(
      'startSquid: AppArmor enforces /usr/sbin/squid, which forbids a config outside /etc/squid. ' +
        'Run `sudo aa-complain /usr/sbin/squid` (or disable the usr.sbin.squid profile) for tests.',
    );
  }
  const users = Object.entries(opts.users ?? {});
  const hosts = Object.entries(opts.hosts ?? {});
  for (const [name, password] of users) {
    assertToken('user name', name);
    if (password.length === 0 || /[\r\n]/.test(password)) throw new Error(`startSquid: invalid password for ${name}`);
  }
  for (const [name, address] of hosts) {
    assertToken('host name', name);
    if (!isLoopback(address)) throw new Error(`startSquid: hosts entry ${name} → ${address} is not a loopback address`);
  }
  if (users.length > 0 && !isExecutable(BASIC_NCSA_AUTH)) {
    throw new Error(`startSquid: ${BASIC_NCSA_AUTH} is missing (it ships in the Debian squid package)`);
  }
  const negotiate = opts.negotiate;
  if (negotiate !== undefined) {
    if (!isExecutable(NEGOTIATE_KERBEROS_AUTH)) {
      throw new Error(`startSquid: ${NEGOTIATE_KERBEROS_AUTH} is missing (it ships in the Debian squid package)`);
    }
    for (const file of [negotiate.keytab, negotiate.krb5Config]) {
      if (!existsSync(file)) throw new Error(`startSquid: negotiate file ${file} does not exist`);
    }
    if (negotiate.servicePrincipal !== undefined) assertToken('service principal', negotiate.servicePrincipal);
  }
  if (opts.ntlm === true && !isExecutable(NTLM_FAKE_AUTH)) {
    throw new Error(`startSquid: ${NTLM_FAKE_AUTH} is missing (it ships in the Debian squid package)`);
  }
  const auth: AuthSchemes = {
    negotiate: negotiate === undefined ? undefined : { servicePrincipal: negotiate.servicePrincipal ?? 'GSS_C_NO_NAME' },
    ntlm: opts.ntlm === true,
    basic: users.length > 0,
  };
  const passwdLines = await Promise.all(users.map(([name, password]) => htpasswdLine(name, password)));

  const dir = mkdtempSync(join(tmpdir(), 'sluice-squid-'));
  if (/\s/.test(dir)) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`startSquid: temp dir ${dir} contains whitespace, which squid.conf cannot express`);
  }
  const layout: Layout = {
    dir,
    conf: join(dir, 'squid.conf'),
    pid: join(dir, 'squid.pid'),
    cacheLog: join(dir, 'cache.log'),
    accessLog: join(dir, 'access.log'),
    hosts: join(dir, 'hosts'),
    passwd: join(dir, 'passwd'),
    keytab: join(dir, 'negotiate.keytab'),
    krb5Conf: join(dir, 'krb5.conf'),
  };
  // Squid passes its environment to its helpers: negotiate_kerberos_auth reads the realm from KRB5_CONFIG.
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!/^KRB5/.test(key)) env[key] = value;
  }
  if (negotiate !== undefined) {
    env['KRB5_CONFIG'] = layout.krb5Conf;
    env['KRB5_KTNAME'] = layout.keytab;
  }
  const startTimeoutMs = opts.startTimeoutMs ?? 15_000;
  try {
    const euser = effectiveUser();
    writeFileSync(layout.hosts, hosts.map(([name, address]) => `${address} ${name}\n`).join(''));
    if (users.length > 0) writeFileSync(layout.passwd, passwdLines.join('\n') + '\n', { mode: 0o600 });
    if (negotiate !== undefined) {
      // Copies inside our dir: the chown below hands them to the effective user, the originals stay as they are.
      copyFileSync(negotiate.keytab, layout.keytab);
      chmodSync(layout.keytab, 0o600);
      copyFileSync(negotiate.krb5Config, layout.krb5Conf);
    }

    let lastError = '';
    for (let attempt = 1; attempt <= START_ATTEMPTS; attempt += 1) {
      const port = await unusedPort();
      const config = renderConfig(layout, port, auth, euser?.name, opts.serverPersistentConnections ?? true);
      writeFileSync(layout.conf, config);
      rmSync(layout.pid, { force: true });
      // Root squid drops to cache_effective_user: that user must own the dir (logs, pid) and read the files.
      if (euser !== undefined) {
        chownSync(dir, euser.uid, euser.gid);
        for (const name of readdirSync(dir)) chownSync(join(dir, name), euser.uid, euser.gid);
      }

      const { child, output, listening } = spawnSquid(binary, layout.conf, port, env);
      registerLive(child, dir);
      const deadline = Date.now() + startTimeoutMs;
      let ready = false;
      while (Date.now() < deadline) {
        if (child.exitCode !== null || child.signalCode !== null) break;
        if (listening() && (await tryConnect(port, 500))) {
          ready = true;
          break;
        }
        await sleep(50);
      }
      if (ready && child.exitCode === null && child.signalCode === null) {
        return makeHandle(layout, port, config, child);
      }

      const exited = child.exitCode !== null || child.signalCode !== null;
      await stopChild(child, 'squid').catch(() => undefined);
      forget(child);
      const cacheLog = existsSync(layout.cacheLog) ? readFileSync(layout.cacheLog, 'utf8').slice(-OUTPUT_TAIL_BYTES) : '';
      const text = `${output()}\n${cacheLog}`;
      lastError = exited
        ? `squid exited (code ${String(child.exitCode)}, signal ${String(child.signalCode)}) before listening on 127.0.0.1:${port}`
        : `squid did not accept connections on 127.0.0.1:${port} within ${startTimeoutMs} ms`;
      lastError += `\n--- squid output ---\n${text.trim()}`;
      if (/permission denied/i.test(text)) {
        lastError += '\n(hint: squid could not read/write its temp files; AppArmor or a restrictive tmp dir may be the cause)';
      }
      // Only a lost race for the port is worth retrying.
      if (!exited || !/address already in use|cannot open http port|commBind/i.test(text)) break;
    }
    throw new Error(`startSquid: ${lastError}`);
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

function makeHandle(layout: Layout, port: number, config: string, child: ChildProcess): Squid {
  let closing: Promise<void> | undefined;
  const handle: Squid = {
    port,
    url: `http://127.0.0.1:${port}`,
    dir: layout.dir,
    config,
    accessLog: () => readAccessLog(layout.accessLog),
    waitForLog: (predicate, timeoutMs) => waitForLog(handle, predicate, timeoutMs),
    close: () => {
      closing ??= stopChild(child, 'squid').finally(() => {
        forget(child);
        rmSync(layout.dir, { recursive: true, force: true });
      });
      return closing;
    },
  };
  return handle;
}
