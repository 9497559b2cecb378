// The control plane the admin API drives, over a real Ledger on a temp state dir, a real GrantRegistry and
// DedicatedListeners over a fake ListenerPort. What a bad admin request or a leaky view could do: issue a
// grant from an invalid body (or one that picks its own id or token), leak the token after issue (it is
// returned once and is in no view, nor in the state file), half-issue a grant whose listener never
// opened, take over another grant's dedicated listener, forget a config grant the file would bring back,
// or revoke a generation and touch another generation's grants.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { EventEmitter } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { configSchema } from '../../../src/config/index.js';
import { Ledger, LedgerStore, LEDGER_FILE } from '../../../src/ledger/index.js';
import { HostAddresses, SelfAddresses } from '../../../src/resolve/index.js';
import { sha256 } from '../../../src/identity/index.js';
import { createControl, DedicatedListeners, GrantRegistry, type GrantConnection, type GrantListener, type ListenerPort } from '../../../src/grant/index.js';
import type { CloseReason, ControlResult, ProxyControl } from '../../../src/core/index.js';
import { OWN_UID, tokenHash } from '../../support/sluice.js';

interface FakePort extends ListenerPort<GrantListener> {
  readonly opened: string[];
  readonly stopped: string[];
  failWith: string | null;
}

function fakePort(): FakePort {
  let next = 41_000;
  const port: FakePort = {
    opened: [],
    stopped: [],
    failWith: null,
    open: (_grantId, listen) => {
      port.opened.push(listen);
      if (port.failWith !== null) return Promise.reject(new Error(port.failWith));
      return Promise.resolve({ address: listen.endsWith(':0') ? `${listen.slice(0, -2)}:${next++}` : listen });
    },
    stop: (listeners) => {
      port.stopped.push(...listeners.map((l) => l.address));
      return Promise.resolve();
    },
  };
  return port;
}

interface FakeConnection extends GrantConnection {
  readonly ended: CloseReason[];
}

function connection(): FakeConnection {
  const ended: CloseReason[] = [];
  return { grantId: null, liveSlot: -1, tunnelHop: null, socket: new EventEmitter(), ended, end: (reason) => void ended.push(reason), limitDuration: () => undefined };
}

const NO_INTERFACES = new HostAddresses(() => ({}));
const VALID = { destinations: ['https://api.a.test'], allowAddressClasses: ['private'] };

interface Setup {
  readonly dir: string;
  readonly ledger: Ledger;
  readonly registry: GrantRegistry;
  readonly port: FakePort;
  readonly dedicated: DedicatedListeners;
  readonly control: ProxyControl;
}

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

async function build(configGrants: Record<string, unknown>[] = []): Promise<Setup> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-control-'));
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  const ledger = await Ledger.open(new LedgerStore(dir, OWN_UID));
  const self = new SelfAddresses([], NO_INTERFACES);
  const registry = new GrantRegistry(self, Date.now);
  cleanups.push(() => registry.close());
  const port = fakePort();
  const dedicated = new DedicatedListeners(port, self);
  cleanups.push(() => dedicated.closeAll(0));
  // Config grants as app.ts installs them: into the ledger, then compiled into the registry.
  const sections = configSchema.shape.grants.parse(configGrants);
  ledger.setConfigGrants(sections);
  registry.install(sections.map((section, i) => {
    const { id, tokenSha256: _h, tokenEnv: _e, ...spec } = section;
    const compiled = registry.compile({ id, spec, revoked: false, tokenSha256: null }, `grants[${i}]`);
    if (!compiled.ok) throw new Error(JSON.stringify(compiled.issues));
    return { grant: compiled.value, tokenSha256: null };
  }));
  const control = createControl({
    ledger,
    registry,
    dedicated,
    cwd: dir,
    reload: () => Promise.resolve({ ok: true, value: { endedConnections: 0, changed: [], needsRestart: [], listeners: { added: [], removed: [], changed: [] } } }),
    readiness: () => ({ ready: true, detail: 'listening' }),
    ledgerFresh: () => true,
  });
  return { dir, ledger, registry, port, dedicated, control };
}

