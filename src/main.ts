// The process shell: argv, config loading, signals and exit codes. The only file that touches process.
// Modules load per command (dynamic import): `sluice run`, `sluice grant` and `sluice watch` start without loading the
// proxy, its config parser or its HTTP client, so a short confined command starts fast.
import { Command, InvalidArgumentError } from 'commander';
import type { Config, ConfigIssue } from './config/index.js';
import type { SluiceApp } from './app.js';
import type { ProxyRuntime } from './proxy/index.js';
import type { GrantIssueFlags } from './cli/index.js';
import fs from 'node:fs';
import path from 'node:path';
import tty from 'node:tty';
import { fileURLToPath } from 'node:url';

const EXIT_CONFIG = 2;

let versionRead: string | undefined;
/**
 * The version in Sluice's package.json, read once: the nearest package.json named `sluice` above this
 * file (src/main.ts under vitest, dist/main.js from bin/sluice.js, in a checkout or an installed package).
 */
function sluiceVersion(): string {
  versionRead ??= readVersion();
  return versionRead;
}

function readVersion(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let depth = 0; depth < 4; depth++) {
    try {
      const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as { name?: unknown; version?: unknown };
      if (pkg.name === 'sluice' && typeof pkg.version === 'string') return pkg.version;
    } catch {
      // none here (or unreadable): look one directory up
    }
    const parent = path.dirname(dir);
    if (parent === dir) break;
    dir = parent;
  }
  return 'unknown';
}

function printIssues(file: string, issues: readonly ConfigIssue[]): void {
  process.stderr.write(`${file}: ${issues.length} error(s)\n`);
  for (const issue of issues) process.stderr.write(`  ${issue.path}: ${issue.message}\n`);
}

async function loadOrExit(file: string): Promise<Config> {
  const { loadConfig } = await import('./config/index.js');
  const loaded = await loadConfig(file, process.cwd());
  if (!loaded.ok) {
    printIssues(file, loaded.issues);
    process.exit(EXIT_CONFIG);
  }
  return loaded.config;
}

/**
 * The one validation `check-config` and `start` share (issue 17, item 3): the schema, the cross-checks
 * and the host checks, every error of the file in one pass, each with its key path; exit 2 on any.
 */
async function loadCheckedOrExit(file: string): Promise<Config> {
  const { loadCheckedConfig } = await import('./app.js');
  const checked = await loadCheckedConfig(file, { env: process.env, cwd: process.cwd() });
  if (!checked.ok) {
    printIssues(file, checked.issues);
    process.exit(EXIT_CONFIG);
  }
  return checked.config;
}

/** The V8 flag `sluice start` runs with (ADR 0021): a 16 MB young generation. */
const YOUNG_GENERATION_FLAG = '--min-semi-space-size=16';
/** `SLUICE_GC_FLAGS=off` starts with V8's own defaults. */
const GC_FLAGS_OPT_OUT = 'SLUICE_GC_FLAGS';

/** The node flags this process was started with that set `names`, in `--a-b` spelling (V8 also reads `--a_b`). */
function gcFlagsGiven(names: readonly string[]): string[] {
  return process.execArgv.map((a) => a.replace(/_/g, '-')).filter((a) => names.some((n) => a === n || a.startsWith(`${n}=`) || a === `--no-${n.slice(2)}`));
}

type Execve = (file: string, args: readonly string[], env: NodeJS.ProcessEnv) => never;

/**
 * Sizes the young generation (ADR 0021) unless the operator did (or SLUICE_GC_FLAGS=off), and returns the GC
 * flags in effect, for the started line. V8 sizes it when it creates the isolate, so the flag needs a new
 * process image: process.execve (Node >= 22.15) keeps the pid, stdio and signals of whoever started us.
 * Node 20 has no execve and keeps V8's defaults. Incremental marking stays on: atomic full collections
 * deoptimized the hot path at every one (ADR 0021, amendment of 2026-12-05).
 */
