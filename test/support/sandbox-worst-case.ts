// Owns the escape suite's fixtures: the review's worst case (a real `sluice start --config sluice.yaml`
// running from DIR, as the review started it, with its config, state, admin socket, every grant's socket
// and its audit file in the directory the command runs from), the host-side witnesses an escape would
// touch (an abstract socket, a UDP resolver, a victim process, a marker file, the caller's HOME), one
// run of test/support/sandbox-attacks.sh under `sluice run`, and its report. Never runs the script
// outside `sluice run`: it signals and ptrace-attaches the pids it is given.
import { expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import dgram from 'node:dgram';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import type { AuditRecordV1, DecisionRecordV1 } from '../../src/audit/index.js';
import { startHttpOrigin, type Origin } from './origins.js';
import { BIN, REPO_ROOT, asIdentity, callerEnv, startSluiceRun, track, type Identity, type RunResult } from './sandbox.js';
import { waitUntil, withTimeout } from './wait.js';

export const ATTACK_SCRIPT = fs.readFileSync(path.join(REPO_ROOT, 'test/support/sandbox-attacks.sh'), 'utf8');
export const SECRET_BODY = 'SECRET-LOOPBACK-ORIGIN';
/** The token format Sluice issues (a run-owned grant's token must never be visible inside). */
export const TOKEN_PATTERN = /sluice_[A-Za-z0-9_-]{43}/;

// The worst case of the review (findings 1-5): everything of Sluice's lies in the command's directory.

/** Secrets in the environment of whoever runs `sluice run` (finding 5); GRANT_B_TOKEN is grant b's real token. */
export const CALLER_SECRETS: Readonly<Record<string, string>> = {
  SLUICE_ADMIN_TOKEN: 'admin-secret-5e1f0c2a',
  GRANT_B_TOKEN: 'tok-b-secret-9d4e7b31',
  AWS_SECRET_ACCESS_KEY: 'aws-secret-wJalrXUtnFEMI-K7MDENG',
  GITHUB_TOKEN: 'ghp_secret0000111122223333444455556666',
};
export const VICTIM_SECRET = 'victim-secret-3c7a9f00';
export const HOME_SECRET = 'machine allowed.test login me password home-secret-77aa';

export interface WorstCase {
  /** DIR: sluice.yaml, state/{admin,a,b}.sock + ledger.json, audit.jsonl, work/, input/in.txt. */
  readonly dir: string;
  readonly configFile: string;
  readonly adminSocket: string;
  readonly aSocket: string;
  readonly bSocket: string;
  readonly ledgerFile: string;
  readonly auditFile: string;
  readonly configText: string;
  /** The real `sluice start --config sluice.yaml`, a child process running from DIR. */
  readonly sluice: SluiceProcess;
  /** What grant a (and a run-owned grant) may reach, by the name allowed.test. */
  readonly allowed: Origin;
  /** Grant b's loopback origin: the prize of finding 3. */
  readonly secret: Origin;
  /** Grant c's token-less dedicated TCP listener on the host's loopback (finding 12). */
  readonly dedicatedPort: number;
  readonly dns: { readonly port: number; readonly packets: number };
  readonly abstract: { readonly name: string; readonly connections: number };
  /** A host file outside DIR, world-readable: only the sandbox keeps the command from it. */
  readonly marker: string;
  /** The caller's HOME, with a .netrc in it. */
  readonly callerHome: string;
  /** Config reloads Sluice logged: each SIGHUP it received makes one (a reload, refused or failed). */
  readonly hupsReceived: number;
  /** Ids of the grants before the command ran: config a, b, c and one issued at run time. */
  readonly grantIds: readonly string[];
  close(): Promise<void>;
}

/** A grant as GET /v1/grants lists it (the fields the suite looks at). */
export interface ListedGrant {
  readonly id: string;
  readonly revokedAt: string | null;
}

/** `node bin/sluice.js start --config sluice.yaml`, started from DIR as a user starts it. */
export interface SluiceProcess {
  readonly pid: number;
  alive(): boolean;
  /** Its operational log (stderr, JSON lines) so far. */
  log(): string;
  /** GET /v1/grants through the admin socket. */
  listGrants(): Promise<ListedGrant[]>;
  /** Every record in the audit file as it is now (written in batches: see auditBarrier). */
  records(): AuditRecordV1[];
  /**
   * Sends one request that Sluice denies (no token, on the token listener) and waits, bounded, until its
   * decision is in the audit file: every record written before it is in the file then too. Returns
   * the file's length up to the end of that record's line.
   */
  auditBarrier(): Promise<number>;
  /** SIGTERM; SIGKILL of its process group if it has not exited within a bound. */
  stop(): Promise<void>;
}

/** The host's own requests that auditBarrier makes (http://b<n>.BARRIER_HOST/ on the token listener). */
export const BARRIER_HOST = 'audit-barrier.sluice-escape.test';
const BARRIER_TARGET = /^http:\/\/b\d+\.audit-barrier\.sluice-escape\.test\/$/;

/** A decision for one of the host's barrier requests: left out of what a run is judged by. */
export function isBarrierDecision(d: DecisionRecordV1): boolean {
  return d.listener === 'shared' && d.principal === null && BARRIER_TARGET.test(d.target);
}

const READY_TIMEOUT_MS = 20_000;
const BARRIER_TIMEOUT_MS = 5_000;
const STOP_TIMEOUT_MS = 5_000;

function startUdpRecorder(): Promise<{ socket: dgram.Socket; port: number; packets: () => number }> {
  const socket = dgram.createSocket('udp4');
  let packets = 0;
  socket.on('message', (msg, rinfo) => {
    packets += 1;
    // Answer like a resolver would (the query echoed with QR set), so an escape would also be seen inside.
    const reply = Buffer.from(msg);
    if (reply.length > 2) reply[2] = (reply[2] ?? 0) | 0x80;
    socket.send(reply, rinfo.port, rinfo.address);
  });
  return new Promise((resolve, reject) => {
    socket.once('error', reject);
    socket.bind(0, '127.0.0.1', () => resolve({ socket, port: socket.address().port, packets: () => packets }));
  });
}

function startAbstractServer(name: string): Promise<{ server: net.Server; connections: () => number }> {
  let connections = 0;
  const server = net.createServer((s) => {
    connections += 1;
    s.destroy();
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(`\0${name}`, () => resolve({ server, connections: () => connections }));
  });
}

/** One request over the admin socket: status and parsed JSON body. */
function adminRequest(socketPath: string, method: string, urlPath: string, body?: unknown): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request(
      { socketPath, method, path: urlPath, timeout: 5000, headers: data === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => {
          try {
            resolve({ status: res.statusCode ?? 0, body: text === '' ? null : JSON.parse(text) });
          } catch (error) {
            reject(new Error(`admin ${method} ${urlPath}: not JSON (${String(error)}): ${text.slice(0, 200)}`));
          }
        });
      },
    );
    req.once('error', reject);
    req.once('timeout', () => req.destroy(new Error(`admin ${method} ${urlPath}: no answer within 5000 ms`)));
    req.end(data);
  });
}