function value<T>(result: ControlResult<T>): T {
  if (!result.ok) throw new Error(`expected ok, got ${JSON.stringify(result)}`);
  return result.value;
}

async function issue(s: Setup, body: Record<string, unknown> = VALID): Promise<{ id: string; token: string }> {
  const { id, token } = value(await s.control.issueGrant(body));
  return { id, token };
}

function attach(s: Setup, id: string): FakeConnection {
  const grant = s.registry.grants.get(id);
  if (grant === undefined) throw new Error(`grant ${id} not installed`);
  const ctx = connection();
  if (!s.registry.attach(ctx, grant).ok) throw new Error('attach refused');
  return ctx;
}

/** The ledger as a restart would read it from the state dir. */
const reopened = (s: Setup): Promise<Ledger> => Ledger.open(new LedgerStore(s.dir, OWN_UID));

describe('issueGrant: an invalid body issues nothing', () => {
  it.each<[string, unknown, string[]]>([
    ['destinations not a list', { destinations: 'https://a.test' }, ['destinations']],
    ['the request picking its own id', { ...VALID, id: 'admin' }, ['(root)']],
    ['the request picking its own token', { ...VALID, tokenSha256: 'a'.repeat(64) }, ['(root)']],
    ['an address class that can never be granted', { ...VALID, allowAddressClasses: ['self'] }, ['allowAddressClasses[0]']],
    ['a zero connection cap', { ...VALID, limits: { maxConcurrent: 0 } }, ['limits.maxConcurrent']],
    ['an expiry that is not a date-time', { ...VALID, limits: { expiresAt: 'tomorrow' } }, ['limits.expiresAt']],
    ['a dedicated listener the network can reach', { ...VALID, listen: '0.0.0.0:9000' }, ['listen']],
    ['a dedicated listener on a name', { ...VALID, listen: 'localhost:9000' }, ['listen']],
    ['a body that is not an object', null, ['(root)']],
    ['bad destinations and addresses (compile stage)', { destinations: ['https://ok.test', 'ftp://a.test', 'https://*x.test'], allowAddresses: ['10.0.0.0/8', 'intranet'] }, ['destinations[1]', 'destinations[2]', 'allowAddresses[1]']],
  ])('refuses %s: 400 grant_invalid naming the key path', async (_what, body, paths) => {
    const s = await build();
    const result = await s.control.issueGrant(body);
    expect(result).toMatchObject({ ok: false, status: 400, reason: 'grant_invalid' });
    if (!result.ok) expect(result.issues.map((i) => i.path)).toEqual(paths);
    expect(s.ledger.list()).toEqual([]);
    expect(s.registry.grants.size).toBe(0);
    expect(s.port.opened).toEqual([]);
    expect(fs.existsSync(path.join(s.dir, LEDGER_FILE))).toBe(false);
  });
});

