// A reload applies the listeners section (issue 17, item 2): a listener added is bound, one removed or
// changed is closed, and a tunnel on an unchanged listener keeps echoing throughout. A listener that
// cannot bind rolls the whole reload back: the running listeners stay, and the grants in the same file are
// not applied either, so an operator never runs half of a file. The answer says what changed and what
// needs a restart. A reload also opens the audit file again, as logrotate's postrotate expects.
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parse, stringify } from 'yaml';
import { afterEach, describe, expect, it } from 'vitest';
import { startApp, type SluiceApp } from '../../src/app.js';
import type { OperationalLog } from '../../src/audit/index.js';
import { loadConfig } from '../../src/config/index.js';
import { startFixtureConnectProxy } from '../support/fault-servers.js';
import { startTcpEchoServer, type EchoServer } from '../support/origins.js';
import { unusedPort } from '../support/ports.js';
import { openConnectTunnel, type ConnectTunnel } from '../support/raw-client.js';
import { OWN_UID, silentLog, tokenHash } from '../support/sluice.js';
import { waitUntil, withTimeout } from '../support/wait.js';

const TOKEN = 'tok-reload-listeners';
const BEARER = { 'Proxy-Authorization': `Bearer ${TOKEN}` };
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

interface Running {
  readonly app: SluiceApp;
  readonly file: string;
  readonly audit: string;
  rewrite(edit: (config: Record<string, unknown>) => void): void;
}

async function start(echoPort: number, extra: Record<string, unknown> = {}, log: OperationalLog = silentLog): Promise<Running> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-reload-listeners-'));
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'sluice.yaml');
  fs.writeFileSync(file, stringify({
    listeners: [{ name: 'shared', listen: '127.0.0.1:0', identify: 'token' }],
    state: path.join(dir, 'state'),
    audit: { file: path.join(dir, 'audit.jsonl') },
    grants: [{ id: 'g', tokenSha256: tokenHash(TOKEN), destinations: [`tcp://127.0.0.1:${echoPort}`], allowAddressClasses: ['loopback'] }],
    ...extra,
  }));
  const loaded = await loadConfig(file, dir);
  if (!loaded.ok) throw new Error(`config: ${JSON.stringify(loaded.issues)}`);
  const app = await startApp(loaded.config, { env: {}, cwd: dir, uid: OWN_UID, log });
  cleanups.push(() => app.close());
  return {
    app,
    file,
    audit: path.join(dir, 'audit.jsonl'),
    rewrite(edit) {
      const config = parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>;
      edit(config);
      fs.writeFileSync(file, stringify(config));
    },
  };
}

function portOf(app: SluiceApp, name: string): number | undefined {
  const bound = app.listeners.find((l) => l.name === name);
  return bound === undefined ? undefined : Number(bound.address.split(':').at(-1));
}

async function echoServer(): Promise<EchoServer> {
  const server = await startTcpEchoServer();
  cleanups.push(() => server.close());
  return server;
}

/** A tunnel that stays open; `echoes()` proves it still relays. */
async function liveTunnel(port: number, target: string): Promise<{ tunnel: ConnectTunnel; echoes: (text: string) => Promise<string> }> {
  const tunnel = await openConnectTunnel(port, target, BEARER);
  cleanups.push(() => void tunnel.socket.destroy());
  expect(tunnel.status).toBe(200);
  const echoes = (text: string): Promise<string> =>
    withTimeout(new Promise<string>((resolve) => {
      tunnel.socket.once('data', (chunk: Buffer) => resolve(chunk.toString('utf8')));
      tunnel.socket.write(text);
    }), 3000, 'the echo through the live tunnel');
  return { tunnel, echoes };
}

async function status(port: number, target: string, headers: Record<string, string> = BEARER): Promise<number> {
  const t = await openConnectTunnel(port, target, headers);
  t.socket.destroy();
  return t.status;
}

function refusesConnections(port: number): Promise<boolean> {
  return withTimeout(new Promise<boolean>((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => resolve(true));
  }), 3000, `a connection to ${port}`);
}