/** A proxy request without a token to the token listener: Sluice answers 407 and audits the decision. */
function deniedRequest(port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'GET', path: `http://${host}/`, headers: { host }, timeout: 5000 }, (res) => {
      res.resume();
      res.once('end', () => resolve(res.statusCode ?? 0));
    });
    req.once('error', reject);
    req.once('timeout', () => req.destroy(new Error(`request to the token listener: no answer within 5000 ms`)));
    req.end();
  });
}

interface LogLine {
  readonly msg?: string;
  readonly listener?: string;
  readonly address?: string;
  readonly admin?: string;
}

function logLines(text: string): LogLine[] {
  const lines: LogLine[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      lines.push(JSON.parse(line) as LogLine);
    } catch {
      // a partial line: the rest comes with the next chunk
    }
  }
  return lines;
}

const RELOAD_MESSAGE = /^(config reloaded|reload refused|reload failed)/;

/**
 * Starts `node bin/sluice.js start --config sluice.yaml` from `dir`, with `env` only, and waits
 * (bounded) until it has logged every listener and its admin API and the sockets are in place.
 */
async function startSluiceProcess(dir: string, env: Record<string, string>, sockets: readonly string[], listenerNames: readonly string[]): Promise<{ sluice: SluiceProcess; tcpPorts: Map<string, number> }> {
  const child = spawn(process.execPath, [BIN, 'start', '--config', 'sluice.yaml'], { cwd: dir, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  let stdout = '';
  child.stderr?.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  child.stdout?.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
  let exited: { code: number | null; signal: NodeJS.Signals | null } | null = null;
  const exit = new Promise<void>((resolve) =>
    child.once('exit', (code, signal) => {
      exited = { code, signal };
      resolve();
    }),
  );
  const killGroup = (): void => {
    try {
      if (child.pid !== undefined && exited === null) process.kill(-child.pid, 'SIGKILL');
    } catch {
      // gone already
    }
  };
  // Never outlive the worker, whatever happens to afterAll.
  process.once('exit', killGroup);
  const pid = child.pid;
  if (pid === undefined) throw new Error('sluice start: no pid');
  const describe = (): string => `exit ${JSON.stringify(exited)}; stderr: ${stderr.slice(0, 2000)} stdout: ${stdout.slice(0, 500)}`;

  try {
    await waitUntil(
      () => {
        if (exited !== null) throw new Error(`sluice start ended before it was ready: ${describe()}`);
        const lines = logLines(stderr);
        const listening = new Set(lines.filter((l) => l.msg === 'listening').map((l) => l.listener));
        return (
          listenerNames.every((n) => listening.has(n)) &&
          lines.some((l) => l.msg === 'admin API listening') &&
          sockets.every((s) => fs.existsSync(s) && fs.statSync(s).isSocket())
        );
      },
      { timeoutMs: READY_TIMEOUT_MS, label: 'sluice start: every listener, the admin API and the sockets' },
    );
  } catch (error) {
    killGroup();
    throw new Error(`${(error as Error).message}; ${describe()}`);
  }
  const tcpPorts = new Map<string, number>();
  for (const l of logLines(stderr)) {
    if (l.msg !== 'listening' || l.listener === undefined || l.address === undefined || l.address.startsWith('unix:')) continue;
    tcpPorts.set(l.listener, Number(l.address.slice(l.address.lastIndexOf(':') + 1)));
  }
  const adminSocket = sockets[0] ?? '';
  const auditFile = path.join(dir, 'audit.jsonl');
  const sharedPort = tcpPorts.get('shared') ?? 0;
  let barriers = 0;

  const sluice: SluiceProcess = {
    pid,
    alive: () => exited === null,
    log: () => stderr,
    async listGrants() {
      const res = await adminRequest(adminSocket, 'GET', '/v1/grants');
      if (res.status !== 200) throw new Error(`GET /v1/grants: ${res.status} ${JSON.stringify(res.body)}`);
      return (res.body as { grants: ListedGrant[] }).grants;
    },
    records: () => (fs.existsSync(auditFile) ? auditRecordsFrom(auditFile, 0) : []),
    async auditBarrier() {
      barriers += 1;
      const host = `b${barriers}.${BARRIER_HOST}`;
      const status = await deniedRequest(sharedPort, host);
      if (status !== 407) throw new Error(`audit barrier: expected 407 from the token listener, got ${status}`);
      let end = -1;
      await waitUntil(
        () => {
          const text = fs.existsSync(auditFile) ? fs.readFileSync(auditFile, 'utf8') : '';
          const at = text.indexOf(`"http://${host}/"`);
          if (at === -1) return false;
          const newline = text.indexOf('\n', at);
          end = Buffer.byteLength(newline === -1 ? text : text.slice(0, newline + 1));
          return true;
        },
        { timeoutMs: BARRIER_TIMEOUT_MS, label: `audit record of ${host} in ${auditFile}` },
      );
      return end;
    },
    async stop() {
      if (exited === null) {
        process.kill(pid, 'SIGTERM');
        const termed = await Promise.race([exit.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), STOP_TIMEOUT_MS))]);
        if (!termed) {
          killGroup();
          await withTimeout(exit, STOP_TIMEOUT_MS, `sluice start (pid ${pid}) to exit after SIGKILL`);
        }
      }
      process.off('exit', killGroup);
    },
  };
  return { sluice, tcpPorts };
}