describe('issueGrant: the token is returned once and is in no view', () => {
  it('installs the grant with its token hash, durable in the ledger, and returns an unguessable token', async () => {
    const s = await build();
    const { id, token } = await issue(s);
    expect(token).toMatch(/^sluice_[A-Za-z0-9_-]{43}$/);
    const hash = sha256(token).toString('hex');
    expect(s.ledger.get(id)).toMatchObject({ id, source: 'runtime', tokenSha256: hash, revokedAt: null });
    expect(s.registry.grants.get(id)).toMatchObject({ id, revoked: false });
    expect(s.registry.tokens.findByToken(token)).toBe(id);
    expect(s.registry.tokens.verify(id, token)).toBe(true);
    expect((await reopened(s)).get(id)?.tokenSha256).toBe(hash);
    const other = await issue(s);
    expect(other.id).not.toBe(id);
    expect(other.token).not.toBe(token);
    expect(s.registry.tokens.findByToken(other.token)).toBe(other.id);
  });

  it('puts neither the token nor its hash in the issue view, listGrants or getGrant, and only the hash in the state file', async () => {
    const s = await build();
    const issued = value(await s.control.issueGrant(VALID));
    const hash = sha256(issued.token).toString('hex');
    const views = JSON.stringify([issued.grant, s.control.listGrants(), s.control.getGrant(issued.id)]);
    expect(views).toContain(issued.id);
    expect(views).not.toContain(issued.token);
    expect(views).not.toContain(issued.token.slice('sluice_'.length));
    expect(views).not.toContain(hash);
    const stateFile = fs.readFileSync(path.join(s.dir, LEDGER_FILE), 'utf8');
    expect(stateFile).toContain(hash);
    expect(stateFile).not.toContain(issued.token.slice('sluice_'.length));
  });

  it('views the grant as issued: limits, expiry, generation, the real listener address and live usage', async () => {
    const s = await build();
    const expiresAt = new Date(Date.now() + 3_600_000).toISOString();
    const issued = value(await s.control.issueGrant({ ...VALID, generation: 'run-1', listen: '127.0.0.1:0', limits: { maxConcurrent: 3, expiresAt } }));
    expect(issued.grant).toMatchObject({
      id: issued.id,
      source: 'runtime',
      generation: 'run-1',
      destinations: VALID.destinations,
      limits: { maxConcurrent: 3, expiresAt },
      expiresAt,
      revokedAt: null,
      listen: '127.0.0.1:41000',
      usage: { activeConnections: 0, connections: 0, bytes: 0 },
    });
    attach(s, issued.id);
    s.registry.addBytes(issued.id, 42);
    expect(s.control.getGrant(issued.id)?.usage).toEqual({ activeConnections: 1, connections: 1, bytes: 42 });
    expect(s.control.getGrant('g-unknown')).toBeUndefined();
  });
});

describe('issueGrant with a dedicated listener', () => {
  it('refuses a listen address another grant’s listener holds: 409 listen_in_use, nothing issued, the port not asked', async () => {
    const s = await build();
    const first = await issue(s, { ...VALID, listen: 'unix:/run/sluice/a.sock' });
    const result = await s.control.issueGrant({ destinations: ['https://evil.test'], listen: 'unix:/run/sluice/a.sock' });
    expect(result).toMatchObject({ ok: false, status: 409, reason: 'listen_in_use', issues: [{ path: 'listen' }] });
    expect(s.ledger.list().map((r) => r.id)).toEqual([first.id]);
    expect(s.port.opened).toEqual(['unix:/run/sluice/a.sock']);
    expect(s.dedicated.addressOf(first.id)).toBe('unix:/run/sluice/a.sock');
  });

  it('refuses the real address a port-0 listener bound', async () => {
    const s = await build();
    await issue(s, { ...VALID, listen: '127.0.0.1:0' });
    expect(await s.control.issueGrant({ ...VALID, listen: '127.0.0.1:41000' })).toMatchObject({ ok: false, status: 409, reason: 'listen_in_use' });
  });

  it('revokes a grant whose listener fails to open (409 listen_failed): never half-issued, and durable', async () => {
    const s = await build();
    s.port.failWith = 'listen EADDRINUSE: address already in use 127.0.0.1:9000';
    const result = await s.control.issueGrant({ ...VALID, listen: '127.0.0.1:9000' });
    expect(result).toMatchObject({ ok: false, status: 409, reason: 'listen_failed', issues: [{ path: 'listen', message: expect.stringContaining('EADDRINUSE') }] });
    const records = s.ledger.list();
    expect(records).toHaveLength(1);
    const id = records[0]?.id ?? '';
    expect(records[0]?.revokedAt).not.toBeNull();
    expect(s.registry.grants.get(id)?.revoked).toBe(true);
    expect(s.dedicated.addressOf(id)).toBeNull();
    expect((await reopened(s)).get(id)?.revokedAt).not.toBeNull();
  });

  // Issue 23, review 2026-12-04 finding 3: bound relative, /proc/net/unix listed the socket
  // relative and `sluice run` never masked it.
  it('resolves a relative unix: listen against Sluice\'s working directory before the in-use check, the bind and the ledger', async () => {
    const s = await build();
    const absolute = `unix:${path.join(s.dir, 'agents', 'c.sock')}`;
    const issued = value(await s.control.issueGrant({ ...VALID, listen: 'unix:agents/./c.sock' }));
    expect(issued.grant.listen).toBe(absolute);
    expect(s.port.opened).toEqual([absolute]);
    expect(s.ledger.get(issued.id)?.spec.listen).toBe(absolute);
    expect(JSON.parse(fs.readFileSync(path.join(s.dir, LEDGER_FILE), 'utf8'))).toMatchObject({ runtime: [{ id: issued.id, spec: { listen: absolute } }] });
    expect(await s.control.issueGrant({ ...VALID, listen: absolute })).toMatchObject({ ok: false, status: 409, reason: 'listen_in_use' });
  });

  it.each([['unix:'], ['unix:agents/'], ['unix:.'], ['unix:agents/..']])('still refuses %s by name (checked as written, before it is resolved)', async (listen) => {
    const s = await build();
    expect(await s.control.issueGrant({ ...VALID, listen })).toMatchObject({ ok: false, status: 400, reason: 'grant_invalid', issues: [{ path: 'listen' }] });
    expect(s.port.opened).toEqual([]);
  });
});

