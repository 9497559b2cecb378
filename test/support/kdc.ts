// Owns the real-Kerberos fixture: a throwaway MIT realm (krb5kdc on a loopback TCP port, its database,
// stash, keytabs and ccaches in one private temp dir), with bounded start/stop. It never touches the
// machine's /etc/krb5.conf, its default ccache or port 88: every child gets KRB5_CONFIG pointing here.
import { execFile, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findExecutable, forget, registerLive, stopChild, tryConnect } from './child-process.js';
import { unusedPort } from './ports.js';

export interface KdcOptions {
  /** Realm name (default `SLUICE.TEST`): upper-case letters, digits, dots and dashes. */
  realm?: string;
  /** Bound on waiting for krb5kdc to accept TCP connections (default 10 s). */
  startTimeoutMs?: number;
}

export interface KdcUserOptions {
  /** Per-principal maximum ticket lifetime (kadmin `-maxlife`), for expiry tests. */
  maxLifeSeconds?: number;
}

export interface KinitOptions {
  /** Requested ticket lifetime (`kinit -l <n>s`). */
  lifetimeSeconds?: number;
}

export interface Kdc {
  /** The realm, e.g. `SLUICE.TEST`. */
  realm: string;
  /** Loopback TCP (and UDP) port krb5kdc listens on. */
  port: number;
  /** The private temp dir (krb5.conf, kdc.conf, database, stash, keytabs, logs). */
  dir: string;
  /** Path of the generated client/acceptor krb5.conf (set KRB5_CONFIG to it). */
  krb5Config: string;
  /**
   * Environment for a child process using this realm: process.env without inherited KRB5* variables,
   * plus KRB5_CONFIG, plus KRB5CCNAME defaulting to a private ccache file in `dir` (never the machine's
   * /tmp/krb5cc_<uid>), then `extra` (e.g. `{ KRB5CCNAME: ccache }` or `{ KRB5_CLIENT_KTNAME: keytab }`).
   */
  env(extra?: NodeJS.ProcessEnv): NodeJS.ProcessEnv;
  /** `name@REALM` (a name that already has a realm is returned unchanged). */
  principal(name: string): string;
  /** Creates a service principal with a random key (e.g. `HTTP/localhost`); returns a new 0600 keytab holding it. */
  addService(spn: string): Promise<string>;
  /** Creates a user principal with a password. */
  addUser(name: string, password: string, opts?: KdcUserOptions): Promise<void>;
  /** A new 0600 client keytab for the user (for KRB5_CLIENT_KTNAME); keys are not randomized, the password still works. */
  userKeytab(name: string): Promise<string>;
  /** Runs kinit for the user into `ccachePath` (password on stdin); rejects with kinit's message on failure. */
  kinit(user: string, password: string, ccachePath: string, opts?: KinitOptions): Promise<void>;
  /**
   * True while `ccachePath` holds a ticket GSS-API would still use: its end time (whole seconds) is not
   * yet in the past, with a second's margin for the KDC clock offset the ccache records. Note `klist -s`
   * already says false in the end time's own second, when MIT's gss_init_sec_context (and so curl, or
   * Sluice via `kerberos`) still sends the ticket; this does not.
   * Falls back to `klist -s` for a ccache it cannot read.
   */
  ticketValid(ccachePath: string): Promise<boolean>;
  /** End time (epoch ms) of the longest-lived ticket in a FILE ccache, or null when it holds none. */
  ticketExpiresAt(ccachePath: string): Promise<number | null>;
  /** SIGTERM, bounded wait, SIGKILL fallback, then removes the temp dir. Idempotent. */
  close(): Promise<void>;
}

const DEFAULT_REALM = 'SLUICE.TEST';
const SBIN = ['/usr/sbin', '/usr/local/sbin', '/usr/bin', '/usr/local/bin'];
const CHILD_TIMEOUT_MS = 10_000;
const OUTPUT_TAIL_BYTES = 16 * 1024;
const START_ATTEMPTS = 3;
/** The realm's ceiling; a principal's -maxlife or kinit -l makes a ticket shorter. */
const REALM_MAX_LIFE = '1h';



const TOOLS = ['krb5kdc', 'kdb5_util', 'kadmin.local', 'kinit', 'klist'] as const;
type Tool = (typeof TOOLS)[number];

