// Threat: the command connects to a Unix socket file it can see, other than its own grant's (review
// 2026-12-04 finding 3, high). `sluice run` masked only the sockets /proc/net/unix lists by an
// absolute path: a run-time grant bound by a relative `listen` (`unix:agents/c.sock`) is listed by
// that relative path and stayed visible, so grant a's sandbox acted as grant c through it; a server
// in another network namespace is not listed at all; and any other local server bound under a
// visible tree (a database, an agent, a docker socket) is as reachable as the grant's. What must
// hold: the command's only socket is its own grant's (through the bridge): connecting to any other
// socket file under a tree it sees fails, and a writable tree that holds Sluice's state is refused.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { giveTo, identities, killAll, sandboxSkipReason, type Identity, type RunResult } from '../support/sandbox.js';
import { killSluiceProcesses } from '../support/sluice-process.js';
import { waitUntil } from '../support/wait.js';
import {
  HOST_PATH, PY_PRELUDE, attemptLine, checkLine, describeRun, escapeRe, expectWritableRefused, fileState, removeScratch, scratchDir, sluiceRun, startCommand, startGrantSluice, verdicts,
  type GrantSluice, type Verdicts,
} from '../support/sandbox-review2.js';

const skip = sandboxSkipReason();
if (skip !== null) console.log(`skipping sandbox-escape-sockets: ${skip}`);

// Inside. argv: TARGETS (JSON [name, path]), ROOTS to walk for socket files (JSON), EXCLUDED (JSON).
const SCRIPT = PY_PRELUDE + String.raw`
import stat
def own_socket():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind('/tmp/own.sock')
    s.listen(1)
    return connect('/tmp/own.sock')
def bridge():
    port = int(os.environ['HTTP_PROXY'].rsplit(':', 1)[1])
    socket.create_connection(('127.0.0.1', port), 3).close()
check('own-socket', own_socket)
check('bridge', bridge)
for name, p in json.loads(sys.argv[1]):
    attempt(name, lambda p=p: connect(p))
for name, p in json.loads(sys.argv[4] if len(sys.argv) > 4 else '[]'):
    attempt(name, lambda p=p: read(p))
excluded = set(json.loads(sys.argv[3]))
found, seen = [], 0
for root in json.loads(sys.argv[2]):
    for dirpath, dirnames, filenames in os.walk(root):
        seen += len(dirnames) + len(filenames)
        if seen > 20000:
            break
        for f in filenames:
            p = os.path.join(dirpath, f)
            try:
                if stat.S_ISSOCK(os.lstat(p).st_mode) and p not in excluded:
                    found.append(p)
            except OSError:
                pass
print('SOCKETS ' + json.dumps(found), flush=True)
for i, p in enumerate(found[:50]):
    attempt('found-%d' % i, lambda p=p: connect(p))
print('END', flush=True)
`;

// A server the host runs in a network namespace of its own: ours does not list its sockets.
const NETNS_SERVER = String.raw`
import select, socket, sys
socks = []
for p in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(p)
    s.listen(16)
    socks.append(s)
print('READY', flush=True)
while True:
    for s in select.select(socks, [], [])[0]:
        c, _ = s.accept()
        print('CONN ' + s.getsockname(), flush=True)
        c.close()
`;

function escapedFound(v: Verdicts): string[] {
  return [...v.attempts].filter(([name, verdict]) => name.startsWith('found-') && !verdict.startsWith('BLOCKED')).map(([n, verdict]) => `${n} ${verdict}`);
}

describe.skipIf(skip !== null).each(identities())('sluice run: the command sees its own grant socket and no other socket file, as $label', (identity: Identity) => {
  let sluice: GrantSluice;
  let r: string;
  let w: string;
  let home: string;
  let connections = 0;
  const servers: net.Server[] = [];
  let netns: ReturnType<typeof startCommand> | null = null;
  let run: RunResult;
  let v: Verdicts;

  const listen = (file: string): Promise<void> =>
    new Promise((resolve, reject) => {
      const server = net.createServer((s) => {
        connections += 1;
        s.destroy();
      });
      servers.push(server);
      server.once('error', reject);
      server.listen(file, () => resolve());
    });

  beforeAll(async () => {
    sluice = await startGrantSluice({ configDir: scratchDir('sock-conf'), identity });
    r = scratchDir('sock-r');
    w = scratchDir('sock-w');
    home = scratchDir('sock-home');
    fs.mkdirSync(path.join(r, 'srv'));
    await listen(path.join(r, 'srv/x.sock'));
    await listen(path.join(w, 'other.sock'));
    const targets: [string, string][] = [
      ['read-tree-server', path.join(r, 'srv/x.sock')],
      ['write-tree-server', path.join(w, 'other.sock')],
    ];
    // Only root can make a network namespace: the server there is root's, as is the run. Its sockets lie
    // in directories of their own: a directory where a listed socket lies is covered as a whole.
    if (identity.uid === null) {
      for (const dir of [r, w]) fs.mkdirSync(path.join(dir, 'ns'));
      const files = [path.join(r, 'ns/netns.sock'), path.join(w, 'ns/netns.sock')];
      netns = startCommand(['unshare', '-n', 'python3', '-c', NETNS_SERVER, ...files], { cwd: r, env: { PATH: HOST_PATH }, identity, timeoutMs: 120_000 });
      await waitUntil(() => netns?.stdout().includes('READY') === true, { timeoutMs: 10_000, label: 'the server in its own network namespace is listening' });
      targets.push(['read-tree-netns-server', files[0] ?? ''], ['write-tree-netns-server', files[1] ?? '']);
    }
    giveTo(identity, r, w, home);
    run = await sluiceRun(['--grant-socket', sluice.grantSocket, '--read', r, '--', 'python3', '-c', SCRIPT, JSON.stringify(targets), JSON.stringify([r, w]), '[]'], { cwd: w, identity, home });
    v = verdicts(run);
  }, 120_000);
  afterAll(async () => {
    killAll();
    for (const s of servers) s.close();
    await killSluiceProcesses();
    removeScratch();
  });

  it('runs every attempt, and its own sockets (a socket in its /tmp, the bridge) work', () => {
    expect(v.ended, v.summary).toBe(true);
    expect(run.code, v.summary).toBe(0);
    expect(checkLine(v, 'own-socket')).toBe('CHECK own-socket OK');
    expect(checkLine(v, 'bridge')).toBe('CHECK bridge OK');
  });

  it.each(['read-tree-server', 'write-tree-server'])('blocks %s: a host server bound under a tree the command sees', (name) => {
    expect(attemptLine(v, name)).toMatch(new RegExp(`^ATTEMPT ${name} BLOCKED`));
    expect(connections).toBe(0);
  });

  it.skipIf(identity.uid !== null).each([
    ['read-tree-netns-server', 'r'],
    ['write-tree-netns-server', 'w'],
  ])('blocks %s: a server in another network namespace, not in our /proc/net/unix', (name, tree) => {
    const file = path.join(tree === 'r' ? r : w, 'ns/netns.sock');
    expect(fs.readFileSync('/proc/net/unix', 'utf8')).not.toContain(file);
    expect(attemptLine(v, name)).toMatch(new RegExp(`^ATTEMPT ${name} BLOCKED`));
    expect(netns?.stdout() ?? '', v.summary).not.toContain(`CONN ${file}`);
  });

  it('blocks every socket file the command can find under its trees', () => {
    expect(run.stdout, v.summary).toMatch(/^SOCKETS /m);
    expect(escapedFound(v)).toEqual([]);
  });
});