type Listener = { name: string; listen: string; identify?: string };

type LogLine = { level: 'info' | 'warn' | 'error'; obj: object; msg: string };

/** An operational log that keeps its lines. */
function captureLog(): { lines: LogLine[]; log: OperationalLog } {
  const lines: LogLine[] = [];
  const at = (level: LogLine['level']) => (obj: object, msg: string): void => void lines.push({ level, obj, msg });
  return { lines, log: { info: at('info'), warn: at('warn'), error: at('error') } };
}

describe('reload applies the listeners section', () => {
  it('adds, changes and removes listeners while a tunnel on the unchanged one keeps echoing', async () => {
    const echo = await echoServer();
    const target = `127.0.0.1:${echo.port}`;
    const s = await start(echo.port);
    const shared = portOf(s.app, 'shared') as number;
    const live = await liveTunnel(shared, target);
    expect(await live.echoes('before')).toBe('before');

    const extraPort = await unusedPort();
    s.rewrite((c) => (c['listeners'] as Listener[]).push({ name: 'extra', listen: `127.0.0.1:${extraPort}`, identify: 'token' }));
    const added = await s.app.control.reload();
    expect(added).toMatchObject({ ok: true, value: { changed: ['listeners'], needsRestart: [], listeners: { added: ['extra'], removed: [], changed: [] } } });
    expect(portOf(s.app, 'extra')).toBe(extraPort);
    expect(await status(extraPort, target)).toBe(200);
    expect(await live.echoes('after add')).toBe('after add');

    const movedPort = await unusedPort();
    s.rewrite((c) => {
      const extra = (c['listeners'] as Listener[]).find((l) => l.name === 'extra');
      if (extra !== undefined) extra.listen = `127.0.0.1:${movedPort}`;
    });
    expect(await s.app.control.reload()).toMatchObject({ ok: true, value: { listeners: { added: [], removed: [], changed: ['extra'] } } });
    expect(await status(movedPort, target)).toBe(200);
    expect(await refusesConnections(extraPort)).toBe(true);
    expect(await live.echoes('after change')).toBe('after change');

    s.rewrite((c) => {
      c['listeners'] = (c['listeners'] as Listener[]).filter((l) => l.name !== 'extra');
    });
    expect(await s.app.control.reload()).toMatchObject({ ok: true, value: { listeners: { added: [], removed: ['extra'], changed: [] } } });
    expect(await refusesConnections(movedPort)).toBe(true);
    expect(s.app.listeners.map((l) => l.name)).toEqual(['shared']);
    expect(await live.echoes('after remove')).toBe('after remove');
  });

  it('a listener that cannot bind rolls the whole reload back: listeners and grants as they were', async () => {
    const echo = await echoServer();
    const other = await echoServer();
    const s = await start(echo.port);
    const shared = portOf(s.app, 'shared') as number;
    // The port the new listener wants is taken by someone else.
    const squatter = net.createServer();
    await new Promise<void>((resolve) => squatter.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => squatter.close(() => resolve())));
    const taken = (squatter.address() as net.AddressInfo).port;
    s.rewrite((c) => {
      (c['listeners'] as Listener[]).push({ name: 'extra', listen: `127.0.0.1:${taken}`, identify: 'token' });
      // The same file also moves the grant to another destination: that must not be applied either.
      (c['grants'] as { destinations: string[] }[])[0]!.destinations = [`tcp://127.0.0.1:${other.port}`];
    });
    const refused = await s.app.control.reload();
    expect(refused.ok).toBe(false);
    // In the words `sluice start` uses for the same address (UX review 2026-12-04 finding 12; issue 25).
    if (!refused.ok) expect(refused.issues[0]).toEqual({ path: 'listeners[1].listen', message: `127.0.0.1:${taken} is in use (is another sluice running?)` });
    expect(s.app.listeners.map((l) => l.name)).toEqual(['shared']);
    expect(await status(shared, `127.0.0.1:${echo.port}`)).toBe(200);
    expect(await status(shared, `127.0.0.1:${other.port}`)).toBe(403);
  });

  it('says which changed sections it did not apply (they need a restart)', async () => {
    const echo = await echoServer();
    const s = await start(echo.port);
    s.rewrite((c) => {
      c['state'] = path.join(path.dirname(s.file), 'state-elsewhere');
      c['log'] = { level: 'debug' };
    });
    expect(await s.app.control.reload()).toMatchObject({ ok: true, value: { changed: ['state', 'log'], needsRestart: ['state'] } });
  });

  it('compares against the config in force: a restart-only change reverted before any restart reports nothing (UX review 2026-12-04 finding 11)', async () => {
    const echo = await echoServer();
    const log = captureLog();
    const s = await start(echo.port, {}, log.log);
    const first = String(parse(fs.readFileSync(s.file, 'utf8')).state);
    s.rewrite((c) => {
      c['state'] = path.join(path.dirname(s.file), 'state-elsewhere');
    });
    expect(await s.app.control.reload()).toMatchObject({ ok: true, value: { changed: ['state'], needsRestart: ['state'] } });
    // Still not in force: said again.
    expect(await s.app.control.reload()).toMatchObject({ ok: true, value: { changed: ['state'], needsRestart: ['state'] } });
    s.rewrite((c) => {
      c['state'] = first;
    });
    expect(await s.app.control.reload()).toMatchObject({ ok: true, value: { changed: [], needsRestart: [] } });
    expect(log.lines.filter((l) => l.level === 'warn').map((l) => l.msg)).toEqual([
      'config reloaded, but a change to state takes effect only after a restart',
      'config reloaded, but a change to state takes effect only after a restart',
    ]);
    expect(log.lines.at(-1)).toMatchObject({ level: 'info', msg: 'config reloaded: nothing changed' });
  });

  it('names several sections that wait for a restart in one sentence', async () => {
    const echo = await echoServer();
    const log = captureLog();
    const s = await start(echo.port, {}, log.log);
    s.rewrite((c) => {
      c['state'] = path.join(path.dirname(s.file), 'state-elsewhere');
      c['ledger'] = { maxStaleMs: 2000 };
      c['admin'] = { drainTimeoutMs: 1234 };
    });
    const reloaded = await s.app.control.reload();
    expect(reloaded.ok).toBe(true);
    const waiting = reloaded.ok ? reloaded.value.needsRestart : [];
    expect([...waiting].sort()).toEqual(['admin', 'ledger', 'state']);
    expect(log.lines.filter((l) => l.level === 'warn').map((l) => l.msg)).toEqual([`config reloaded, but changes to ${waiting[0]}, ${waiting[1]} and ${waiting[2]} take effect only after a restart`]);
  });

  it('a refused reload is logged once, at error, saying once that the running config is kept', async () => {
    const echo = await echoServer();
    const log = captureLog();
    const s = await start(echo.port, {}, log.log);
    const squatter = net.createServer();
    await new Promise<void>((resolve) => squatter.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => squatter.close(() => resolve())));
    const taken = (squatter.address() as net.AddressInfo).port;
    s.rewrite((c) => (c['listeners'] as Listener[]).push({ name: 'extra', listen: `127.0.0.1:${taken}`, identify: 'token' }));
    const refused = await s.app.control.reload();
    expect(refused).toMatchObject({ ok: false, reason: 'config_invalid' });
    const issue = refused.ok ? undefined : refused.issues[0];
    expect(issue?.message).not.toMatch(/running config/);
    const errors = log.lines.filter((l) => l.level === 'error');
    expect(errors.map((l) => l.msg)).toEqual([`reload refused, keeping the running config: listeners[1].listen: ${issue?.message ?? ''}`]);
    expect(errors[0]?.obj).toEqual({ issues: [issue] });
  });

  it('applies limits and timeouts to new connections: a lower maxConnections refuses the next one, live ones keep going', async () => {
    const echo = await echoServer();
    const target = `127.0.0.1:${echo.port}`;
    const s = await start(echo.port);
    const port = portOf(s.app, 'shared') as number;
    const headers: Record<string, string> = { ...BEARER };
    for (let i = 0; i < 10; i++) headers[`X-Extra-${i}`] = 'x';
    // Ten extra fields pass under the default maxHeaderCount.
    expect(await status(port, target, headers)).toBe(200);
    const live = await liveTunnel(port, target);
    s.rewrite((c) => {
      c['limits'] = { maxConnections: 1, maxHeaderCount: 8 };
      c['timeouts'] = { dialMs: 1500 };
    });
    expect(await s.app.control.reload()).toMatchObject({ ok: true, value: { changed: ['timeouts', 'limits'], needsRestart: [] } });
    expect(s.app.runtime.dial.timeoutMs).toBe(1500);
    expect(await status(port, target)).toBe(429); // connections_exhausted
    expect(await live.echoes('still here')).toBe('still here');
    live.tunnel.socket.destroy();
    s.rewrite((c) => {
      c['limits'] = { maxConnections: 100, maxHeaderCount: 8 };
    });
    expect(await s.app.control.reload()).toMatchObject({ ok: true });
    expect(await status(port, target)).toBe(200);
    const crowded = await openConnectTunnel(port, target, headers);
    crowded.socket.destroy();
    expect([crowded.status, /details="headers_too_large"/.test(crowded.head)]).toEqual([400, true]);
  });

  it('applies dns: a name whose dns.hosts answer moved to a forbidden address is refused at the next hop, never dialed', async () => {
    const echo = await echoServer();
    const s = await start(echo.port);
    const port = portOf(s.app, 'shared') as number;
    s.rewrite((c) => {
      c['dns'] = { hosts: { 'svc.test': ['127.0.0.1'] } };
      (c['grants'] as { destinations: string[] }[])[0]!.destinations = [`tcp://svc.test:${echo.port}`];
    });
    expect(await s.app.control.reload()).toMatchObject({ ok: true, value: { needsRestart: [] } });
    // Twice: the second is answered from the hop cache.
    expect(await status(port, `svc.test:${echo.port}`)).toBe(200);
    expect(await status(port, `svc.test:${echo.port}`)).toBe(200);
    const dialed = echo.connections;
    s.rewrite((c) => {
      c['dns'] = { hosts: { 'svc.test': ['10.0.0.1'] } };
    });
    expect(await s.app.control.reload()).toMatchObject({ ok: true, value: { changed: ['dns'], needsRestart: [] } });
    expect(await status(port, `svc.test:${echo.port}`)).toBe(403);
    expect(echo.connections).toBe(dialed);
  });

  it('applies route: after a reload to an upstream proxy, the next tunnel goes through it', async () => {
    const echo = await echoServer();
    const upstream = await startFixtureConnectProxy();
    cleanups.push(() => upstream.close());
    const s = await start(echo.port);
    const port = portOf(s.app, 'shared') as number;
    const target = `127.0.0.1:${echo.port}`;
    expect(await status(port, target)).toBe(200);
    expect(upstream.targets).toEqual([]);
    s.rewrite((c) => {
      c['route'] = { mode: 'proxy', proxy: { url: upstream.url } };
    });
    expect(await s.app.control.reload()).toMatchObject({ ok: true, value: { changed: ['route'], needsRestart: [] } });
    expect(await status(port, target)).toBe(200);
    expect(upstream.targets).toEqual([target]);
    // And back to direct: the upstream sees nothing more.
    s.rewrite((c) => {
      c['route'] = { mode: 'direct' };
    });
    expect(await s.app.control.reload()).toMatchObject({ ok: true, value: { changed: ['route'] } });
    expect(await status(port, target)).toBe(200);
    expect(upstream.targets).toEqual([target]);
  });
});

