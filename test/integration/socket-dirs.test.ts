// First start in a fresh directory (issue 17, item 4): a Unix socket whose directory does not exist yet,
// a dedicated listener from POST /v1/grants or a configured listener, gets its missing directories
// created 0700 (as the admin socket's are) instead of failing with EACCES or ENOENT; an existing
// directory keeps its mode. Driven through the real admin API (curl) and a real client (node:http).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startHttpOrigin, type Origin } from '../support/origins.js';
import { startSluice, tableLookup, type TestSluice } from '../support/sluice.js';

const run = promisify(execFile);

/** One absolute-form GET through a proxy's Unix socket, as an HTTP_PROXY client sends it. */
function getVia(socketPath: string, url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const req = http.request({ socketPath, path: url, headers: { host: target.host }, timeout: 5000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end();
  });
}

const modeOf = (p: string): number => fs.statSync(p).mode & 0o777;

describe('Unix sockets in directories that do not exist yet', () => {
  let dir: string;
  let origin: Origin;
  let sluice: TestSluice | undefined;

  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-socket-dirs-'));
    origin = await startHttpOrigin();
  });
  afterEach(async () => {
    await sluice?.close();
    sluice = undefined;
    await origin.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('POST /v1/grants with "listen" in a nested missing directory: created 0700, the grant works there', async () => {
    fs.mkdirSync(path.join(dir, 'run'), { mode: 0o755 });
    fs.chmodSync(path.join(dir, 'run'), 0o755);
    const admin = path.join(dir, 'admin', 'admin.sock');
    sluice = await startSluice({ admin: { listen: `unix:${admin}` } }, { lookup: tableLookup({ 'direct.test': ['127.0.0.1'] }) });
    const socket = path.join(dir, 'run', 'sandboxes', 'a', 'proxy.sock');
    const body = JSON.stringify({ destinations: [`http://direct.test:${origin.port}`], allowAddressClasses: ['loopback'], listen: `unix:${socket}` });
    const { stdout } = await run('curl', ['-sS', '--max-time', '10', '--unix-socket', admin, '-X', 'POST', '-H', 'content-type: application/json', '--data', body, 'http://sluice/v1/grants']);
    const issued = JSON.parse(stdout) as { id?: string; grant?: { listen: string } };
    expect(issued.grant?.listen).toBe(`unix:${socket}`);
    expect(modeOf(path.join(dir, 'run', 'sandboxes'))).toBe(0o700);
    expect(modeOf(path.join(dir, 'run', 'sandboxes', 'a'))).toBe(0o700);
    expect(modeOf(path.join(dir, 'run'))).toBe(0o755);
    expect(modeOf(socket)).toBe(0o600);
    expect(await getVia(socket, `http://direct.test:${origin.port}/hello`)).toEqual({ status: 200, body: 'origin:GET:/hello' });
  });

  it('a configured unix: listener in a missing directory: start creates it 0700 and serves there', async () => {
    const socket = path.join(dir, 'fresh', 'state', 'sandbox-a.sock');
    sluice = await startSluice(
      {
        listeners: [{ name: 'sandbox-a', listen: `unix:${socket}`, grant: 'a' }],
        grants: [{ id: 'a', destinations: [`http://direct.test:${origin.port}`], allowAddressClasses: ['loopback'] }],
      },
      { lookup: tableLookup({ 'direct.test': ['127.0.0.1'] }) },
    );
    expect(modeOf(path.join(dir, 'fresh'))).toBe(0o700);
    expect(modeOf(path.join(dir, 'fresh', 'state'))).toBe(0o700);
    expect(await getVia(socket, `http://direct.test:${origin.port}/`)).toEqual({ status: 200, body: 'origin:GET:/' });
  });

  it('a directory that cannot be created is answered 409 listen_failed naming it, and no grant is left usable', async () => {
    const admin = path.join(dir, 'admin', 'admin.sock');
    sluice = await startSluice({ admin: { listen: `unix:${admin}` } });
    fs.writeFileSync(path.join(dir, 'plain'), '');
    const socket = path.join(dir, 'plain', 'sub', 'a.sock');
    const body = JSON.stringify({ destinations: ['https://a.test'], listen: `unix:${socket}` });
    const { stdout } = await run('curl', ['-sS', '--max-time', '10', '--unix-socket', admin, '-w', '\\n%{http_code}', '-X', 'POST', '-H', 'content-type: application/json', '--data', body, 'http://sluice/v1/grants']);
    const json = stdout.slice(0, stdout.lastIndexOf('\n'));
    const code = stdout.slice(stdout.lastIndexOf('\n') + 1);
    expect(code).toBe('409');
    expect(json).toContain('listen_failed');
    expect(json).toContain(`cannot create its directory ${path.join(dir, 'plain', 'sub')} (ENOTDIR)`);
    expect(json).not.toContain('"token"');
  });
});
