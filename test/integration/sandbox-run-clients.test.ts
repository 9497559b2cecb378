// Real clients inside `sluice run` reach an allowed origin through the in-sandbox bridge with nothing
// but the proxy variables sluice run sets (issue 12: confinement must not break the clients
// docs/clients.md names): curl over HTTPS (CONNECT, CA from a --read file), git clone and ls-remote over smart HTTP,
// /usr/bin/python3 urllib over HTTPS, and a Node program using undici's EnvHttpProxyAgent. Node 20's
// global fetch ignores the proxy variables, so a real Node user runs their project (with undici in its
// node_modules) from the project directory: here a project whose node_modules links to this
// repository's, shown read-only with --read, and NODE_EXTRA_CA_CERTS passed in with --env.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTestPki, type TestPki } from '../support/pki.js';
import { startHttpOrigin, startHttpsOrigin, type Origin } from '../support/origins.js';
import { cleanupClients, startGitOrigin, type GitOrigin } from '../support/clients.js';
import { startSluice, tableLookup, type TestSluice } from '../support/sluice.js';
import { REPO_ROOT, callerEnv, killAll, sandboxSkipReason, startSluiceRun, type RunResult } from '../support/sandbox.js';

const skip = sandboxSkipReason();
if (skip !== null) console.log(`skipping sandbox-run-clients: ${skip}`);

const NODE_APP = `
import { EnvHttpProxyAgent, fetch } from 'undici';
const r = await fetch(process.argv[2], { dispatcher: new EnvHttpProxyAgent(), signal: AbortSignal.timeout(10000) });
process.stdout.write(await r.text());
`;

describe.skipIf(skip !== null)('clients inside sluice run reach an allowed origin through the bridge, unchanged', () => {
  let pki: TestPki;
  let https: Origin;
  let plain: Origin;
  let git: GitOrigin;
  let sluice: TestSluice;
  let dir: string;
  let sock: string;
  let project: string;
  let home: string;

  beforeAll(async () => {
    pki = createTestPki(['app.test']);
    https = await startHttpsOrigin(pki);
    plain = await startHttpOrigin();
    git = await startGitOrigin();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-run-clients-'));
    home = path.join(dir, 'home');
    project = path.join(dir, 'project');
    fs.mkdirSync(home);
    fs.mkdirSync(project);
    fs.symlinkSync(path.join(REPO_ROOT, 'node_modules'), path.join(project, 'node_modules'));
    fs.writeFileSync(path.join(project, 'app.mjs'), NODE_APP);
    fs.mkdirSync(path.join(dir, 'run'), { mode: 0o700 });
    sock = path.join(dir, 'run/grant.sock');
    sluice = await startSluice(
      {
        listeners: [{ name: 'sandbox', listen: `unix:${sock}`, grant: 'clients' }],
        grants: [
          {
            id: 'clients',
            destinations: [`https://app.test:${https.port}`, `http://app.test:${plain.port}`, `http://app.test:${git.port}`],
            allowAddressClasses: ['loopback'],
          },
        ],
      },
      { lookup: tableLookup({ 'app.test': ['127.0.0.1'] }) },
    );
  });
  afterAll(async () => {
    killAll();
    cleanupClients();
    await sluice?.close();
    await https?.close();
    await plain?.close();
    await git?.close();
    if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
  });

  function run(command: string[], extra: { args?: string[]; env?: Record<string, string> } = {}): Promise<RunResult> {
    const args = ['--grant-socket', sock, '--read', pki.caFile, ...(extra.args ?? []), '--', ...command];
    return startSluiceRun(args, { cwd: project, env: callerEnv(home, extra.env), timeoutMs: 40_000 }).result;
  }

  it('curl: HTTPS through CONNECT, verifying the origin with a CA from a --read path; and plain HTTP', async () => {
    const r = await run(['/bin/sh', '-c', `curl -sS --cacert "$1" "$2" && echo && curl -sS "$3"`, 'curl', pki.caFile, `https://app.test:${https.port}/curl`, `http://app.test:${plain.port}/curl-plain`]);
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('origin:GET:/curl\norigin:GET:/curl-plain');
    expect(r.code).toBe(0);
  });

  it('git: ls-remote and clone over smart HTTP into the working directory', async () => {
    const repo = `http://app.test:${git.port}/repo.git`;
    const script = 'git ls-remote "$1" | cut -f2 && git clone --quiet "$1" clone && cat clone/README';
    const r = await run(['/bin/sh', '-c', script, 'git', repo], { args: ['--env', 'GIT_TERMINAL_PROMPT'], env: { GIT_TERMINAL_PROMPT: '0' } });
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('HEAD\nrefs/heads/main\nreadme\n');
    expect(r.code).toBe(0);
    expect(fs.readFileSync(path.join(project, 'clone/README'), 'utf8')).toBe('readme\n');
    expect(git.requests.some((q) => q.method === 'POST')).toBe(true);
  });

  it('python3: urllib over HTTPS picks the proxy from the environment', async () => {
    const code = 'import ssl, sys, urllib.request\nctx = ssl.create_default_context(cafile=sys.argv[1])\nprint(urllib.request.urlopen(sys.argv[2], context=ctx, timeout=10).read().decode(), end="")';
    const r = await run(['/usr/bin/python3', '-c', code, pki.caFile, `https://app.test:${https.port}/python`]);
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('origin:GET:/python');
    expect(r.code).toBe(0);
  });

  it('node: a project using undici’s EnvHttpProxyAgent, with its node_modules read-only and NODE_EXTRA_CA_CERTS', async () => {
    const r = await run([process.execPath, 'app.mjs', `https://app.test:${https.port}/node`], {
      args: ['--read', path.join(REPO_ROOT, 'node_modules'), '--env', 'NODE_EXTRA_CA_CERTS'],
      env: { NODE_EXTRA_CA_CERTS: pki.caFile },
    });
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('origin:GET:/node');
    expect(r.code).toBe(0);
  });

  it('every hop was authorized for the sandbox’s grant', () => {
    const decisions = sluice.decisions();
    expect(decisions.length).toBeGreaterThan(0);
    expect(decisions.every((d) => d.principal === 'clients' && d.reason === 'granted')).toBe(true);
  });
});