describe('reload and the audit file', () => {
  const decisions = (file: string): number => (fs.existsSync(file) ? fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.includes('"kind":"decision"')).length : 0);

  it('after logrotate moved the file, a reload writes new records to a new file and none are lost', async () => {
    const echo = await echoServer();
    const target = `127.0.0.1:${echo.port}`;
    const s = await start(echo.port);
    const port = portOf(s.app, 'shared') as number;
    expect(await status(port, target)).toBe(200);
    await waitUntil(() => decisions(s.audit) === 1, { timeoutMs: 3000, label: 'the first record written' });
    const rotated = `${s.audit}.1`;
    fs.renameSync(s.audit, rotated);
    // Written after the move, before the reload: it still goes to the moved file (the open descriptor).
    expect(await status(port, target)).toBe(200);
    expect(await s.app.control.reload()).toMatchObject({ ok: true, value: { changed: [] } });
    expect(await status(port, target)).toBe(200);
    await waitUntil(() => decisions(s.audit) === 1 && decisions(rotated) === 2, { timeoutMs: 3000, label: 'one record in the new file, two in the rotated one' });
    expect((fs.statSync(s.audit).mode & 0o777).toString(8)).toBe('600');
  });

  it('a reload that names another audit file writes there from then on', async () => {
    const echo = await echoServer();
    const target = `127.0.0.1:${echo.port}`;
    const s = await start(echo.port);
    const port = portOf(s.app, 'shared') as number;
    const moved = path.join(path.dirname(s.audit), 'elsewhere', 'audit.jsonl');
    s.rewrite((c) => {
      c['audit'] = { file: moved };
    });
    expect(await s.app.control.reload()).toMatchObject({ ok: true, value: { changed: ['audit'], needsRestart: [] } });
    expect(await status(port, target)).toBe(200);
    await waitUntil(() => decisions(moved) === 1, { timeoutMs: 3000, label: 'the record in the new audit file' });
    expect(decisions(s.audit)).toBe(0);
  });
});