function tool(name: Tool): string {
  const path = findExecutable(name, [], SBIN);
  if (path === undefined) {
    throw new Error(`kdc: \`${name}\` not found; install the Debian packages krb5-kdc krb5-admin-server krb5-user`);
  }
  return path;
}

/** True when the MIT KDC and client tools are installed (tests use this with describe.skipIf). */
export function kdcAvailable(): boolean {
  return TOOLS.every((name) => findExecutable(name, [], SBIN) !== undefined);
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

// kadmin.local reads its queries from stdin, split on whitespace: refuse anything that could be read as
// another token or command, so a name or password cannot become a second query.
const NAME = /^[A-Za-z0-9][A-Za-z0-9._/-]*$/;
function assertName(kind: string, value: string): void {
  if (!NAME.test(value)) throw new Error(`kdc: invalid ${kind} ${JSON.stringify(value)} (letters, digits, . _ / - only)`);
}
function assertPassword(password: string): void {
  if (password.length === 0 || /[\s"'\\]/.test(password)) {
    throw new Error('kdc: invalid password (non-empty, no whitespace, quotes or backslashes)');
  }
}

interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a tool with a hard timeout; never rejects for a non-zero exit (callers decide). */
function run(file: string, args: string[], env: NodeJS.ProcessEnv, stdin?: string): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = execFile(file, args, { env, timeout: CHILD_TIMEOUT_MS, killSignal: 'SIGKILL' }, (err, stdout, stderr) => {
      if (err !== null && typeof err.code !== 'number') {
        if (err.killed) {
          resolve({ code: null, stdout, stderr: `${stderr}\n[killed after ${CHILD_TIMEOUT_MS} ms]` });
          return;
        }
        reject(new Error(`kdc: could not run ${file}: ${err.message}`));
        return;
      }
      resolve({ code: err === null ? 0 : (err.code as number), stdout, stderr });
    });
    child.stdin?.on('error', () => undefined);
    child.stdin?.end(stdin ?? '');
  });
}





interface Layout {
  dir: string;
  krb5Conf: string;
  kdcConf: string;
  database: string;
  stash: string;
  acl: string;
  kdcLog: string;
  adminLog: string;
}

function renderKrb5Conf(realm: string, port: number): string {
  return [
    '# Generated by test/support/kdc.ts; private to one test realm.',
    '[libdefaults]',
    `  default_realm = ${realm}`,
    // Never ask DNS (the tests run offline and must not leak a lookup); the realm's KDC is listed below.
    '  dns_lookup_kdc = false',
    '  dns_lookup_realm = false',
    // The SPN is built from the proxy host name as given (HTTP/localhost), never from a reverse lookup.
    '  dns_canonicalize_hostname = false',
    '  rdns = false',
    // TCP first (the KDC listens on TCP and UDP on the same loopback port), so readiness is a TCP connect.
    '  udp_preference_limit = 1',
    // The acceptor (Squid's negotiate helper) takes any principal in its keytab.
    '  ignore_acceptor_hostname = true',
    // Everything runs on one clock: 5 s of skew (not 300) bounds how long an acceptor or the KDC still
    // takes a just-expired ticket from a client that sends one (MIT clients refuse it themselves).
    '  clockskew = 5',
    '  forwardable = false',
    '',
    '[realms]',
    `  ${realm} = {`,
    `    kdc = 127.0.0.1:${port}`,
    '  }',
    '',
    '[domain_realm]',
    `  localhost = ${realm}`,
    `  .krb.test = ${realm}`,
    `  krb.test = ${realm}`,
    '',
  ].join('\n');
}

function renderKdcConf(l: Layout, realm: string, port: number): string {
  return [
    '# Generated by test/support/kdc.ts; private to one test realm.',
    '[kdcdefaults]',
    // Both lists must be set: an unset kdc_listen would bind UDP port 88 on every address.
    `  kdc_listen = 127.0.0.1:${port}`,
    `  kdc_tcp_listen = 127.0.0.1:${port}`,
    '',
    '[realms]',
    `  ${realm} = {`,
    `    database_name = ${l.database}`,
    `    key_stash_file = ${l.stash}`,
    `    acl_file = ${l.acl}`,
    `    max_life = ${REALM_MAX_LIFE}`,
    '    max_renewable_life = 0',
    '    supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal',
    '  }',
    '',
    '[logging]',
    `  kdc = FILE:${l.kdcLog}`,
    `  admin_server = FILE:${l.adminLog}`,
    `  default = FILE:${l.adminLog}`,
    '',
  ].join('\n');
}