function applyGcFlags(): readonly string[] {
  // --no-memory-reducer is the operator's to give: Sluice cannot set it on Node 20, and Node 24 did not need
  // it (ADR 0021, amendment). Reported, never added.
  const reported = ['--min-semi-space-size', '--max-semi-space-size', '--incremental-marking', '--memory-reducer'];
  if (process.env[GC_FLAGS_OPT_OUT] === 'off') return gcFlagsGiven(reported);
  const execve = (process as unknown as { execve?: Execve }).execve;
  if (gcFlagsGiven(['--min-semi-space-size', '--max-semi-space-size']).length === 0 && typeof execve === 'function') {
    try {
      execve(process.execPath, [process.execPath, YOUNG_GENERATION_FLAG, ...process.execArgv, ...process.argv.slice(1)], process.env);
    } catch {
      // Refused (a seccomp filter, a deleted binary): start as we are, with V8's default young generation.
    }
  }
  return gcFlagsGiven(reported);
}

async function runStart(options: { config: string }): Promise<void> {
  // Before anything allocates: the scavenge p99 of issue 26 is V8 scheduling.
  const gcFlags = applyGcFlags();
  const config = await loadCheckedOrExit(options.config);
  const { startApp, startedLine } = await import('./app.js');
  const { ProxyError } = await import('./core/index.js');
  let app: SluiceApp;
  try {
    // Windows has no uids (and stat reports 0 there).
    app = await startApp(config, { env: process.env, cwd: process.cwd(), uid: process.geteuid?.() ?? 0 });
  } catch (error) {
    if (error instanceof ProxyError && error.code === 'ERR_CONFIG_INVALID') {
      process.stderr.write(`${options.config}: invalid\n${error.message.replace(/^/gm, '  ')}\n`);
      process.exit(EXIT_CONFIG);
    }
    // The shared ledger store cannot be used: never start unable to learn revocations (docs/fleet.md).
    // Or an address cannot be listened on (in use, privileged): a host condition, not a config error, so 1.
    if (error instanceof ProxyError && (error.code.startsWith('ERR_LEDGER_') || error.code === 'ERR_LISTEN_REFUSED')) {
      process.stderr.write(`sluice start: ${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
  const log = app.runtime.log;
  // One connection's fault must not take every principal's network down: log it and keep serving.
  // Handlers already own their sockets; this is the last line, and every occurrence is a bug to fix.
  process.on('uncaughtException', (error) => log.error({ err: error }, 'uncaught exception; continuing'));
  process.on('unhandledRejection', (reason) => log.error({ err: reason }, 'unhandled rejection; continuing'));
  for (const l of app.listeners) log.info({ listener: l.name, address: l.address }, 'listening');
  if (app.adminAddress !== null) log.info({ admin: app.adminAddress }, 'admin API listening');
  if (app.metricsAddress !== null) log.info({ metrics: app.metricsAddress }, 'metrics listening');
  const started = startedLine(app, options.config, sluiceVersion(), process.cwd());
  log.info({ ...started.fields, gcFlags }, started.msg);
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    log.info({ signal, drainTimeoutMs: config.admin.drainTimeoutMs }, 'shutting down: no new connections, draining live ones');
    app.close(config.admin.drainTimeoutMs).then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGHUP', () => {
    // The app logs the outcome (applied, or refused with its issues), as it does for POST /v1/reload.
    app.control.reload().catch((error: unknown) => log.error({ err: error }, 'reload failed, keeping the running config'));
  });
}

async function runCheckConfig(file: string): Promise<void> {
  const config = await loadCheckedOrExit(file);
  // Beyond the shared checks, check-config loads the PAC once: start runs without one (every PAC hop fails closed).
  const { buildRuntime } = await import('./app.js');
  const built = await buildRuntime(config, { env: process.env, log: silentLog, audit: nullSink });
  if (!built.ok) {
    printIssues(file, built.issues);
    process.exit(EXIT_CONFIG);
  }
  await closeRuntime(built.value.runtime);
  if (built.value.pacError !== null) {
    printIssues(file, [{ path: 'route.pac', message: built.value.pacError }]);
    process.exit(EXIT_CONFIG);
  }
  process.stdout.write(`${file}: ok (${config.listeners.length} listener(s), ${config.grants.length} grant(s), route ${config.route.mode})\n`);
}

/** Exit 0 on allow, 1 on deny, 2 on bad input: an unreadable config, a malformed target, an unknown grant. */
async function runExplain(target: string, options: { config: string; grant: string; json?: boolean }): Promise<void> {
  const config = await loadOrExit(options.config);
  const { buildRuntime } = await import('./app.js');
  const { chooseGrant, explain, exitCodeOf, formatExplanation } = await import('./explain/index.js');
  const { callAdmin } = await import('./cli/index.js');
  const listen = config.admin.listen;
  const admin = listen === undefined ? undefined : listen.startsWith('unix:') ? listen : `http://${listen}`;
  // A running instance knows run-time grants and revocations; the token for a TCP admin API comes from the environment, never argv.
  const choice = await chooseGrant({
    grantId: options.grant,
    configFile: options.config,
    admin,
    ask: (adminPath) => callAdmin(admin ?? '', process.env['SLUICE_ADMIN_TOKEN'], { method: 'GET', path: adminPath }),
  });
  if (choice.warning !== null) process.stderr.write(`sluice explain: ${choice.warning}\n`);
  const built = await buildRuntime(config, { env: process.env, log: silentLog, audit: nullSink });
  if (!built.ok) {
    printIssues(options.config, built.issues);
    process.exit(EXIT_CONFIG);
  }
  const result = await explain(built.value.runtime, options.grant, target, choice);
  await closeRuntime(built.value.runtime);
  process.stdout.write(options.json === true ? `${JSON.stringify(result)}\n` : formatExplanation(result));
  if (result.badInput !== null) process.stderr.write(`sluice explain: ${result.badInput}\n`);
  process.exitCode = exitCodeOf(result);
}

async function closeRuntime(runtime: ProxyRuntime): Promise<void> {
  runtime.routes.close();
  await runtime.forwardAgent.close();
  await runtime.upstreamAgent.close();
  await runtime.boundUpstreams.close();
}

const silentLog = { info: () => undefined, warn: () => undefined, error: () => undefined };
const nullSink = { write: () => undefined, flush: () => Promise.resolve() };

function nonEmpty(value: string): string {
  if (value.trim() === '') throw new InvalidArgumentError('must not be empty');
  return value;
}

const program = new Command('sluice').description('Egress mediation proxy').version(sluiceVersion()).showHelpAfterError();
program.command('start').description('run the proxy').requiredOption('--config <file>', 'config file (YAML)').action(runStart);
program.command('check-config').description('validate a config file; exit 2 on errors').argument('<file>').action(runCheckConfig);
program
  .command('explain')
  .description('print the decision for a grant and a target without connecting')
  .requiredOption('--config <file>', 'config file (YAML)')
  .requiredOption('--grant <id>', 'grant id', nonEmpty)
  .option('--json', 'print the decision as JSON')
  .argument('<target>', 'https://host[:port], http://host[:port]/path, or host:port')
  // A usage error is bad input (exit 2), never 1: scripts read 1 as "denied".
  .exitOverride((error) => process.exit(error.exitCode === 0 ? 0 : EXIT_CONFIG))
  .action(runExplain);

const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

/** The admin address: --admin, else the config's admin.listen, else the default socket. */
async function adminAddress(options: { admin?: string; config?: string }): Promise<string> {
  if (options.admin !== undefined) return options.admin;
  if (options.config !== undefined) {
    const config = await loadOrExit(options.config);
    if (config.admin.listen !== undefined) return config.admin.listen.startsWith('unix:') ? config.admin.listen : `http://${config.admin.listen}`;
  }
  return `unix:${path.resolve(process.cwd(), 'state/admin.sock')}`;
}

const output = { stdout: (s: string) => void process.stdout.write(s), stderr: (s: string) => void process.stderr.write(s) };

async function runGrant(action: 'issue' | 'revoke' | 'list' | 'show' | 'rotate', id: string | undefined, options: Record<string, unknown>): Promise<void> {
  const { parseGrantIssueOptions, runGrantCommand } = await import('./cli/index.js');
  let spec: object | undefined;
  if (action === 'issue') {
    try {
      spec = parseGrantIssueOptions({ ...(options as GrantIssueFlags), json: options['spec'] as string | undefined, cwd: process.cwd() });
    } catch (error) {
      process.stderr.write(`sluice grant issue: ${(error as Error).message}\n`);
      process.exitCode = 2;
      return;
    }
  }
  process.exitCode = await runGrantCommand(
    {
      action,
      admin: await adminAddress(options as { admin?: string; config?: string }),
      // The admin token for a TCP admin listener comes from the environment, never from argv (ps shows argv).
      adminToken: process.env['SLUICE_ADMIN_TOKEN'],
      id,
      generation: options['generation'] as string | undefined,
      spec,
      json: options['json'] === true,
      graceMs: options['graceMs'] as string | undefined,
    },
    output,
  );
}

const grant = program.command('grant').description("issue, revoke and list grants through the running proxy's admin socket");
const adminOptions = (cmd: Command): Command =>
  cmd
    .option('--admin <address>', 'admin socket (unix:/path) or http://host:port; token from SLUICE_ADMIN_TOKEN')
    .option('--config <file>', 'take the admin address from this config file')
    .option('--json', 'print JSON');
/** The grant flags of `grant issue` and of `run --destination` (the run-owned grant). */
const grantSpecOptions = (cmd: Command): Command =>
  cmd
    .option('--destination <rule>', 'destination rule, repeatable', collect)
    .option('--unrestricted', 'any destination (address classes still apply)')
    .option('--allow-class <class>', 'extra address class, repeatable', collect)
    .option('--allow-address <cidr>', 'extra CIDR, repeatable', collect)
    .option('--generation <label>', 'generation label (revoke them together)')
    .option('--expires-at <iso8601>', 'expiry time')
    .option('--max-concurrent <n>', 'concurrent connections')
    .option('--max-bytes <n>', 'bytes, both directions')
    .option('--ask-timeout-ms <ms>', 'hold a destination no rule names and ask the supervisor (sluice watch --ask) for up to ms');
grantSpecOptions(adminOptions(grant.command('issue').description('issue a grant; prints its id and token (shown only once)')))
  .option('--listen <address>', 'open a dedicated listener (unix:/path or 127.0.0.1:port)')
  .option('--client-cert-sha256 <hex>', 'the client certificate (SHA-256 of its DER) that identifies the grant on an identify: certificate listener')
  .option('--client-cert-uri <uri>', 'or one of its URI SANs (e.g. spiffe://example.org/agent)')
  .option('--spec <json>', 'the whole grant as JSON; flags override its fields')
  .action((options: Record<string, unknown>) => runGrant('issue', undefined, options));
adminOptions(grant.command('revoke').description('revoke a grant, or a whole generation').argument('[id]'))
  .option('--generation <label>', 'revoke every grant of this generation')
  .action((id: string | undefined, options: Record<string, unknown>) => runGrant('revoke', id, options));
adminOptions(grant.command('list').description('list grants (never tokens)')).action((options: Record<string, unknown>) => runGrant('list', undefined, options));
adminOptions(grant.command('show').description('show one grant').argument('<id>')).action((id: string, options: Record<string, unknown>) => runGrant('show', id, options));
adminOptions(grant.command('rotate').description('give a run-time grant a new token (shown only once); the old one stops now or after --grace-ms').argument('<id>'))
  .option('--grace-ms <ms>', 'keep the previous token working this long (at most 86400000)')
  .action((id: string, options: Record<string, unknown>) => runGrant('rotate', id, options));

async function runWatch(options: Record<string, unknown>): Promise<void> {
  const { runWatchCommand } = await import('./cli/index.js');
  const isAsk = options['ask'] === true;
  // A reader that went away (`sluice watch | head`) ends the watch, quietly.
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error;
    // --ask put the terminal in raw mode (readline): give it back as it was.
    if (isAsk && process.stdin.isTTY) process.stdin.setRawMode(false);
    process.exit(0);
  });
  const noColor = process.env['NO_COLOR'];
  process.exitCode = await runWatchCommand(
    {
      admin: await adminAddress(options as { admin?: string; config?: string }),
      // The admin token comes from the environment, never from argv (ps shows argv).
      adminToken: process.env['SLUICE_ADMIN_TOKEN'],
      json: options['json'] === true,
      grant: options['grant'] as string | undefined,
      generation: options['generation'] as string | undefined,
      kind: options['kind'] as string | undefined,
      ask: isAsk,
    },
    {
      ...output,
      // https://no-color.org: NO_COLOR set to anything but the empty string turns colour off.
      isColor: process.stdout.isTTY === true && (noColor === undefined || noColor === ''),
      // process.stdin only with --ask: a watch that never reads its input leaves the terminal alone.
      stdin: isAsk ? process.stdin : undefined,
      isStdinTty: tty.isatty(0),
      promptOutput: process.stderr,
      isPromptTty: process.stderr.isTTY === true,
      onInterrupt: (handler) => {
        process.on('SIGINT', handler);
        process.on('SIGTERM', handler);
      },
    },
  );
}

adminOptions(program.command('watch').description("follow the running proxy's decisions, asks and grant changes, one line each (GET /v1/events)"))
  .option('--grant <id>', 'only the events of this grant', nonEmpty)
  .option('--generation <label>', 'only the events of grants of this generation', nonEmpty)
  .option('--kind <list>', 'only these kinds, comma-separated: decision, ask, ask_answered, grant, gap (a gap always shows)')
  .option('--ask', 'prompt for each ask on the terminal and answer it (allow or deny, once or for the grant)')
  // A usage error is bad input (exit 2), never 1: 1 means Sluice refused or could not be reached.
  .exitOverride((error) => process.exit(error.exitCode === 0 ? 0 : EXIT_CONFIG))
  .action(runWatch);

function parsePort(value: string): number {
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new InvalidArgumentError('expected a port number');
  return port;
}

program
  .command('bridge')
  .description("relay 127.0.0.1:<port> inside a sandbox's network namespace to a grant's Unix socket")
  .requiredOption('--grant-socket <path>', "the grant's dedicated Unix socket")
  .option('--port <port>', 'port on 127.0.0.1 to listen on', parsePort, 3128)
  .action(async (options: { grantSocket: string; port: number }) => {
    const { startBridge } = await import('./proxy/index.js');
    const bridge = await startBridge('127.0.0.1', options.port, options.grantSocket, (m) => void process.stderr.write(`sluice bridge: ${m}\n`));
    process.stderr.write(`sluice bridge: 127.0.0.1:${bridge.port} -> ${options.grantSocket}\n`);
    const stop = (): void => void bridge.close().then(() => process.exit(0));
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  });

interface RunFlags extends GrantIssueFlags {
  readonly grantSocket?: string;
  readonly admin?: string;
  readonly config?: string;
  readonly port: number;
  readonly write?: string[];
  readonly read?: string[];
  readonly env?: string[];
  readonly unprotect?: string[];
}

/**
 * What the sandbox must not see of Sluice: the --config given, and every running Sluice's config
 * (found in /proc), with the files each names, resolved against that Sluice's working directory,
 * wherever its config lies (review 2026-12-04 finding 5: `cd ~/proj && sluice start --config
 * ~/.config/sluice.yaml` keeps ./state and the audit file in the project).
 */
async function hiddenSluicePaths(options: RunFlags): Promise<string[]> {
  const { findRunningConfigs, sluiceFilesOf } = await import('./cli/index.js');
  const real = (p: string): string => {
    try {
      return fs.realpathSync(p);
    } catch {
      return path.resolve(p);
    }
  };
  const trees = [...((options.write ?? []).length > 0 ? (options.write ?? []) : [process.cwd()]), ...(options.read ?? [])].map(real);
  const configs = findRunningConfigs('/proc', trees);
  if (options.config !== undefined) configs.push({ file: path.resolve(options.config), cwd: process.cwd() });
  const hidden: string[] = [];
  for (const { file, cwd } of configs) hidden.push(...(await sluiceFilesOf(file, cwd, trees)));
  return hidden;
}

async function runRun(command: string[], options: RunFlags): Promise<void> {
  const { parseGrantIssueOptions, runConfined } = await import('./cli/index.js');
  const usage = (message: string): void => {
    process.stderr.write(`sluice run: ${message}\n`);
    process.exitCode = EXIT_CONFIG;
  };
  const isOwned = (options.destination?.length ?? 0) > 0 || options.unrestricted === true;
  if (isOwned === (options.grantSocket !== undefined)) return usage('give either --grant-socket SOCK or --destination URL (a grant for this run only)');
  if (options.config !== undefined) await loadOrExit(options.config);
  let grant: { admin: string; adminToken: string | undefined; spec: Record<string, unknown>; generation: string | undefined } | undefined;
  if (isOwned) {
    try {
      const spec = parseGrantIssueOptions({ ...options, listen: undefined, generation: undefined });
      grant = { admin: await adminAddress(options), adminToken: process.env['SLUICE_ADMIN_TOKEN'], spec, generation: options.generation };
    } catch (error) {
      return usage((error as Error).message);
    }
  }
  const onSignal = (handler: (signal: string) => void): void => {
    for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(signal, () => handler(signal));
  };
  const code = await runConfined(
    {
      grantSocket: options.grantSocket === undefined ? undefined : path.resolve(options.grantSocket),
      grant,
      port: options.port,
      command,
      cwd: process.cwd(),
      home: process.env['HOME'] ?? '/',
      write: (options.write ?? []).map((p) => path.resolve(p)),
      read: (options.read ?? []).map((p) => path.resolve(p)),
      envFlags: options.env ?? [],
      callerEnv: process.env,
      hidden: await hiddenSluicePaths(options),
      node: process.execPath,
      initScript: fileURLToPath(new URL('./sandbox-init.js', import.meta.url)),
      arch: process.arch,
      unprotect: (options.unprotect ?? []).map((p) => path.resolve(p)),
    },
    { stderr: (s) => void process.stderr.write(s), onSignal },
  );
  process.exitCode = code;
}

grantSpecOptions(
  program
    .command('run')
    .description(
      'run a command confined by bubblewrap: its only way out is one grant (exit 125 when it cannot be confined); ' +
        'with --destination, the grant flags describe a grant for this run only, forgotten when the command ends',
    )
    .option('--grant-socket <path>', "a grant's dedicated Unix socket (issued by a supervisor)"),
)
  .option('--admin <address>', 'admin socket (unix:/path) or http://host:port for --destination; token from SLUICE_ADMIN_TOKEN')
  .option('--config <file>', "Sluice's config: its admin address, and its files hidden from the sandbox")
  .option('--write <dir>', 'a writable directory (repeatable); default: the working directory', collect)
  .option('--read <path>', 'a read-only file or directory (repeatable)', collect)
  .option('--env <name[=value]>', 'pass a variable from the environment, or set one (repeatable)', collect)
  .option('--unprotect <path>', 'let the command write a protected name of a writable tree (.git/config, .envrc, .vscode, …; repeatable)', collect)
  .option('--port <port>', 'bridge port on the sandbox loopback', parsePort, 3128)
  .argument('<command...>', 'the command and its arguments (after --)')
  .action(runRun);

program.parseAsync(process.argv).catch((error: unknown) => {
  process.stderr.write(`sluice: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