describe('reload and the metrics listener', () => {
  it('moves the metrics listener: the new address serves /metrics, the old one is closed', async () => {
    const echo = await echoServer();
    const first = await unusedPort();
    const s = await start(echo.port, { admin: { metrics: `127.0.0.1:${first}` } });
    expect(s.app.metricsAddress).toBe(`127.0.0.1:${first}`);
    const moved = await unusedPort();
    s.rewrite((c) => {
      c['admin'] = { metrics: `127.0.0.1:${moved}` };
    });
    expect(await s.app.control.reload()).toMatchObject({ ok: true, value: { changed: ['admin'], needsRestart: [] } });
    expect(s.app.metricsAddress).toBe(`127.0.0.1:${moved}`);
    const scraped = await fetch(`http://127.0.0.1:${moved}/metrics`);
    expect([scraped.status, (await scraped.text()).includes('sluice_connections_total')]).toEqual([200, true]);
    await waitUntil(() => refusesConnections(first), { timeoutMs: 3000, label: 'the old metrics address closed' });
  });

  it('refuses a move to a port in use, in the words start uses, and keeps serving on the old one', async () => {
    const echo = await echoServer();
    const first = await unusedPort();
    const s = await start(echo.port, { admin: { metrics: `127.0.0.1:${first}` } });
    const squatter = net.createServer();
    await new Promise<void>((resolve) => squatter.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => squatter.close(() => resolve())));
    const taken = (squatter.address() as net.AddressInfo).port;
    s.rewrite((c) => {
      c['admin'] = { metrics: `127.0.0.1:${taken}` };
    });
    const refused = await s.app.control.reload();
    expect(refused).toMatchObject({ ok: false, reason: 'config_invalid' });
    if (!refused.ok) expect(refused.issues).toEqual([{ path: 'admin.metrics', message: `127.0.0.1:${taken} is in use (is another sluice running?)` }]);
    expect(s.app.metricsAddress).toBe(`127.0.0.1:${first}`);
    expect((await fetch(`http://127.0.0.1:${first}/healthz`)).status).toBe(200);
  });

  it('switching metrics on at run time is reported as needing a restart (nothing was counted)', async () => {
    const echo = await echoServer();
    const s = await start(echo.port);
    const port = await unusedPort();
    s.rewrite((c) => {
      c['admin'] = { metrics: `127.0.0.1:${port}` };
    });
    expect(await s.app.control.reload()).toMatchObject({ ok: true, value: { changed: ['admin'], needsRestart: ['admin'] } });
    expect(s.app.metricsAddress).toBeNull();
  });
});