describe('revokeGrant', () => {
  it('answers 404 grant_not_found for an unknown id and changes nothing', async () => {
    const s = await build();
    const { id } = await issue(s);
    expect(await s.control.revokeGrant('g-unknown')).toMatchObject({ ok: false, status: 404, reason: 'grant_not_found' });
    expect(s.ledger.get(id)?.revokedAt).toBeNull();
  });

  it('ends the grant’s connections (and counts them), closes its listener, keeps it revoked after a restart, touches no other grant', async () => {
    const s = await build();
    const a = await issue(s, { ...VALID, listen: 'unix:/run/sluice/a.sock' });
    const b = await issue(s, { ...VALID, listen: 'unix:/run/sluice/b.sock' });
    const a1 = attach(s, a.id);
    const a2 = attach(s, a.id);
    const b1 = attach(s, b.id);
    const revoked = value(await s.control.revokeGrant(a.id));
    expect(revoked.endedConnections).toBe(2);
    expect(revoked.grant.revokedAt).not.toBeNull();
    expect(a1.ended).toEqual(['revoked']);
    expect(a2.ended).toEqual(['revoked']);
    expect(b1.ended).toEqual([]);
    expect(s.registry.grants.get(a.id)?.revoked).toBe(true);
    expect(s.registry.grants.get(b.id)?.revoked).toBe(false);
    expect(s.port.stopped).toEqual(['unix:/run/sluice/a.sock']);
    expect(s.dedicated.addressOf(b.id)).toBe('unix:/run/sluice/b.sock');
    expect(s.control.getGrant(a.id)?.revokedAt).not.toBeNull();
    expect((await reopened(s)).get(a.id)?.revokedAt).not.toBeNull();
    expect((await reopened(s)).get(b.id)?.revokedAt).toBeNull();
  });

  it('revokes a config grant too', async () => {
    const s = await build([{ id: 'cfg', destinations: ['https://a.test'] }]);
    const c1 = attach(s, 'cfg');
    expect(value(await s.control.revokeGrant('cfg')).endedConnections).toBe(1);
    expect(c1.ended).toEqual(['revoked']);
    // After a restart the file brings the grant back, and it loads revoked.
    const after = await reopened(s);
    after.setConfigGrants(configSchema.shape.grants.parse([{ id: 'cfg', destinations: ['https://a.test'] }]));
    expect(after.get('cfg')?.revokedAt).not.toBeNull();
  });
});

