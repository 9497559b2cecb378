// Threat: a grant used from the network without a token (review 2026-12, finding 12). A dedicated
// listener acts for its grant with no credential, so one on 0.0.0.0, ::, a LAN address or a host name
// hands the grant to every host that can reach the machine. Before the fix the admin API opened
// `"listen":"0.0.0.0:port"` as asked, and config accepted such a listener. Now only unix: and loopback
// IP literals are accepted, by config (listeners[N].listen) and by POST /v1/grants (400 grant_invalid,
// naming listen); a ledger entry written before the check is not reopened.
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startSluice, type TestSluice } from '../support/sluice.js';
import { unusedPort } from '../support/ports.js';
import { call } from '../unit/admin/fake-control.js';

function refusesConnection(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => resolve(true));
  });
}

describe('POST /v1/grants with a non-loopback "listen"', () => {
  let dir: string;
  let sluice: TestSluice;
  let socketPath: string;

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-remote-listen-'));
    socketPath = path.join(dir, 'admin.sock');
    sluice = await startSluice({ admin: { listen: `unix:${socketPath}` } });
  });

  afterAll(async () => {
    await sluice.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const issue = (listen: string): ReturnType<typeof call> =>
    call({ socketPath }, 'POST', '/v1/grants', { body: JSON.stringify({ destinations: ['https://a.test'], listen }), headers: { 'content-type': 'application/json' } });

  it.each([['0.0.0.0'], ['[::]'], ['localhost'], ['[::ffff:127.0.0.1]']])('answers 400 grant_invalid naming listen for %s:<port>, and opens nothing', async (host) => {
    const port = await unusedPort();
    const answer = await issue(`${host}:${port}`);
    expect(answer).toMatchObject({ status: 400, json: { error: 'grant_invalid', issues: [{ path: 'listen', message: expect.stringContaining('loopback') }] } });
    expect(await refusesConnection(port)).toBe(true);
    expect(sluice.app.ledger.list()).toEqual([]);
  });

  it.each([['127.0.0.1'], ['[::1]']])('still opens %s:<port>', async (host) => {
    const port = await unusedPort(host === '[::1]' ? '::1' : '127.0.0.1');
    const answer = await issue(`${host}:${port}`);
    expect(answer.status).toBe(201);
    await sluice.app.control.revokeGrant((answer.json as { id: string }).id);
  });
});

describe('a stored run-time grant whose listener is not loopback', () => {
  const running: TestSluice[] = [];
  let state: string;

  beforeAll(() => {
    state = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-remote-ledger-'));
  });
  afterEach(async () => {
    for (const s of running.splice(0)) await s.close();
  });
  afterAll(() => fs.rmSync(state, { recursive: true, force: true }));

  it('is not reopened on restart (a ledger written before the check)', async () => {
    const port = await unusedPort();
    const first = await startSluice({ state });
    running.push(first);
    const issued = await first.app.control.issueGrant({ destinations: ['https://a.test'], listen: `127.0.0.1:${port}` });
    expect(issued.ok).toBe(true);
    await first.close();
    running.length = 0;
    const ledgerFile = path.join(state, 'ledger.json');
    fs.writeFileSync(ledgerFile, fs.readFileSync(ledgerFile, 'utf8').replace(`127.0.0.1:${port}`, `0.0.0.0:${port}`));
    running.push(await startSluice({ state }));
    expect(await refusesConnection(port)).toBe(true);
  });
});