/** Config reloads in a Sluice log: one per SIGHUP it received. */
export function reloadsIn(log: string): number {
  return logLines(log).filter((l) => l.msg !== undefined && RELOAD_MESSAGE.test(l.msg)).length;
}

export async function startWorstCase(): Promise<WorstCase> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-escape-'));
  const hostDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-escape-host-'));
  const callerHome = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-escape-home-'));
  const state = path.join(dir, 'state');
  fs.mkdirSync(state, { mode: 0o700 });
  fs.mkdirSync(path.join(dir, 'work'));
  fs.mkdirSync(path.join(dir, 'input'));
  fs.writeFileSync(path.join(dir, 'input/in.txt'), 'input');
  fs.chmodSync(hostDir, 0o755);
  const marker = path.join(hostDir, 'host-marker');
  fs.writeFileSync(marker, 'HOST-MARKER\n', { mode: 0o644 });
  fs.writeFileSync(path.join(callerHome, '.netrc'), `${HOME_SECRET}\n`, { mode: 0o600 });
  const auditFile = path.join(dir, 'audit.jsonl');

  const allowed = await startHttpOrigin();
  const secret = await startHttpOrigin({ handler: (_req, res) => void res.writeHead(200, { 'content-type': 'text/plain' }).end(SECRET_BODY) });
  const dns = await startUdpRecorder();
  const abstractName = `sluice-escape-${process.pid}-${Math.random().toString(36).slice(2)}`;
  const abstract = await startAbstractServer(abstractName);
  // The review's config for findings 1-4 (docs/reviews/security-2026-12.md), as a user writes it in DIR: every path relative to DIR, where
  // `sluice start` runs; test names resolved by dns.hosts.
  const config = {
    listeners: [
      { name: 'shared', listen: '127.0.0.1:0', identify: 'token' },
      { name: 'c-tcp', listen: '127.0.0.1:0', grant: 'c' },
      { name: 'a-sock', listen: 'unix:./state/a.sock', grant: 'a' },
      { name: 'b-sock', listen: 'unix:./state/b.sock', grant: 'b' },
    ],
    admin: { listen: 'unix:./state/admin.sock' },
    state: './state',
    audit: { file: './audit.jsonl' },
    dns: { hosts: { 'allowed.test': ['127.0.0.1'] } },
    grants: [
      { id: 'a', destinations: [`http://allowed.test:${allowed.port}`], allowAddressClasses: ['loopback'] },
      { id: 'b', tokenEnv: 'GRANT_B_TOKEN', destinations: [`http://127.0.0.1:${secret.port}`], allowAddressClasses: ['loopback'] },
      { id: 'c', destinations: [`http://127.0.0.1:${secret.port}`], allowAddressClasses: ['loopback'] },
    ],
  };
  const configFile = path.join(dir, 'sluice.yaml');
  const configText = stringify(config);
  fs.writeFileSync(configFile, configText, { mode: 0o600 });
  const adminSocket = path.join(state, 'admin.sock');
  const aSocket = path.join(state, 'a.sock');
  const bSocket = path.join(state, 'b.sock');
  const ledgerFile = path.join(state, 'ledger.json');
  const closeFixtures = async (): Promise<void> => {
    await allowed.close();
    await secret.close();
    dns.socket.close();
    await new Promise<void>((resolve) => abstract.server.close(() => resolve()));
    for (const d of [dir, hostDir, callerHome]) fs.rmSync(d, { recursive: true, force: true });
  };
  let started: Awaited<ReturnType<typeof startSluiceProcess>>;
  try {
    started = await startSluiceProcess(
      dir,
      { PATH: '/usr/local/bin:/usr/bin:/bin', LANG: 'C.UTF-8', GRANT_B_TOKEN: CALLER_SECRETS['GRANT_B_TOKEN'] ?? '' },
      [adminSocket, aSocket, bSocket],
      config.listeners.map((l) => l.name),
    );
  } catch (error) {
    await closeFixtures();
    throw error;
  }
  const { sluice, tcpPorts } = started;
  const dedicatedPort = tcpPorts.get('c-tcp');
  try {
    if (dedicatedPort === undefined || !tcpPorts.has('shared')) throw new Error(`no TCP port for c-tcp or shared in the log: ${sluice.log()}`);
    // A grant issued at run time, so that the ledger file exists and holds something worth reading.
    const issued = await adminRequest(adminSocket, 'POST', '/v1/grants', { destinations: ['https://runtime.test'], generation: 'setup' });
    if (issued.status !== 201) throw new Error(`setup grant refused: ${issued.status} ${JSON.stringify(issued.body)}`);
    // And one audited decision, so that the audit file holds something worth reading too.
    await sluice.auditBarrier();
    await waitUntil(() => fs.existsSync(ledgerFile) && fs.statSync(ledgerFile).size > 0, { timeoutMs: BARRIER_TIMEOUT_MS, label: `${ledgerFile} written` });
  } catch (error) {
    await sluice.stop();
    await closeFixtures();
    throw error;
  }
  const grantIds = (await sluice.listGrants()).map((g) => g.id);
  return {
    dir,
    configFile,
    adminSocket,
    aSocket,
    bSocket,
    ledgerFile,
    auditFile,
    configText,
    sluice,
    allowed,
    secret,
    dedicatedPort,
    dns: {
      port: dns.port,
      get packets() {
        return dns.packets();
      },
    },
    abstract: {
      name: abstractName,
      get connections() {
        return abstract.connections();
      },
    },
    marker,
    callerHome,
    get hupsReceived() {
      return reloadsIn(sluice.log());
    },
    grantIds,
    close: async () => {
      await sluice.stop();
      await closeFixtures();
    },
  };
}

