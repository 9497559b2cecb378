// The process shell: argv, config loading, signals and exit codes. The only file that touches process.
import { Command, InvalidArgumentError } from 'commander';
import { loadConfig, type Config, type ConfigIssue } from './config/index.js';
import { buildRuntime, startApp, type SluiceApp } from './app.js';
import { ProxyError } from './core/index.js';
import { explain, formatExplanation, startBridge, type ProxyRuntime } from './proxy/index.js';
import { EXIT_CONFINEMENT_FAILED, parseGrantIssueOptions, prepareNamespace, runCommand, runGrantCommand, runInNamespace, sandboxEnv, type GrantIssueFlags } from './cli/index.js';
import path from 'node:path';

const EXIT_CONFIG = 2;

function printIssues(file: string, issues: readonly ConfigIssue[]): void {
  process.stderr.write(`${file}: ${issues.length} error(s)\n`);
  for (const issue of issues) process.stderr.write(`  ${issue.path}: ${issue.message}\n`);
}

async function loadOrExit(file: string): Promise<Config> {
  const loaded = await loadConfig(file, process.cwd());
  if (!loaded.ok) {
    printIssues(file, loaded.issues);
    process.exit(EXIT_CONFIG);
  }
  return loaded.config;
}

async function runStart(options: { config: string }): Promise<void> {
  const config = await loadOrExit(options.config);
  let app: SluiceApp;
  try {
    app = await startApp(config, { env: process.env, cwd: process.cwd() });
  } catch (error) {
    if (error instanceof ProxyError && error.code === 'ERR_CONFIG_INVALID') {
      process.stderr.write(`${options.config}: invalid\n${error.message.replace(/^/gm, '  ')}\n`);
      process.exit(EXIT_CONFIG);
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
    app.control.reload().then(
      (result) => {
        if (!result.ok) for (const issue of result.issues) log.error({ path: issue.path }, `reload refused, keeping the running config: ${issue.message}`);
      },
      (error: unknown) => log.error({ err: error }, 'reload failed, keeping the running config'),
    );
  });
}

async function runCheckConfig(file: string): Promise<void> {
  const config = await loadOrExit(file);
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

async function runExplain(target: string, options: { config: string; grant: string; json?: boolean }): Promise<void> {
  const config = await loadOrExit(options.config);
  const built = await buildRuntime(config, { env: process.env, log: silentLog, audit: nullSink });
  if (!built.ok) {
    printIssues(options.config, built.issues);
    process.exit(EXIT_CONFIG);
  }
  const result = await explain(built.value.runtime, options.grant, target);
  await closeRuntime(built.value.runtime);
  process.stdout.write(options.json === true ? `${JSON.stringify(result)}\n` : formatExplanation(result));
}

async function closeRuntime(runtime: ProxyRuntime): Promise<void> {
  runtime.routes.close();
  await runtime.forwardAgent.close();
  await runtime.upstreamAgent.close();
}

const silentLog = { info: () => undefined, warn: () => undefined, error: () => undefined };
const nullSink = { write: () => undefined, flush: () => Promise.resolve() };

function nonEmpty(value: string): string {
  if (value.trim() === '') throw new InvalidArgumentError('must not be empty');
  return value;
}

const program = new Command('sluice').description('Egress mediation proxy').showHelpAfterError();
program.command('start').description('run the proxy').requiredOption('--config <file>', 'config file (YAML)').action(runStart);
program.command('check-config').description('validate a config file; exit 2 on errors').argument('<file>').action(runCheckConfig);
program
  .command('explain')
  .description('print the decision for a grant and a target without connecting')
  .requiredOption('--config <file>', 'config file (YAML)')
  .requiredOption('--grant <id>', 'grant id', nonEmpty)
  .option('--json', 'print the decision as JSON')
  .argument('<target>', 'https://host[:port], http://host[:port]/path, or host:port')
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

async function runGrant(action: 'issue' | 'revoke' | 'list' | 'show', id: string | undefined, options: Record<string, unknown>): Promise<void> {
  let spec: object | undefined;
  if (action === 'issue') {
    try {
      spec = parseGrantIssueOptions({ ...(options as GrantIssueFlags), json: options['spec'] as string | undefined });
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
adminOptions(grant.command('issue').description('issue a grant; prints its id and token (shown only once)'))
  .option('--destination <rule>', 'destination rule, repeatable', collect)
  .option('--unrestricted', 'any destination (address classes still apply)')
  .option('--allow-class <class>', 'extra address class, repeatable', collect)
  .option('--allow-address <cidr>', 'extra CIDR, repeatable', collect)
  .option('--generation <label>', 'generation label (revoke them together)')
  .option('--expires-at <iso8601>', 'expiry time')
  .option('--max-concurrent <n>', 'concurrent connections')
  .option('--max-bytes <n>', 'bytes, both directions')
  .option('--listen <address>', 'open a dedicated listener (unix:/path or 127.0.0.1:port)')
  .option('--spec <json>', 'the whole grant as JSON; flags override its fields')
  .action((options: Record<string, unknown>) => runGrant('issue', undefined, options));
adminOptions(grant.command('revoke').description('revoke a grant, or a whole generation').argument('[id]'))
  .option('--generation <label>', 'revoke every grant of this generation')
  .action((id: string | undefined, options: Record<string, unknown>) => runGrant('revoke', id, options));
adminOptions(grant.command('list').description('list grants (never tokens)')).action((options: Record<string, unknown>) => runGrant('list', undefined, options));
adminOptions(grant.command('show').description('show one grant').argument('<id>')).action((id: string, options: Record<string, unknown>) => runGrant('show', id, options));

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
    const bridge = await startBridge('127.0.0.1', options.port, options.grantSocket, (m) => void process.stderr.write(`sluice bridge: ${m}\n`));
    process.stderr.write(`sluice bridge: 127.0.0.1:${bridge.port} -> ${options.grantSocket}\n`);
    const stop = (): void => void bridge.close().then(() => process.exit(0));
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  });

program
  .command('run')
  .description('run a command in a new network namespace whose only way out is the grant socket')
  .requiredOption('--grant-socket <path>', "the grant's dedicated Unix socket")
  .option('--port <port>', 'bridge port inside the namespace', parsePort, 3128)
  .argument('<command...>', 'the command and its arguments (after --)')
  .action(async (command: string[], options: { grantSocket: string; port: number }) => {
    process.exitCode = await runInNamespace(
      {
        grantSocket: path.resolve(options.grantSocket),
        port: options.port,
        command,
        node: process.execPath,
        bin: process.argv[1] ?? '',
        env: process.env,
        isRoot: process.getuid?.() === 0,
      },
      (m) => void process.stderr.write(m),
    );
  });

program
  .command('__sandbox-init', { hidden: true })
  .requiredOption('--grant-socket <path>')
  .requiredOption('--port <port>', '', parsePort)
  .argument('<command...>')
  .action(async (command: string[], options: { grantSocket: string; port: number }) => {
    const refused = prepareNamespace();
    if (refused !== null) {
      process.stderr.write(`sluice run: ${refused}; refusing to run the command unconfined\n`);
      process.exit(EXIT_CONFINEMENT_FAILED);
    }
    const bridge = await startBridge('127.0.0.1', options.port, options.grantSocket, (m) => void process.stderr.write(`sluice bridge: ${m}\n`));
    const code = await runCommand(command, sandboxEnv(process.env, bridge.port));
    await bridge.close();
    process.exit(code);
  });

program.parseAsync(process.argv).catch((error: unknown) => {
  process.stderr.write(`sluice: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
