// The first process inside a `sluice run` sandbox: checks that it really is confined, opens the bridge
// (127.0.0.1:<port> relayed byte for byte to the grant socket bound in), then runs the command with
// the proxy variables naming the bridge and exits with its status. It holds no authority of its own:
// the principal is whichever grant's socket was bound in. It imports nothing from src/, so that it
// starts in one Node boot and never loads the proxy (a short command's start-up is this plus bwrap).
// Usage (argv from src/cli/sandbox-plan.ts): init.mjs PORT GRANT_SOCKET HANDSHAKE_FD EXPECTATIONS COMMAND...
// EXPECTATIONS: JSON [[path, "=dev:ino" | "!dev:ino"], …], what each planned mount must show here.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';

const EXIT_CONFINEMENT_FAILED = 125;

function fail(message: string): never {
  process.stderr.write(`sluice run: ${message}; refusing to run the command unconfined\n`);
  process.exit(EXIT_CONFINEMENT_FAILED);
}

/**
 * Fail closed if what started us did not confine us (principle A9 in docs/principles.md: never label
 * ambient execution as sandboxed): only loopback, no capabilities, no_new_privs and a seccomp filter.
 */
function confinementGap(): string | null {
  const interfaces = Object.keys(os.networkInterfaces()).filter((name) => name !== 'lo');
  if (interfaces.length > 0) return `the sandbox has network interfaces other than loopback (${interfaces.join(', ')})`;
  const status = fs.readFileSync('/proc/self/status', 'utf8');
  const field = (name: string): string => new RegExp(`^${name}:\\s*(\\S+)`, 'm').exec(status)?.[1] ?? '';
  if (!/^0+$/.test(field('CapEff')) || !/^0+$/.test(field('CapBnd'))) return 'the sandbox kept capabilities';
  if (field('NoNewPrivs') !== '1') return 'no_new_privs is not set';
  if (field('Seccomp') !== '2') return 'no seccomp filter is in place';
  return null;
}

/** O_CLOEXEC in /proc/self/fdinfo's octal flags (asm-generic/fcntl.h). Mirrors src/cli/descriptors.ts: nothing of src/ is in here. */
const O_CLOEXEC = 0o2000000;

/**
 * Descriptors at or above 3 that exec(2) would hand the command (review 2026-12-04 finding
 * 1): whatever bwrap and sluice run passed on, the opened trees among them. Node's own are close-on-exec.
 */
function inheritable(): number[] {
  const found: number[] = [];
  for (const name of fs.readdirSync('/proc/self/fd')) {
    const fd = Number(name);
    if (fd < 3) continue;
    try {
      const flags = /^flags:\s*([0-7]+)/m.exec(fs.readFileSync(`/proc/self/fdinfo/${fd}`, 'latin1'))?.[1];
      if (flags !== undefined && (parseInt(flags, 8) & O_CLOEXEC) === 0) found.push(fd);
    } catch {
      // the listing's own descriptor, closed by now
    }
  }
  return found;
}

/**
 * Why the view is not the one `sluice run` checked, or null (finding 4): a tree or a protected path
 * swapped for a symlink before bwrap mounted it lands somewhere else, and the path shows another inode.
 */
function mountGap(expectations: readonly (readonly [string, string])[]): string | null {
  for (const [file, expect] of expectations) {
    let identity: string;
    let real: string;
    try {
      const stat = fs.lstatSync(file, { bigint: true });
      identity = `${stat.dev}:${stat.ino}`;
      real = fs.realpathSync(file);
    } catch {
      return `${file} is missing inside the sandbox`;
    }
    const isSame = identity === expect.slice(1);
    if (real !== file || (expect.startsWith('=') ? !isSame : isSame)) return `${file} moved or changed between the plan and the mount; not mounting what was not checked`;
  }
  return null;
}