describe('forgetGrant', () => {
  it('refuses a config grant (409 grant_from_config): the file would bring it back, so it stays, unrevoked', async () => {
    const s = await build([{ id: 'cfg', destinations: ['https://a.test'] }]);
    const c1 = attach(s, 'cfg');
    expect(await s.control.forgetGrant('cfg')).toMatchObject({ ok: false, status: 409, reason: 'grant_from_config', issues: [{ path: 'id' }] });
    expect(s.ledger.get('cfg')).toMatchObject({ source: 'config', revokedAt: null });
    expect(s.registry.grants.get('cfg')?.revoked).toBe(false);
    expect(c1.ended).toEqual([]);
  });

  it('answers 404 grant_not_found for an unknown id', async () => {
    const s = await build();
    expect(await s.control.forgetGrant('g-unknown')).toMatchObject({ ok: false, status: 404, reason: 'grant_not_found' });
  });

  it('ends a run-time grant’s connections and drops it everywhere: ledger, state file, registry, token, listener', async () => {
    const s = await build();
    const a = await issue(s, { ...VALID, listen: 'unix:/run/sluice/a.sock' });
    const b = await issue(s);
    const a1 = attach(s, a.id);
    const b1 = attach(s, b.id);
    const forgotten = value(await s.control.forgetGrant(a.id));
    expect(forgotten.endedConnections).toBe(1);
    expect(forgotten.grant.revokedAt).not.toBeNull();
    expect(a1.ended[0]).toBe('revoked');
    expect(b1.ended).toEqual([]);
    expect(s.ledger.get(a.id)).toBeUndefined();
    expect(s.control.getGrant(a.id)).toBeUndefined();
    expect(s.control.listGrants().map((g) => g.id)).toEqual([b.id]);
    expect((await reopened(s)).get(a.id)).toBeUndefined();
    expect(s.registry.grants.has(a.id)).toBe(false);
    expect(s.registry.tokens.findByToken(a.token)).toBeUndefined();
    expect(s.registry.tokens.findByToken(b.token)).toBe(b.id);
    expect(s.port.stopped).toEqual(['unix:/run/sluice/a.sock']);
  });
});

describe('forgetGrant: what the answer reports', () => {
  it('reports what the grant used before it was forgotten, and leaves no usage entry behind', async () => {
    const s = await build();
    const a = await issue(s);
    attach(s, a.id);
    s.registry.addBytes(a.id, 500);
    const forgotten = value(await s.control.forgetGrant(a.id));
    expect(forgotten.grant.usage).toEqual({ activeConnections: 1, connections: 1, bytes: 500 });
    // A view never creates usage: the forgotten grant's counters are gone for good.
    expect(s.registry.usageView(a.id)).toEqual({ connections: 0, bytes: 0 });
    expect(s.control.getGrant(a.id)).toBeUndefined();
    expect((s.registry as unknown as { usage: Map<string, unknown> }).usage.has(a.id)).toBe(false);
  });
});

describe('revokeGeneration', () => {
  it('revokes only that generation’s live grants, ends only their connections, and closes only their listeners', async () => {
    const s = await build([{ id: 'cfg-run-1', generation: 'run-1', destinations: ['https://a.test'] }, { id: 'cfg-plain', destinations: ['https://a.test'] }]);
    const a1 = await issue(s, { ...VALID, generation: 'run-1', listen: 'unix:/run/sluice/a1.sock' });
    const a2 = await issue(s, { ...VALID, generation: 'run-1' });
    const b = await issue(s, { ...VALID, generation: 'run-2', listen: 'unix:/run/sluice/b.sock' });
    const plain = await issue(s);
    await s.control.revokeGrant(a2.id);
    const conns = { a1: attach(s, a1.id), cfg: attach(s, 'cfg-run-1'), b: attach(s, b.id), plain: attach(s, plain.id), cfgPlain: attach(s, 'cfg-plain') };
    s.port.stopped.length = 0;
    const result = value(await s.control.revokeGeneration('run-1'));
    expect([...result.revoked].sort()).toEqual([a1.id, 'cfg-run-1'].sort());
    expect(result.endedConnections).toBe(2);
    expect(conns.a1.ended).toEqual(['revoked']);
    expect(conns.cfg.ended).toEqual(['revoked']);
    expect(conns.b.ended).toEqual([]);
    expect(conns.plain.ended).toEqual([]);
    expect(conns.cfgPlain.ended).toEqual([]);
    expect(s.port.stopped).toEqual(['unix:/run/sluice/a1.sock']);
    const live = s.control.listGrants().filter((g) => g.revokedAt === null).map((g) => g.id).sort();
    expect(live).toEqual([b.id, plain.id, 'cfg-plain'].sort());
    expect(s.registry.grants.get(b.id)?.revoked).toBe(false);
    const after = await reopened(s);
    expect(after.get(a1.id)?.revokedAt).not.toBeNull();
    expect(after.get(b.id)?.revokedAt).toBeNull();
  });

  it('revokes nothing for a generation no live grant has', async () => {
    const s = await build();
    const { id } = await issue(s, { ...VALID, generation: 'run-1' });
    expect(value(await s.control.revokeGeneration('run-9'))).toEqual({ revoked: [], endedConnections: 0 });
    expect(s.ledger.get(id)?.revokedAt).toBeNull();
  });
});