describe.skipIf(skip !== null).each(identities())('sluice run: a run-time grant socket bound by a relative path, as $label', (identity: Identity) => {
  let d: string;
  let home: string;
  let sluice: GrantSluice;
  let issued: { status: number; body: unknown };
  let run: RunResult;
  let v: Verdicts;

  beforeAll(async () => {
    d = scratchDir('sock-d');
    home = scratchDir('sock-d-home');
    for (const sub of ['work', 'agents']) fs.mkdirSync(path.join(d, sub));
    fs.mkdirSync(path.join(d, 'state'), { mode: 0o700 });
    // The review's layout: Sluice started from D with its config in D, every path relative to D.
    const config = {
      listeners: [{ name: 'a-sock', listen: 'unix:./run/a.sock', grant: 'a' }],
      admin: { listen: 'unix:./state/admin.sock' },
      state: './state',
      audit: { file: './audit.jsonl' },
      grants: [{ id: 'a', destinations: ['http://allowed.test:1'] }],
    };
    sluice = await startGrantSluice({ configDir: d, cwd: d, config, identity });
    issued = await sluice.admin('POST', '/v1/grants', { destinations: ['http://127.0.0.1:9'], allowAddressClasses: ['loopback'], listen: 'unix:agents/c.sock' });
    await waitUntil(() => fs.existsSync(path.join(d, 'state/ledger.json')), { timeoutMs: 5000, label: 'the ledger holds the run-time grant' });
    giveTo(identity, d, home);
    const targets = [
      ['relative-grant-socket', path.join(d, 'agents/c.sock')],
      ['admin-socket', path.join(d, 'state/admin.sock')],
    ];
    const reads = [['ledger-read', path.join(d, 'state/ledger.json')]];
    const args = ['--grant-socket', sluice.grantSocket, '--read', d, '--write', path.join(d, 'work')];
    run = await sluiceRun([...args, '--', 'python3', '-c', SCRIPT, JSON.stringify(targets), JSON.stringify([d]), JSON.stringify([sluice.grantSocket]), JSON.stringify(reads)], {
      cwd: path.join(d, 'work'),
      identity,
      home,
    });
    v = verdicts(run);
  }, 120_000);
  afterAll(async () => {
    killAll();
    await killSluiceProcesses();
    removeScratch();
  });

  it('answers the admin request with the socket’s absolute path, resolved against Sluice’s directory', () => {
    expect(issued.status, JSON.stringify(issued.body)).toBe(201);
    expect((issued.body as { grant?: { listen?: string } }).grant?.listen).toBe(`unix:${path.join(d, 'agents/c.sock')}`);
    expect(fileState(path.join(d, 'agents/c.sock'))).toBe('socket');
  });

  it('runs every attempt from D/work with D shown read-only', () => {
    expect(v.ended, v.summary).toBe(true);
    expect(run.code, v.summary).toBe(0);
  });

  it.each(['relative-grant-socket', 'admin-socket', 'ledger-read'])('blocks %s', (name) => {
    expect(attemptLine(v, name)).toMatch(new RegExp(`^ATTEMPT ${name} BLOCKED`));
  });

  it('blocks every other socket file under D', () => {
    expect(escapedFound(v)).toEqual([]);
  });

  it('refuses, exit 125, D as the writable tree: it holds Sluice’s state and run-time sockets', async () => {
    const marker = path.join(d, 'ran');
    const r2 = await sluiceRun(['--grant-socket', sluice.grantSocket, '--', 'sh', '-c', `echo ran > ${marker}`], { cwd: d, identity, home });
    expectWritableRefused(r2, d, marker);
  }, 60_000);
});
