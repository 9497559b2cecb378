// Threat: security review 2026-12, finding 8 (issue 13, finding 1). A service on the host bound to
// 0.0.0.0 or [::] (Node's default) answers on every address of the host, not only on loopback. The
// host's public IPv4 or global IPv6 address classified by its range alone is `public`, so a grant
// limited to the public class (an unrestricted grant, or a wildcard rule on a domain whose AAAA the
// attacker controls) reached host-local services through it, in any spelling that embeds it
// (IPv4-mapped RFC 4291 §2.5.5.2, NAT64 RFC 6052, 6to4 RFC 3056). Every address of
// os.networkInterfaces() is now class `host` on every port (loopback stays `loopback`; a private
// interface address is `host` too, so a grant naming `private` does not reach it), refused unless the
// grant names `host`. Proved twice: in a network namespace this test creates, with those addresses on
// `lo` and a real `sluice start`, as the review did (docs/reviews/security-2026-12.md); and in-process, with the
// interface list injected through the composition root.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { stringify } from 'yaml';
import { explain } from '../../src/explain/index.js';
import type { InterfaceList } from '../../src/resolve/index.js';
import { openConnectTunnel, rawRequest } from '../support/raw-client.js';
import { BIN, REPO_ROOT } from '../support/sandbox.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';
import { waitUntil } from '../support/wait.js';

const SCRIPT = path.join(REPO_ROOT, 'test/support/host-interface-attack.sh');

/** Why a network namespace cannot be made here, or null. Never a reason under CI=true: CI runs as root. */
function netnsSkipReason(): string | null {
  if (process.env.CI === 'true') return null;
  const probe = spawnSync('unshare', [...unshareFlags(), 'ip', 'link', 'set', 'lo', 'up'], { stdio: 'ignore' });
  return probe.status === 0 ? null : 'cannot create a network namespace (unshare -n / -rn, ip)';
}

/** Root makes a plain network namespace; anyone else needs a user namespace that owns it. */
function unshareFlags(): string[] {
  return process.getuid?.() === 0 ? ['-n'] : ['-r', '-n'];
}

interface Attempt {
  readonly forward: string;
  readonly connect: string;
  readonly body: string;
}