describe('reload and readiness', () => {
  it('are the ones the composition root wired', async () => {
    const s = await build();
    expect(await s.control.reload()).toEqual({ ok: true, value: { endedConnections: 0, changed: [], needsRestart: [], listeners: { added: [], removed: [], changed: [] } } });
    expect(s.control.readiness()).toEqual({ ready: true, detail: 'listening' });
  });
});

// Rotation and the operational log, on a clock the test moves: a leaked token must stop at once (or at
// the grace's end, not later, across a restart too), a connection still using it must end, a config
// grant's token is the file's, and no log line ever holds a token.
describe('rotateGrant', () => {
  const T0 = Date.parse('2026-06-01T00:00:00Z');

  interface Clocked {
    readonly clock: { now: number };
    readonly dir: string;
    readonly ledger: Ledger;
    readonly registry: GrantRegistry;
    readonly control: ProxyControl;
    readonly lines: { level: string; obj: object; msg: string }[];
  }

  async function clocked(dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-rotate-')), clock = { now: T0 }, configGrants: Record<string, unknown>[] = []): Promise<Clocked> {
    cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
    const ledger = await Ledger.open(new LedgerStore(dir, OWN_UID), () => new Date(clock.now));
    const self = new SelfAddresses([], NO_INTERFACES);
    const registry = new GrantRegistry(self, () => clock.now);
    cleanups.push(() => registry.close());
    const dedicated = new DedicatedListeners(fakePort(), self);
    const sections = configSchema.shape.grants.parse(configGrants);
    ledger.setConfigGrants(sections);
    const revoked = new Set(ledger.list().filter((r) => r.revokedAt !== null).map((r) => r.id));
    registry.install(sections.map((section) => {
      const { id, tokenSha256, tokenEnv: _e, ...spec } = section;
      const compiled = registry.compile({ id, spec, revoked: revoked.has(id), tokenSha256: null }, '');
      if (!compiled.ok) throw new Error(JSON.stringify(compiled.issues));
      return { grant: compiled.value, tokenSha256: tokenSha256 === undefined ? null : Buffer.from(tokenSha256, 'hex') };
    }));
    // Run-time grants as app.ts installs them at start: the current hash only.
    for (const record of ledger.list()) {
      if (record.source !== 'runtime') continue;
      const compiled = registry.compile({ id: record.id, spec: record.spec, revoked: record.revokedAt !== null, tokenSha256: null }, '');
      if (compiled.ok) registry.install([{ grant: compiled.value, tokenSha256: record.tokenSha256 === null ? null : Buffer.from(record.tokenSha256, 'hex') }]);
    }
    const lines: Clocked['lines'] = [];
    const log = { info: (obj: object, msg: string) => void lines.push({ level: 'info', obj, msg }), warn: (obj: object, msg: string) => void lines.push({ level: 'warn', obj, msg }), error: (obj: object, msg: string) => void lines.push({ level: 'error', obj, msg }) };
    const control = createControl({ ledger, registry, dedicated, cwd: dir, log, reload: () => Promise.resolve({ ok: true, value: { endedConnections: 0, changed: [], needsRestart: [], listeners: { added: [], removed: [], changed: [] } } }), readiness: () => ({ ready: true, detail: '' }), ledgerFresh: () => true });
    return { clock, dir, ledger, registry, control, lines };
  }

  /** A connection identified by `token` (Basic with the grant id), as proxy/hop/identify-hop.ts leaves it. */
  function tokenConnection(s: Clocked, id: string, token: string): FakeConnection {
    const base = connection();
    const ctx: FakeConnection = { ...base, verifiedAuthorization: `Basic ${Buffer.from(`${id}:${token}`).toString('base64')}` } as FakeConnection;
    const grant = s.registry.grants.get(id);
    if (grant === undefined || !s.registry.attach(ctx, grant).ok) throw new Error('attach');
    return ctx;
  }

  function dedicatedConnection(s: Clocked, id: string): FakeConnection {
    const ctx = connection();
    const grant = s.registry.grants.get(id);
    if (grant === undefined || !s.registry.attach(ctx, grant).ok) throw new Error('attach');
    return ctx;
  }

  it('without a grace: the new token works, the old one stops at once, its connections end, the revision moves; only hashes are kept', async () => {
    const s = await clocked();
    const { id, token } = value(await s.control.issueGrant(VALID));
    const old = tokenConnection(s, id, token);
    const bound = dedicatedConnection(s, id);
    const before = s.registry.revision;
    const rotated = value(await s.control.rotateGrant(id, 0));
    expect(rotated.token).not.toBe(token);
    expect(rotated.token).toMatch(/^sluice_[A-Za-z0-9_-]{43}$/);
    expect(rotated.previousTokenUntil).toBeNull();
    expect(s.registry.revision).toBeGreaterThan(before);
    expect([s.registry.tokens.verify(id, token), s.registry.tokens.findByToken(token)]).toEqual([false, undefined]);
    expect([s.registry.tokens.verify(id, rotated.token), s.registry.tokens.findByToken(rotated.token)]).toEqual([true, id]);
    expect([rotated.endedConnections, old.ended, bound.ended]).toEqual([1, ['grant_changed'], []]);
    const state = fs.readFileSync(path.join(s.dir, LEDGER_FILE), 'utf8');
    expect(state).not.toContain(rotated.token);
    expect(state).toContain(sha256(rotated.token).toString('hex'));
    expect(state).not.toContain(sha256(token).toString('hex'));
    expect(JSON.stringify(rotated.grant)).not.toContain(sha256(rotated.token).toString('hex'));
  });

  it('with a grace: the old token works until previousTokenUntil and not after; its connections end then; the revision moves then', async () => {
    const s = await clocked();
    const { id, token } = value(await s.control.issueGrant(VALID));
    const old = tokenConnection(s, id, token);
    const rotated = value(await s.control.rotateGrant(id, 60_000));
    expect(rotated.previousTokenUntil).toBe(new Date(T0 + 60_000).toISOString());
    expect(rotated.endedConnections).toBe(0);
    const during = s.registry.revision;
    s.clock.now = T0 + 59_999;
    expect([s.registry.tokens.verify(id, token), s.registry.tokens.verify(id, rotated.token), s.registry.revision, old.ended]).toEqual([true, true, during, []]);
    s.clock.now = T0 + 60_000;
    // The revision read is what the hop cache does on every hop: the grace's end moves it, timer or not.
    expect(s.registry.revision).toBeGreaterThan(during);
    expect([s.registry.tokens.verify(id, token), s.registry.tokens.findByToken(token), old.ended]).toEqual([false, undefined, ['grant_changed']]);
  });

  it('a restart within the grace keeps it, and never stretches it; a restart after it does not bring the old token back', async () => {
    const s = await clocked();
    const { id, token } = value(await s.control.issueGrant(VALID));
    value(await s.control.rotateGrant(id, 60_000));
    s.clock.now = T0 + 30_000;
    const again = await clocked(s.dir, s.clock);
    expect(again.registry.tokens.verify(id, token)).toBe(true);
    s.clock.now = T0 + 60_000;
    expect(again.registry.tokens.verify(id, token)).toBe(false);
    const later = await clocked(s.dir, s.clock);
    expect(later.registry.tokens.verify(id, token)).toBe(false);
  });

  it('refuses what it must not rotate, changing nothing: a config grant (409 grant_from_config), a revoked grant (409 grant_revoked), an unknown id (404)', async () => {
    const s = await clocked(undefined, undefined, [{ id: 'cfg', tokenSha256: tokenHash('cfg-token'), destinations: ['https://a.test'] }]);
    const cfg = await s.control.rotateGrant('cfg', 0);
    expect(cfg).toMatchObject({ ok: false, status: 409, reason: 'grant_from_config' });
    expect(s.registry.tokens.verify('cfg', 'cfg-token')).toBe(true);
    const { id, token } = value(await s.control.issueGrant(VALID));
    value(await s.control.revokeGrant(id));
    expect(await s.control.rotateGrant(id, 0)).toMatchObject({ ok: false, status: 409, reason: 'grant_revoked' });
    expect(s.ledger.get(id)?.tokenSha256).toBe(sha256(token).toString('hex'));
    expect(await s.control.rotateGrant('g-nope', 0)).toMatchObject({ ok: false, status: 404, reason: 'grant_not_found' });
  });

  it('a stale fleet instance rotates nothing (503 ledger_unavailable)', async () => {
    const s = await clocked();
    const { id, token } = value(await s.control.issueGrant(VALID));
    const stale = createControl({ ledger: s.ledger, registry: s.registry, dedicated: new DedicatedListeners(fakePort(), new SelfAddresses([], NO_INTERFACES)), cwd: s.dir, reload: () => Promise.resolve({ ok: true, value: { endedConnections: 0, changed: [], needsRestart: [], listeners: { added: [], removed: [], changed: [] } } }), readiness: () => ({ ready: true, detail: '' }), ledgerFresh: () => false });
    expect(await stale.rotateGrant(id, 0)).toMatchObject({ ok: false, status: 503, reason: 'ledger_unavailable' });
    expect(s.registry.tokens.verify(id, token)).toBe(true);
  });

  it('logs issue, rotate, revoke, forget and generation revoke at info by id, and never a token or its hash', async () => {
    const s = await clocked();
    const a = value(await s.control.issueGrant({ ...VALID, generation: 'run-1' }));
    const b = value(await s.control.issueGrant(VALID));
    const r = value(await s.control.rotateGrant(a.id, 1000));
    value(await s.control.revokeGeneration('run-1'));
    value(await s.control.forgetGrant(b.id));
    const c = value(await s.control.issueGrant(VALID));
    value(await s.control.revokeGrant(c.id));
    expect(s.lines.map((l) => [l.level, l.msg])).toEqual([
      ['info', 'grant issued'], ['info', 'grant issued'], ['info', 'grant token rotated'], ['info', 'generation revoked'], ['info', 'grant forgotten'], ['info', 'grant issued'], ['info', 'grant revoked'],
    ]);
    expect(s.lines[2]?.obj).toMatchObject({ grant: a.id, previousTokenUntil: new Date(T0 + 1000).toISOString() });
    const all = JSON.stringify(s.lines);
    for (const token of [a.token, b.token, c.token, r.token]) {
      expect(all).not.toContain(token);
      expect(all).not.toContain(sha256(token).toString('hex'));
    }
  });

  it('warns, naming the id, when config names a grant that stays revoked: at start and at every reload of the config grants', async () => {
    const grants = [{ id: 'cfg', tokenSha256: tokenHash('cfg-token'), destinations: ['https://a.test'] }];
    const s = await clocked(undefined, undefined, grants);
    value(await s.control.revokeGrant('cfg'));
    expect(s.lines.filter((l) => l.level === 'warn')).toEqual([]);
    s.ledger.setConfigGrants(configSchema.shape.grants.parse(grants));
    expect(s.lines.filter((l) => l.level === 'warn').map((l) => l.obj)).toEqual([{ grant: 'cfg' }]);
    expect(s.lines.find((l) => l.level === 'warn')?.msg).toMatch(/cfg stays revoked.*new id/);
    const restarted = await clocked(s.dir, s.clock, grants);
    expect(restarted.lines.filter((l) => l.level === 'warn').map((l) => l.obj)).toEqual([{ grant: 'cfg' }]);
    expect(restarted.registry.grants.get('cfg')?.revoked).toBe(true);
  });
});