/** A host process of the caller's own uid with a secret in its environment: what a sandbox must not signal, trace or read. */
export function startVictim(identity: Identity): ChildProcess {
  const [file, args] = asIdentity(identity, ['/bin/sleep', '300']);
  const child = spawn(file, args, { env: { PATH: '/usr/bin:/bin', VICTIM_SECRET }, detached: true, stdio: 'ignore' });
  track(child);
  return child;
}

export function isAlive(child: ChildProcess): boolean {
  return child.exitCode === null && child.signalCode === null;
}

function hostNameservers(): string[] {
  try {
    const text = fs.readFileSync('/etc/resolv.conf', 'utf8');
    return [...text.matchAll(/^\s*nameserver\s+(\S+)/gm)].map((m) => m[1] ?? '').filter((a) => net.isIP(a) !== 0);
  } catch {
    return [];
  }
}
/** The host's resolvers, each the target of one direct-DNS attempt (`dns-host-resolver-<address>`). */
export const HOST_NAMESERVERS = hostNameservers();

function hostNamespaces(): string {
  return ['user', 'pid', 'mnt', 'ipc', 'uts', 'net'].map((ns) => fs.readlinkSync(`/proc/self/ns/${ns}`)).join(' ');
}

export interface AttackRun {
  readonly run: RunResult;
  readonly report: Report;
  /** Sluice's audited decisions from the start of the run until after it ended (the host's barrier requests left out). */
  readonly decisions: readonly DecisionRecordV1[];
}