function tail(file: string): string {
  return existsSync(file) ? readFileSync(file, 'utf8').slice(-OUTPUT_TAIL_BYTES) : '';
}

/** Starts a throwaway realm's krb5kdc on 127.0.0.1:<free port>. Throws a clear error when not installed. */
export async function startKdc(opts: KdcOptions = {}): Promise<Kdc> {
  const realm = opts.realm ?? DEFAULT_REALM;
  if (!/^[A-Z0-9][A-Z0-9.-]*$/.test(realm)) throw new Error(`startKdc: invalid realm ${JSON.stringify(realm)}`);
  const bins = { krb5kdc: tool('krb5kdc'), kdb5_util: tool('kdb5_util'), kadmin: tool('kadmin.local'), kinit: tool('kinit'), klist: tool('klist') };
  const startTimeoutMs = opts.startTimeoutMs ?? 10_000;

  const dir = mkdtempSync(join(tmpdir(), 'sluice-kdc-'));
  // Readable by other users (a child dropped to another uid still reads krb5.conf); secrets are 0600.
  chmodSync(dir, 0o755);
  const l: Layout = {
    dir,
    krb5Conf: join(dir, 'krb5.conf'),
    kdcConf: join(dir, 'kdc.conf'),
    database: join(dir, 'principal'),
    stash: join(dir, 'stash'),
    acl: join(dir, 'kadm5.acl'),
    kdcLog: join(dir, 'kdc.log'),
    adminLog: join(dir, 'kadmin.log'),
  };
  const adminEnv = (): NodeJS.ProcessEnv => ({ ...cleanEnv(), KRB5_CONFIG: l.krb5Conf, KRB5_KDC_PROFILE: l.kdcConf });

  try {
    writeFileSync(l.acl, `*/admin@${realm} *\n`, { mode: 0o600 });
    let lastError = '';
    for (let attempt = 1; attempt <= START_ATTEMPTS; attempt += 1) {
      const port = await unusedPort();
      writeFileSync(l.krb5Conf, renderKrb5Conf(realm, port), { mode: 0o644 });
      writeFileSync(l.kdcConf, renderKdcConf(l, realm, port), { mode: 0o600 });
      if (attempt === 1) {
        const master = randomBytes(24).toString('base64url');
        const created = await run(bins.kdb5_util, ['-r', realm, 'create', '-s', '-P', master], adminEnv());
        if (created.code !== 0) throw new Error(`startKdc: kdb5_util create failed (${String(created.code)}): ${created.stderr.trim()}`);
      }
      rmSync(l.kdcLog, { force: true });
      // -n: stay in the foreground, so the child is the KDC and SIGTERM stops it. setpriv --pdeathsig
      // (which execs krb5kdc in place) stops it too when the test worker dies without calling close().
      const kdcArgs = ['-n', '-r', realm];
      const setpriv = findExecutable('setpriv', [], SBIN);
      const child = setpriv === undefined
        ? spawn(bins.krb5kdc, kdcArgs, { env: adminEnv(), stdio: ['ignore', 'pipe', 'pipe'] })
        : spawn(setpriv, ['--pdeathsig', 'TERM', '--', bins.krb5kdc, ...kdcArgs], { env: adminEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
      let output = '';
      const collect = (chunk: Buffer): void => {
        output = (output + chunk.toString('utf8')).slice(-OUTPUT_TAIL_BYTES);
      };
      child.stdout?.on('data', collect);
      child.stderr?.on('data', collect);
      child.on('error', (err) => collect(Buffer.from(`\n[spawn error] ${err.message}\n`)));
      registerLive(child, dir);

      const deadline = Date.now() + startTimeoutMs;
      let ready = false;
      while (Date.now() < deadline) {
        if (child.exitCode !== null || child.signalCode !== null) break;
        // The log line proves it is our krb5kdc that holds the port, not a thief that won the race.
        if (/commencing operation/i.test(tail(l.kdcLog)) && (await tryConnect(port, 500))) {
          ready = true;
          break;
        }
        await sleep(25);
      }
      if (ready && child.exitCode === null && child.signalCode === null) {
        return makeHandle(l, realm, port, child, bins, adminEnv);
      }
      const exited = child.exitCode !== null || child.signalCode !== null;
      await stopChild(child, 'krb5kdc').catch(() => undefined);
      forget(child);
      const text = `${output}\n${tail(l.kdcLog)}`.trim();
      lastError = exited
        ? `krb5kdc exited (code ${String(child.exitCode)}, signal ${String(child.signalCode)}) before listening on 127.0.0.1:${port}`
        : `krb5kdc did not accept connections on 127.0.0.1:${port} within ${startTimeoutMs} ms`;
      lastError += `\n--- krb5kdc output and log ---\n${text}`;
      if (!/address already in use|cannot bind/i.test(text)) break;
    }
    throw new Error(`startKdc: ${lastError}`);
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

/** process.env without inherited Kerberos variables (the machine's ccache or keytab must not leak in). */
function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!/^KRB5/.test(key)) env[key] = value;
  }
  return env;
}

function makeHandle(
  l: Layout,
  realm: string,
  port: number,
  child: ChildProcess,
  bins: { kadmin: string; kinit: string; klist: string },
  adminEnv: () => NodeJS.ProcessEnv,
): Kdc {
  let closing: Promise<void> | undefined;
  let keytabs = 0;
  const principal = (name: string): string => (name.includes('@') ? name : `${name}@${realm}`);

  const kadmin = async (query: string): Promise<string> => {
    // Queries go on stdin, not argv: a password never shows in `ps`.
    const result = await run(bins.kadmin, ['-r', realm], adminEnv(), `${query}\n`);
    // kadmin.local exits 0 even when a query fails; its errors go to stderr.
    // MIT reports failures as "<what> while <doing>" (e.g. "Principal or policy already exists while creating").
    const failed = result.code !== 0 || /\bwhile\b|error|not found|cannot|unable|invalid|already exists/i.test(result.stderr);
    if (failed) {
      const shown = query.replace(/-pw \S+/, '-pw ***');
      throw new Error(`kdc: kadmin.local "${shown}" failed (${String(result.code)}): ${result.stderr.trim()}`);
    }
    return result.stdout;
  };
  const newKeytab = (label: string): string => {
    keytabs += 1;
    return join(l.dir, `${label.replace(/[^A-Za-z0-9.-]/g, '_')}-${keytabs}.keytab`);
  };
  const checkPrincipal = (name: string): string => {
    const [local, at] = name.split('@', 2) as [string, string | undefined];
    assertName('principal', local);
    if (at !== undefined && at !== realm) throw new Error(`kdc: principal ${name} is not in realm ${realm}`);
    return principal(local);
  };

  const handle: Kdc = {
    realm,
    port,
    dir: l.dir,
    krb5Config: l.krb5Conf,
    env: (extra = {}) => ({ ...cleanEnv(), KRB5_CONFIG: l.krb5Conf, KRB5CCNAME: `FILE:${join(l.dir, 'default.ccache')}`, ...extra }),
    principal,
    async addService(spn) {
      const name = checkPrincipal(spn);
      await kadmin(`addprinc -randkey ${name}`);
      const keytab = newKeytab(spn.split('@')[0] ?? spn);
      await kadmin(`ktadd -k ${keytab} ${name}`);
      chmodSync(keytab, 0o600);
      return keytab;
    },
    async addUser(name, password, opts = {}) {
      const full = checkPrincipal(name);
      assertPassword(password);
      const life = opts.maxLifeSeconds;
      if (life !== undefined && (!Number.isInteger(life) || life < 1)) throw new Error(`kdc: maxLifeSeconds ${String(life)} is not a positive integer`);
      const maxlife = life === undefined ? '' : `-maxlife "${life} seconds" `;
      await kadmin(`addprinc ${maxlife}-pw ${password} ${full}`);
    },
    async userKeytab(name) {
      const full = checkPrincipal(name);
      const keytab = newKeytab(name.split('@')[0] ?? name);
      // -norandkey: export the current keys, so the user's password keeps working.
      await kadmin(`ktadd -norandkey -k ${keytab} ${full}`);
      chmodSync(keytab, 0o600);
      return keytab;
    },
    async kinit(user, password, ccachePath, opts = {}) {
      const full = checkPrincipal(user);
      const args = ['-c', `FILE:${ccachePath}`];
      const life = opts.lifetimeSeconds;
      if (life !== undefined) {
        if (!Number.isInteger(life) || life < 1) throw new Error(`kdc: lifetimeSeconds ${String(life)} is not a positive integer`);
        args.push('-l', `${life}s`);
      }
      args.push(full);
      const result = await run(bins.kinit, args, handle.env({ KRB5CCNAME: `FILE:${ccachePath}` }), `${password}\n`);
      if (result.code !== 0) throw new Error(`kdc: kinit ${full} failed (${String(result.code)}): ${result.stderr.trim()}`);
    },
    async ticketValid(ccachePath) {
      const endSeconds = await readCcacheEndTimes(ccachePath).catch(() => undefined);
      if (endSeconds !== undefined) {
        // MIT's init_sec_context refuses a ticket only when endtime < now (both whole seconds), and its
        // "now" is the client clock corrected by the KDC offset the ccache recorded at kinit
        // (kdc_timesync, on by default): on one machine that offset is 0 or -1 s, as the two clocks were
        // read either side of a second's edge. So a ticket counts as expired only a second later.
        const now = Math.floor(Date.now() / 1000);
        return endSeconds.some((end) => end + 1 >= now);
      }
      const result = await run(bins.klist, ['-s', '-c', `FILE:${ccachePath}`], handle.env({ KRB5CCNAME: `FILE:${ccachePath}` }));
      return result.code === 0;
    },
    async ticketExpiresAt(ccachePath) {
      const endSeconds = await readCcacheEndTimes(ccachePath);
      return endSeconds.length === 0 ? null : Math.max(...endSeconds) * 1000;
    },
    close: () => {
      closing ??= stopChild(child, 'krb5kdc').finally(() => {
        forget(child);
        rmSync(l.dir, { recursive: true, force: true });
      });
      return closing;
    },
  };
  return handle;
}

/**
 * End times (epoch seconds) of the real credentials in an MIT FILE ccache, format version 3 or 4 (big
 * endian; https://web.mit.edu/kerberos/krb5-latest/doc/formats/ccache_file_format.html). Configuration
 * entries (server realm `X-CACHECONF:`) are skipped. A missing file holds no credentials.
 */
export async function readCcacheEndTimes(ccachePath: string): Promise<number[]> {
  let buf: Buffer;
  try {
    buf = await readFile(ccachePath.replace(/^FILE:/, ''));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  let at = 0;
  const need = (n: number): void => {
    if (at + n > buf.length) throw new Error(`ccache ${ccachePath}: truncated at byte ${at}`);
  };
  const u8 = (): number => (need(1), buf.readUInt8((at += 1) - 1));
  const u16 = (): number => (need(2), buf.readUInt16BE((at += 2) - 2));
  const u32 = (): number => (need(4), buf.readUInt32BE((at += 4) - 4));
  const octets = (): Buffer => {
    const len = u32();
    need(len);
    at += len;
    return buf.subarray(at - len, at);
  };
  const principalRealm = (): string => {
    u32(); // name type
    const count = u32();
    const realm = octets().toString('latin1');
    for (let i = 0; i < count; i += 1) octets();
    return realm;
  };
  const version = u16();
  if (version !== 0x0503 && version !== 0x0504) throw new Error(`ccache ${ccachePath}: unsupported version 0x${version.toString(16)}`);
  if (version === 0x0504) {
    const headerLen = u16();
    need(headerLen);
    at += headerLen;
  }
  principalRealm(); // default principal
  const ends: number[] = [];
  while (at < buf.length) {
    principalRealm(); // client
    const serverRealm = principalRealm();
    u16(); // key enctype
    octets(); // key
    u32(); // authtime
    u32(); // starttime
    const endtime = u32();
    u32(); // renew_till
    u8(); // is_skey
    u32(); // ticket flags
    for (let n = u32(), i = 0; i < n; i += 1) (u16(), octets()); // addresses
    for (let n = u32(), i = 0; i < n; i += 1) (u16(), octets()); // authdata
    octets(); // ticket
    octets(); // second ticket
    if (!serverRealm.startsWith('X-CACHECONF:') && endtime > 0) ends.push(endtime);
  }
  return ends;
}