function relay(client: net.Socket, grantSocket: string): void {
  client.pause();
  const upstream = net.connect({ path: grantSocket, allowHalfOpen: true });
  upstream.once('connect', () => {
    client.pipe(upstream);
    upstream.pipe(client);
    client.resume();
  });
  // Sluice's side failed: the command sees a reset, not a FIN it could take for a complete stream.
  upstream.once('error', () => {
    reset(client);
    upstream.destroy();
  });
  client.once('error', () => {
    client.destroy();
    upstream.destroy();
  });
  // Both directions ended: what the pipe still holds for a command that reads late is written first
  // (destroy() here dropped it).
  upstream.once('close', () => client.destroySoon());
  client.once('close', () => upstream.destroySoon());
}

function reset(socket: net.Socket): void {
  try {
    socket.resetAndDestroy();
  } catch {
    socket.destroy();
  }
}

function main(argv: readonly string[]): void {
  const [portText, grantSocket, handshakeFdText, expectText, file, ...args] = argv;
  const port = Number(portText);
  const handshakeFd = Number(handshakeFdText);
  if (grantSocket === undefined || expectText === undefined || file === undefined || !Number.isInteger(port) || !Number.isInteger(handshakeFd)) fail('bad arguments to the sandbox init');
  // First, before anything else can use them: only the handshake stays, and it closes before the command.
  for (const fd of inheritable()) if (fd !== handshakeFd) fs.closeSync(fd);
  const gap = confinementGap() ?? mountGap(JSON.parse(expectText) as [string, string][]);
  if (gap !== null) fail(gap);
  const server = net.createServer({ allowHalfOpen: true, noDelay: true }, (client) => relay(client, grantSocket));
  server.once('error', (error: NodeJS.ErrnoException) => fail(`cannot open the bridge on 127.0.0.1:${port}: ${error.code ?? error.message}`));
  server.listen({ host: '127.0.0.1', port, backlog: 511 }, () => awaitGo(handshakeFd, () => runCommand(file, args, port)));
}

/**
 * The handshake with `sluice run`: "ready" tells it confinement was set up (anything after is the
 * command's doing); its "go" says the grant is in place, its "stop" that the run was cancelled. Closed before the command starts, so the
 * command never holds it.
 */
function awaitGo(fd: number, then: () => void): void {
  const handshake = new net.Socket({ fd, readable: true, writable: true });
  let answer = '';
  const onData = (chunk: Buffer): void => {
    answer += chunk.toString('latin1');
    if (!answer.includes('\n')) return;
    handshake.removeListener('close', onClose);
    handshake.destroy();
    if (answer === 'go\n') then();
    // `sluice run` cancelled the start and says why itself: a second line here would only blur it.
    else if (answer === 'stop\n') process.exit(EXIT_CONFINEMENT_FAILED);
    else fail('sluice run did not let the command start');
  };
  const onClose = (): void => fail('sluice run went away before the command started');
  handshake.on('data', onData);
  handshake.once('close', onClose);
  handshake.on('error', () => handshake.destroy());
  handshake.write('ready\n');
}

function runCommand(file: string, args: readonly string[], port: number): void {
  const proxy = `http://127.0.0.1:${port}`;
  // NO_PROXY (the sandbox's own loopback) comes from sluice run's allow-listed environment, as is.
  const env: Record<string, string | undefined> = { ...process.env };
  for (const name of ['http_proxy', 'https_proxy', 'all_proxy']) env[name] = env[name.toUpperCase()] = proxy;
  const left = inheritable();
  if (left.length > 0) fail(`descriptors ${left.join(', ')} would reach the command`);
  const child = spawn(file, args, { stdio: 'inherit', env });
  child.once('error', (error: NodeJS.ErrnoException) => {
    process.stderr.write(`sluice run: ${file}: ${error.code === 'ENOENT' ? 'command not found' : error.message}\n`);
    process.exit(error.code === 'ENOENT' ? 127 : 126);
  });
  child.once('exit', (code, signal) => process.exit(code ?? 128 + (signal === null ? 0 : (os.constants.signals[signal] ?? 0))));
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(signal, () => child.kill(signal));
}

main(process.argv.slice(2));