/**
 * Runs the attack script once under `sluice run ARGS`, as `identity`, from `cwd`, with the caller's
 * secrets in its environment and the T_* inputs passed in through `--env`.
 */
export async function runAttacks(w: WorstCase, identity: Identity, victim: ChildProcess, opts: { groups: readonly string[]; args: readonly string[]; cwd?: string }): Promise<AttackRun> {
  const inputs: Record<string, string> = {
    T_GROUPS: opts.groups.join(' '),
    T_DIR: w.dir,
    T_PORT: '3128',
    T_SLUICE_PID: String(w.sluice.pid),
    T_VICTIM_PID: String(victim.pid ?? 0),
    T_SECRET_PORT: String(w.secret.port),
    T_ALLOWED_HOST: 'allowed.test',
    T_ALLOWED_PORT: String(w.allowed.port),
    T_DEDICATED_PORT: String(w.dedicatedPort),
    T_DNS_PORT: String(w.dns.port),
    T_HOST_NAMESERVERS: HOST_NAMESERVERS.join(' '),
    T_ABSTRACT: w.abstract.name,
    T_MARKER: w.marker,
    T_CALLER_HOME: w.callerHome,
    T_NODE: fs.realpathSync(process.execPath),
    T_HOST_NS: hostNamespaces(),
    T_SECRET_NAMES: Object.keys(CALLER_SECRETS).join(' '),
  };
  const envFlags = Object.keys(inputs).flatMap((name) => ['--env', name]);
  const env = callerEnv(w.callerHome, { ...CALLER_SECRETS, ...inputs });
  const from = await w.sluice.auditBarrier();
  const started = startSluiceRun([...opts.args, ...envFlags, '--', '/bin/sh', '-c', ATTACK_SCRIPT, 'sandbox-attacks'], {
    cwd: opts.cwd ?? w.dir,
    env,
    identity,
    timeoutMs: 90_000,
  });
  const run = await started.result;
  // Every record of the run is in the audit file once a request made after the run is.
  await w.sluice.auditBarrier();
  const decisions = auditRecordsFrom(w.auditFile, from).filter((r): r is DecisionRecordV1 => r.kind === 'decision' && !isBarrierDecision(r));
  return { run, report: parseReport(run), decisions };
}