function runInNamespace(dir: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn('unshare', [...unshareFlags(), 'sh', SCRIPT], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', DIR: dir, BIN, NODE: process.execPath, PROXY_PORT: '21580', SERVICE_PORT: '21590' },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    }, 60_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

const skip = netnsSkipReason();
if (skip !== null) console.log(`skipping the network-namespace run of finding 8: ${skip}`);

describe.skipIf(skip !== null)('finding 8 in a network namespace: the host’s own addresses on lo, a service on [::], a real sluice start', () => {
  let dir: string;
  let run: { code: number | null; stdout: string; stderr: string };
  const attempts = new Map<string, Attempt>();
  let audit: { canonical: string | null; principal: string | null; reason: string; addresses: { address: string; class: string; allowed: boolean }[] }[];

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(fs.realpathSync('/tmp'), 'sluice-host-iface-'));
    const grant = (id: string, extra: Record<string, unknown>): Record<string, unknown> => ({ id, tokenSha256: tokenHash(`tok-${id}`), ...extra });
    const config = {
      listeners: [{ name: 'shared', listen: '127.0.0.1:21580', identify: 'token' }],
      state: path.join(dir, 'state'),
      audit: { file: path.join(dir, 'audit.jsonl') },
      dns: { hosts: { 'www.attacker.test': ['2a01:4f8:1:2::44'] } },
      grants: [
        grant('pub', { unrestricted: true }),
        // Not unrestricted: a wildcard rule on the attacker's domain, whose AAAA is the host's address.
        grant('wild', { destinations: ['http://*.attacker.test:21590', 'tcp://*.attacker.test:21590'] }),
        grant('priv', { unrestricted: true, allowAddressClasses: ['private', 'link_local', 'cgnat', 'reserved'] }),
        grant('hostok', { unrestricted: true, allowAddressClasses: ['host'] }),
      ],
    };
    fs.writeFileSync(path.join(dir, 'sluice.yaml'), stringify(config));
    run = await runInNamespace(dir);
    for (const line of run.stdout.split('\n')) {
      const [name = '', forward = '', connect = '', ...body] = line.split(' ');
      attempts.set(name, { forward, connect, body: body.join(' ') });
    }
    const auditFile = path.join(dir, 'audit.jsonl');
    audit = fs.existsSync(auditFile)
      ? fs.readFileSync(auditFile, 'utf8').split('\n').filter((l) => l.includes('"decision"')).map((l) => JSON.parse(l) as (typeof audit)[number])
      : [];
  }, 90_000);
  afterAll(() => {
    if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('sets the scene: the addresses are on lo and the service answers on them directly', () => {
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    expect(attempts.get('addresses')?.forward).toBe('127.0.0.1/8');
    expect(run.stdout).toContain('11.22.33.44/32');
    expect(run.stdout).toContain('2a01:4f8:1:2::44/128');
    expect(attempts.get('control')?.forward).toBe('HOST-LOCAL-SERVICE');
  });

  it.each(['public-v4', 'global-v6', 'mapped', 'nat64', '6to4'])('a public-only grant cannot reach the host’s service through its %s address (403 both ways)', (name) => {
    expect(attempts.get(name), run.stdout).toEqual({ forward: '403', connect: '403', body: expect.not.stringContaining('HOST-LOCAL') });
  });

  it('a wildcard grant on the attacker’s domain, whose AAAA is the host’s global IPv6 address, is refused', () => {
    expect(attempts.get('wildcard-aaaa'), run.stdout).toEqual({ forward: '403', connect: '403', body: expect.not.stringContaining('HOST-LOCAL') });
  });

  it('a grant naming private (and every other grantable class but host) does not reach the host’s private address', () => {
    expect(attempts.get('private-v4'), run.stdout).toEqual({ forward: '403', connect: '403', body: expect.not.stringContaining('HOST-LOCAL') });
  });

  it('a grant naming host reaches it, and only through host addresses: loopback stays loopback', () => {
    expect(attempts.get('host-granted-v4'), run.stdout).toEqual({ forward: '200', connect: '200', body: 'HOST-LOCAL-SERVICE' });
    expect(attempts.get('host-granted-v6'), run.stdout).toEqual({ forward: '200', connect: '200', body: 'HOST-LOCAL-SERVICE' });
    expect(attempts.get('host-granted-loopback'), run.stdout).toEqual({ forward: '403', connect: '403', body: expect.not.stringContaining('HOST-LOCAL') });
    expect(attempts.get('loopback-control'), run.stdout).toEqual({ forward: '403', connect: '403', body: expect.not.stringContaining('HOST-LOCAL') });
  });

  it('the audit log records the class host and the reason address_class_denied', () => {
    const pub = audit.filter((r) => r.principal === 'pub' && r.canonical === '11.22.33.44:21590');
    expect(pub.length).toBeGreaterThan(0);
    for (const r of pub) expect(r).toMatchObject({ reason: 'address_class_denied', addresses: [{ address: '11.22.33.44', class: 'host', allowed: false }] });
    const wild = audit.filter((r) => r.principal === 'wild');
    expect(wild.length).toBeGreaterThan(0);
    for (const r of wild) expect(r).toMatchObject({ reason: 'address_class_denied', addresses: [{ address: '2a01:4f8:1:2::44', class: 'host', allowed: false }] });
    const priv = audit.filter((r) => r.principal === 'priv' && r.canonical === '10.9.8.7:21590');
    expect(priv.length).toBeGreaterThan(0);
    for (const r of priv) expect(r).toMatchObject({ addresses: [{ address: '10.9.8.7', class: 'host', allowed: false }] });
    const granted = audit.filter((r) => r.principal === 'hostok' && r.canonical === '11.22.33.44:21590');
    expect(granted.length).toBeGreaterThan(0);
    for (const r of granted) expect(r).toMatchObject({ reason: 'granted', addresses: [{ address: '11.22.33.44', class: 'host', allowed: true }] });
  });
});

// ── the same attack in-process: the interface list injected through the composition root ──────────

/** The host of the review: a public IPv4, a global IPv6, a private and a link-local address, plus lo. */
function hostInterfaces(): { list: Record<string, { address: string }[]>; read: () => InterfaceList } {
  const list: Record<string, { address: string }[]> = {
    lo: [{ address: '127.0.0.1' }, { address: '::1' }],
    eth0: [{ address: '11.22.33.44' }, { address: '2a01:4f8:1:2::44' }, { address: '10.20.30.40' }, { address: 'fe80::1' }],
  };
  return { list, read: () => list };
}

const PORT = 21590;
const EMBEDDED = ['11.22.33.44', '[2a01:4f8:1:2::44]', '[::ffff:11.22.33.44]', '[::ffff:b16:212c]', '[64:ff9b::b16:212c]', '[2002:b16:212c::]', '[2002:b16:212c:1::99]'];
const bearer = (grant: string): Record<string, string> => ({ 'Proxy-Authorization': `Basic ${Buffer.from(`${grant}:tok-${grant}`).toString('base64')}` });

describe('finding 8 in-process: interface addresses injected through startApp', () => {
  let sluice: TestSluice;
  let iface: ReturnType<typeof hostInterfaces>;

  beforeAll(async () => {
    iface = hostInterfaces();
    const grant = (id: string, extra: Record<string, unknown>): Record<string, unknown> => ({ id, tokenSha256: tokenHash(`tok-${id}`), ...extra });
    sluice = await startSluice(
      {
        timeouts: { dialMs: 1_000 },
        grants: [
          grant('pub', { unrestricted: true }),
          grant('wild', { destinations: [`http://*.attacker.test:${PORT}`, `tcp://*.attacker.test:${PORT}`] }),
          grant('ranges', { unrestricted: true, allowAddressClasses: ['private', 'link_local', 'cgnat', 'reserved'], allowAddresses: ['0.0.0.0/0', '::/0'] }),
          grant('hostok', { unrestricted: true, allowAddressClasses: ['host'] }),
        ],
      },
      { lookup: tableLookup({ 'www.attacker.test': ['2a01:4f8:1:2::44'], 'mixed.attacker.test': ['10.20.30.40', '11.22.33.44'] }), hostInterfaces: iface.read, hostRefreshMs: 50 },
    );
  });
  afterAll(async () => {
    await sluice?.close();
  });

  it.each(EMBEDDED)('a public-only grant gets 403 address_class_denied for %s as CONNECT and absolute-form, nothing dialed', async (host) => {
    const tunnel = await openConnectTunnel(sluice.port, `${host}:${PORT}`, bearer('pub'));
    tunnel.socket.destroy();
    expect(tunnel.status).toBe(403);
    expect(tunnel.head).toContain('details="address_class_denied"');
    const forward = await rawRequest(sluice.port, `GET http://${host}:${PORT}/ HTTP/1.1\r\nHost: ${host}:${PORT}\r\nProxy-Authorization: ${bearer('pub')['Proxy-Authorization']}\r\n\r\n`);
    expect(forward.text).toMatch(/^HTTP\/1\.1 403 /);
    expect(forward.text).toContain('details="address_class_denied"');
    for (const record of sluice.decisions().slice(-2)) {
      expect(record).toMatchObject({ principal: 'pub', reason: 'address_class_denied', pinned: null });
      expect(record.addresses.map((a) => [a.class, a.allowed])).toEqual([['host', false]]);
    }
  });

  it('a wildcard grant on the attacker’s domain whose AAAA is the host’s global IPv6 address is refused', async () => {
    const tunnel = await openConnectTunnel(sluice.port, `www.attacker.test:${PORT}`, bearer('wild'));
    tunnel.socket.destroy();
    expect(tunnel.status).toBe(403);
    expect(sluice.decisions().at(-1)).toMatchObject({ principal: 'wild', reason: 'address_class_denied', addresses: [{ address: '2a01:4f8:1:2::44', class: 'host', allowed: false }] });
  });

  it('host wins over the range: private, link_local and CIDRs over everything do not reach the host’s own addresses', async () => {
    for (const host of ['10.20.30.40', '[fe80::1]', '11.22.33.44', '[2a01:4f8:1:2::44]', 'mixed.attacker.test']) {
      const tunnel = await openConnectTunnel(sluice.port, `${host}:${PORT}`, bearer('ranges'));
      tunnel.socket.destroy();
      expect.soft(tunnel.status, host).toBe(403);
      expect.soft(sluice.decisions().at(-1)?.addresses.every((a) => a.class === 'host' && !a.allowed), host).toBe(true);
    }
  });

  it('sluice explain tells the truth: class host, denied for a public-only grant, allowed for a grant naming host', async () => {
    const denied = await explain(sluice.app.runtime, 'pub', `http://[::ffff:11.22.33.44]:${PORT}/`);
    expect(denied).toMatchObject({ decision: 'deny', reason: 'address_class_denied', addresses: [{ address: '11.22.33.44', class: 'host', allowed: false }] });
    const allowed = await explain(sluice.app.runtime, 'hostok', `https://[2a01:4f8:1:2::44]:${PORT}`);
    expect(allowed).toMatchObject({ decision: 'allow', reason: 'granted', addresses: [{ address: '2a01:4f8:1:2::44', class: 'host', allowed: true }], pinned: ['2a01:4f8:1:2::44'] });
    const loopback = await explain(sluice.app.runtime, 'hostok', `https://127.0.0.1:${PORT}`);
    expect(loopback).toMatchObject({ decision: 'deny', reason: 'address_class_denied', addresses: [{ address: '127.0.0.1', class: 'loopback', allowed: false }] });
  });

  it('self stays stronger: a host address on Sluice’s own port is address_self even for a grant naming host', async () => {
    const tunnel = await openConnectTunnel(sluice.port, `11.22.33.44:${sluice.port}`, bearer('hostok'));
    tunnel.socket.destroy();
    expect(tunnel.status).toBe(403);
    expect(tunnel.head).toContain('details="address_self"');
    expect(sluice.decisions().at(-1)?.addresses).toEqual([{ address: '11.22.33.44', class: 'self', allowed: false }]);
  });

  it('an interface address added later is host within the refresh interval (50 ms here), and public again once removed', async () => {
    const target = `https://11.22.33.45:${PORT}`;
    expect(await explain(sluice.app.runtime, 'pub', target)).toMatchObject({ decision: 'allow', addresses: [{ class: 'public', allowed: true }] });
    iface.list['eth1'] = [{ address: '11.22.33.45' }];
    const added = Date.now();
    await waitUntil(async () => (await explain(sluice.app.runtime, 'pub', target)).reason === 'address_class_denied', { timeoutMs: 2_000, label: 'eth1 is host' });
    expect(Date.now() - added).toBeLessThan(1_000);
    expect(await explain(sluice.app.runtime, 'pub', target)).toMatchObject({ addresses: [{ class: 'host', allowed: false }] });
    delete iface.list['eth1'];
    await waitUntil(async () => (await explain(sluice.app.runtime, 'pub', target)).decision === 'allow', { timeoutMs: 2_000, label: 'eth1 is gone' });
  });
});
