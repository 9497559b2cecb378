// Owns the escape suite's fixtures: the review's worst case (Sluice's config, state, admin socket and
// every grant's socket in the directory the command runs from), the host-side witnesses an escape would
// touch (an abstract socket, a UDP resolver, a victim process, a marker file, the caller's HOME), one
// run of test/support/sandbox-attacks.sh under `sluice run`, and its report. Never runs the script
// outside `sluice run`: it signals and ptrace-attaches the pids it is given.
import { spawn, type ChildProcess } from 'node:child_process';
import dgram from 'node:dgram';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { startHttpOrigin, type Origin } from './origins.js';
import { startSluice, tableLookup, type TestSluice } from './sluice.js';
import { REPO_ROOT, asIdentity, callerEnv, startSluiceRun, track, type Identity, type RunResult } from './sandbox.js';

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
  readonly sluice: TestSluice;
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
  readonly hupsReceived: number;
  /** Ids of the grants before the command ran: config a, b, c and one issued at run time. */
  readonly grantIds: readonly string[];
  close(): Promise<void>;
}

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
  // The in-process Sluice audits into memory; this file stands for the one `sluice start` would write.
  fs.writeFileSync(auditFile, '{"v":1,"kind":"decision","principal":"b","destination":"127.0.0.1:1"}\n', { mode: 0o600 });

  const allowed = await startHttpOrigin();
  const secret = await startHttpOrigin({ handler: (_req, res) => void res.writeHead(200, { 'content-type': 'text/plain' }).end(SECRET_BODY) });
  const dns = await startUdpRecorder();
  const abstractName = `sluice-escape-${process.pid}-${Math.random().toString(36).slice(2)}`;
  const abstract = await startAbstractServer(abstractName);
  const config = {
    listeners: [
      { name: 'c-tcp', listen: '127.0.0.1:0', grant: 'c' },
      { name: 'a-sock', listen: `unix:${state}/a.sock`, grant: 'a' },
      { name: 'b-sock', listen: `unix:${state}/b.sock`, grant: 'b' },
    ],
    admin: { listen: `unix:${state}/admin.sock` },
    state,
    audit: { file: auditFile },
    grants: [
      { id: 'a', destinations: [`http://allowed.test:${allowed.port}`], allowAddressClasses: ['loopback'] },
      { id: 'b', tokenEnv: 'GRANT_B_TOKEN', destinations: [`http://127.0.0.1:${secret.port}`], allowAddressClasses: ['loopback'] },
      { id: 'c', destinations: [`http://127.0.0.1:${secret.port}`], allowAddressClasses: ['loopback'] },
    ],
  };
  const configFile = path.join(dir, 'sluice.yaml');
  const configText = stringify(config);
  fs.writeFileSync(configFile, configText, { mode: 0o600 });
  const sluice = await startSluice(config, {
    lookup: tableLookup({ 'allowed.test': ['127.0.0.1'] }),
    env: { GRANT_B_TOKEN: CALLER_SECRETS['GRANT_B_TOKEN'] ?? '' },
  });
  // A grant issued at run time, so that the ledger file exists and holds something worth reading.
  const issued = await sluice.app.control.issueGrant({ destinations: ['https://runtime.test'], generation: 'setup' });
  if (!issued.ok) throw new Error(`setup grant refused: ${JSON.stringify(issued)}`);
  let hups = 0;
  const onHup = (): void => void (hups += 1);
  process.on('SIGHUP', onHup);
  return {
    dir,
    configFile,
    adminSocket: path.join(state, 'admin.sock'),
    aSocket: path.join(state, 'a.sock'),
    bSocket: path.join(state, 'b.sock'),
    ledgerFile: path.join(state, 'ledger.json'),
    auditFile,
    configText,
    sluice,
    allowed,
    secret,
    dedicatedPort: sluice.port,
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
      return hups;
    },
    grantIds: sluice.app.control.listGrants().map((g) => g.id),
    close: async () => {
      process.off('SIGHUP', onHup);
      await sluice.close();
      await allowed.close();
      await secret.close();
      dns.socket.close();
      await new Promise<void>((resolve) => abstract.server.close(() => resolve()));
      for (const d of [dir, hostDir, callerHome]) fs.rmSync(d, { recursive: true, force: true });
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
    T_SLUICE_PID: String(process.pid),
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
    T_HOST_NS: hostNamespaces(),
    T_SECRET_NAMES: Object.keys(CALLER_SECRETS).join(' '),
  };
  const envFlags = Object.keys(inputs).flatMap((name) => ['--env', name]);
  const env = callerEnv(w.callerHome, { ...CALLER_SECRETS, ...inputs });
  const started = startSluiceRun([...opts.args, ...envFlags, '--', '/bin/sh', '-c', ATTACK_SCRIPT, 'sandbox-attacks'], {
    cwd: opts.cwd ?? w.dir,
    env,
    identity,
    timeoutMs: 90_000,
  });
  const run = await started.result;
  return { run, report: parseReport(run) };
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
  const attacks = new Map<string, string>();
  const checks = new Map<string, string>();
  for (const line of run.stdout.split('\n')) {
    const m = /^(ATTACK|CHECK) (\S+) (.*)$/.exec(line);
    if (m === null) continue;
    (m[1] === 'ATTACK' ? attacks : checks).set(m[2] ?? '', m[3] ?? '');
  }
  const summary = `sluice run exited ${run.code ?? run.signal}; stderr: ${run.stderr.trim().slice(0, 600) || '(empty)'}`;
  return { attacks, checks, completed: /^END$/m.test(run.stdout), summary };
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