function auditRecordsFrom(file: string, offset: number): AuditRecordV1[] {
  return fs
    .readFileSync(file)
    .subarray(offset)
    .toString('utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as AuditRecordV1);
}

// ---------------------------------------------------------------------------------------------------
// The script's report.

export interface Report {
  /** name → "BLOCKED …", "ESCAPED …", "ERROR …", "TRIED …" */
  readonly attacks: ReadonlyMap<string, string>;
  /** name → "OK" or "FAIL …" */
  readonly checks: ReadonlyMap<string, string>;
  readonly completed: boolean;
  /** For failure messages: how the run ended. */
  readonly summary: string;
}

export function parseReport(run: RunResult): Report {
  const { verdicts: attacks, checks } = reportLines(run.stdout, 'ATTACK');
  const summary = `sluice run exited ${run.code ?? run.signal}; stderr: ${run.stderr.trim().slice(0, 600) || '(empty)'}`;
  return { attacks, checks, completed: /^END$/m.test(run.stdout), summary };
}

/** The `<KIND> name verdict…` and `CHECK name verdict…` lines of a script's output, by name. */
export function reportLines(stdout: string, kind: string): { readonly verdicts: Map<string, string>; readonly checks: Map<string, string> } {
  const verdicts = new Map<string, string>();
  const checks = new Map<string, string>();
  for (const line of stdout.split('\n')) {
    const m = /^(\S+) (\S+) (.*)$/.exec(line);
    if (m === null || (m[1] !== kind && m[1] !== 'CHECK')) continue;
    (m[1] === kind ? verdicts : checks).set(m[2] ?? '', m[3] ?? '');
  }
  return { verdicts, checks };
}

/** "<name> <verdict …>" for an attack, so that a failing expectation prints the whole line. */
export function attackLine(report: Report, name: string): string {
  return `ATTACK ${name} ${report.attacks.get(name) ?? `(no line: ${report.summary})`}`;
}

export function checkLine(report: Report, name: string): string {
  return `CHECK ${name} ${report.checks.get(name) ?? `(no line: ${report.summary})`}`;
}

/** The checks every run must pass, or its BLOCKED lines prove nothing (a tool was missing, --env failed). */
export const PREFLIGHT_CHECKS = [
  'tool-curl',
  'tool-timeout',
  'tool-nsenter',
  'tool-unshare',
  'tool-kill',
  'tool-cat',
  'tool-python3',
  'env-passthrough',
  'tmp-writable',
  ...['HTTP_PROXY', 'HTTPS_PROXY', 'ALL_PROXY', 'http_proxy', 'https_proxy', 'all_proxy', 'NO_PROXY', 'no_proxy'].map((v) => `proxy-env-${v}`),
];

/** Every secret value the caller or a victim holds, for a search of everything the command printed. */
export function leakedSecrets(text: string): string[] {
  const leaked = [...Object.values(CALLER_SECRETS), VICTIM_SECRET, HOME_SECRET].filter((s) => text.includes(s));
  const token = TOKEN_PATTERN.exec(text);
  return token === null ? leaked : [...leaked, token[0]];
}

/** The checks every attack run starts with: the script ran to its end, confined, and every attempt could be made. */
export function itRanTheWholeScript(attack: () => AttackRun): void {
  it('runs the whole script confined and returns its exit status', () => {
    expect(attack().report.summary).toContain('exited 0');
    expect(attack().report.completed).toBe(true);
  });

  it.each(PREFLIGHT_CHECKS)('can make the attempts: %s', (name) => {
    expect(checkLine(attack().report, name)).toBe(`CHECK ${name} OK`);
  });
}
