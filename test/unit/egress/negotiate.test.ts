// Negotiate tokens from the process's own Kerberos credentials through the real `kerberos` binding and
// a throwaway MIT realm on loopback (test/support/kdc.ts). Threat: a machine without a ticket (expired,
// never obtained, wrong service) must yield a clear, bounded, one-line failure, never a token from
// somewhere else and never a silent success; the failure text is what reaches the audit detail.
//
// GSSAPI reads KRB5_CONFIG, KRB5CCNAME and KRB5_CLIENT_KTNAME with getenv(3). vitest runs this file in
// a forked child process (vitest.config.ts pool 'forks'), whose process.env writes reach getenv, so the
// checks run in-process; the first assertion fails loudly if the file ever runs in a worker thread,
// where they would not.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isMainThread } from 'node:worker_threads';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { UpstreamProxy } from '../../../src/core/index.js';
import { gssMessage, systemGss, unavailableGss } from '../../../src/egress/negotiate.js';
import { LearnedMechanisms, ProxyAuthDialogue } from '../../../src/egress/proxy-auth.js';
import { kdcAvailable, startKdc, type Kdc } from '../../support/kdc.js';

const KRB5_VARS = ['KRB5_CONFIG', 'KRB5CCNAME', 'KRB5_CLIENT_KTNAME'] as const;
const saved = Object.fromEntries(KRB5_VARS.map((k) => [k, process.env[k]]));
function restoreEnv(): void {
  for (const key of KRB5_VARS) {
    const value = saved[key];
    if (value === undefined) delete process.env[key];
    else process.env[key] = value;
  }
}

/** The SPNEGO mechanism OID 1.3.6.1.5.5.2 (RFC 4178 §3.1), DER-encoded, as it opens an initial token. */
const SPNEGO_OID = Buffer.from('06062b0601050502', 'hex');

describe('unavailableGss and gssMessage', () => {
  it('unavailableGss is a value saying why, and initiate rejects with that reason', async () => {
    const gss = unavailableGss('the GSSAPI binding (npm package kerberos) is not installed');
    expect(gss.unavailable).toMatch(/not installed/);
    await expect(gss.initiate('HTTP@proxy.corp.test')).rejects.toThrow(/not installed/);
  });

  it.each([
    ['a multi-line GSSAPI message', new Error('Unspecified GSS failure.\n  Minor code may provide more information\r\n\tNo Kerberos credentials available'), 'Unspecified GSS failure. Minor code may provide more information No Kerberos credentials available'],
    ['a string thrown', 'Server not found in Kerberos database', 'Server not found in Kerberos database'],
    ['surrounding whitespace', new Error('  Ticket expired \n'), 'Ticket expired'],
  ])('%s becomes one trimmed line', (_name, error, expected) => {
    expect(gssMessage(error)).toBe(expected);
  });

  it('a message longer than 240 characters is cut to 240 and an ellipsis, so a hostile or broken library cannot flood the audit log', () => {
    const long = gssMessage(new Error(`x${'y\n'.repeat(10_000)}`));
    expect(long).toHaveLength(241);
    expect(long.endsWith('…')).toBe(true);
    expect(long).not.toMatch(/\n/);
  });
});

describe.skipIf(!kdcAvailable() && process.env['CI'] !== 'true')('systemGss with the real kerberos binding and a throwaway KDC', () => {
  let kdc: Kdc;
  let dir: string;

  beforeAll(async () => {
    kdc = await startKdc();
    await kdc.addService('HTTP/localhost');
    await kdc.addUser('alice', 'alice-pw-1');
    dir = mkdtempSync(join(tmpdir(), 'sluice-negotiate-'));
  }, 60_000);
  afterEach(restoreEnv);
  afterAll(async () => {
    await kdc?.close();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  /** Points this process's GSSAPI at the test realm and `ccache` only (nothing inherited). */
  function useRealm(extra: Partial<Record<(typeof KRB5_VARS)[number], string>>): void {
    for (const key of KRB5_VARS) delete process.env[key];
    Object.assign(process.env, { KRB5_CONFIG: kdc.krb5Config }, extra);
  }
  function emptyCcache(name: string): string {
    const path = join(dir, name);
    writeFileSync(path, '', { mode: 0o600 });
    return path;
  }

  it('runs where process.env reaches getenv(3): a forked process, not a worker thread', () => {
    expect(isMainThread, 'GSSAPI would not see KRB5CCNAME set from a worker thread: run these checks in a child process').toBe(true);
  });

  it('loads the installed binding once: unavailable is null', () => {
    const gss = systemGss();
    expect(gss.unavailable).toBeNull();
    expect(systemGss()).toBe(gss);
  });

  it('with a ticket in KRB5CCNAME, initiate(HTTP@localhost).step(\'\') yields a base64 SPNEGO token', async () => {
    const ccache = join(dir, 'alice.cc');
    await kdc.kinit('alice', 'alice-pw-1', ccache);
    useRealm({ KRB5CCNAME: `FILE:${ccache}` });
    const context = await systemGss().initiate('HTTP@localhost');
    const token = await context.step('');
    expect(token).toMatch(/^[A-Za-z0-9+/]+=*$/);
    const der = Buffer.from(token, 'base64');
    // An InitialContextToken (RFC 2743 §3.1, tag 0x60) for SPNEGO, not a raw Kerberos AP-REQ.
    expect(der[0]).toBe(0x60);
    expect(der.subarray(0, 16).includes(SPNEGO_OID)).toBe(true);
    expect(der.length).toBeGreaterThan(200);
  });

  it('with a client keytab in KRB5_CLIENT_KTNAME and no ccache yet, GSSAPI gets the ticket itself', async () => {
    const keytab = await kdc.userKeytab('alice');
    useRealm({ KRB5CCNAME: `FILE:${join(dir, 'keytab-fill.cc')}`, KRB5_CLIENT_KTNAME: keytab });
    const token = await (await systemGss().initiate('HTTP@localhost')).step('');
    expect(Buffer.from(token, 'base64')[0]).toBe(0x60);
  });

  it.each([['an empty ccache file', true], ['a ccache that does not exist', false]])('without credentials (%s, no keytab) initiate or step rejects, and gssMessage keeps it to one bounded line', async (name, empty) => {
    const path = empty ? emptyCcache(`${name.length}.cc`) : join(dir, 'missing.cc');
    useRealm({ KRB5CCNAME: `FILE:${path}` });
    const error = await systemGss().initiate('HTTP@localhost').then((c) => c.step('')).then(
      (token) => new Error(`unexpected token of ${token.length} characters`),
      (e: unknown) => e,
    );
    const message = gssMessage(error);
    expect(message).not.toMatch(/^unexpected token/);
    expect(message).toMatch(/credential|cache|not found/i);
    expect(message).not.toMatch(/[\r\n]/);
    expect(message.length).toBeLessThanOrEqual(241);
  });

  it('for a service the realm does not know, the failure says so (no token for another principal)', async () => {
    const ccache = join(dir, 'alice-2.cc');
    await kdc.kinit('alice', 'alice-pw-1', ccache);
    useRealm({ KRB5CCNAME: `FILE:${ccache}` });
    const outcome = await systemGss().initiate('HTTP@nosuch.krb.test').then((c) => c.step('')).then(() => 'token', (e: unknown) => gssMessage(e));
    expect(outcome).toMatch(/not found|unknown|server/i);
  });

  it('through ProxyAuthDialogue: a ticket gives the preemptive Negotiate leg; none gives upstream_auth_failed without a token', async () => {
    const proxy: UpstreamProxy = {
      label: 'http://localhost:3128', tls: false, host: 'localhost', port: 3128, authorization: null, auth: 'negotiate', ntlm: null, spn: null,
      ca: null, inspectsTls: false, sendResolvedAddress: false,
    };
    const auth = { gss: systemGss(), learned: new LearnedMechanisms() };
    const ccache = join(dir, 'alice-3.cc');
    await kdc.kinit('alice', 'alice-pw-1', ccache);
    useRealm({ KRB5CCNAME: `FILE:${ccache}` });
    const good = await new ProxyAuthDialogue(proxy, auth).first();
    expect(good.ok && good.value.authorization).toMatch(/^Negotiate [A-Za-z0-9+/]{100,}=*$/);
    const token = good.ok ? (good.value.authorization ?? '').slice(10) : '';
    useRealm({ KRB5CCNAME: `FILE:${emptyCcache('empty-2.cc')}` });
    const bad = await new ProxyAuthDialogue(proxy, auth).first();
    expect(bad).toMatchObject({ ok: false, reason: 'upstream_auth_failed' });
    const detail = bad.ok ? '' : bad.detail;
    expect(detail).toContain('HTTP@localhost');
    expect(detail).not.toContain(token);
    expect(detail).not.toContain(token.slice(0, 40));
  });
});

describe('auth: negotiate where this build has no GSSAPI is a config error, not a failure on the first hop', () => {
  it('names every route.proxy entry and route.pac that asks for it; auto and the other mechanisms pass', async () => {
    const { negotiateIssues } = await import('../../../src/app.js');
    const none = unavailableGss('the GSSAPI binding (npm package kerberos) is not installed');
    const route = {
      mode: 'proxy' as const,
      proxy: [
        { url: 'http://a.corp.test:8080', auth: 'negotiate' as const, inspectsTls: false, sendResolvedAddress: false },
        { url: 'http://b.corp.test:8080', auth: 'auto' as const, inspectsTls: false, sendResolvedAddress: false },
        { url: 'http://c.corp.test:8080', auth: 'negotiate' as const, inspectsTls: false, sendResolvedAddress: false },
      ],
    };
    const issues = negotiateIssues(route as never, none);
    expect(issues.map((i) => i.path)).toEqual(['route.proxy[0].auth', 'route.proxy[2].auth']);
    expect(issues[0]?.message).toMatch(/negotiate needs GSSAPI: .*kerberos/);
    expect(negotiateIssues({ mode: 'pac', pac: { file: 'x.pac', auth: 'negotiate' } } as never, none).map((i) => i.path)).toEqual(['route.pac.auth']);
    expect(negotiateIssues(route as never, systemGss())).toEqual([]);
  });
});

describe('callLimiter: GSSAPI calls never hold more than their share of the thread pool', () => {
  it('runs at most max at once, the rest in arrival order, and a failing call frees its slot', async () => {
    const { callLimiter } = await import('../../../src/egress/negotiate.js');
    const limit = callLimiter(2);
    let running = 0;
    let peak = 0;
    const order: number[] = [];
    const gates: (() => void)[] = [];
    const call = (i: number, fail = false) =>
      limit(async () => {
        running += 1;
        peak = Math.max(peak, running);
        order.push(i);
        await new Promise<void>((resolve) => gates.push(resolve));
        running -= 1;
        if (fail) throw new Error(`call ${i} failed`);
        return i;
      });
    const results = [call(0, true), call(1), call(2), call(3), call(4)].map((p) => p.catch((e: Error) => e.message));
    // Release the gates one at a time, bounded; each release lets exactly one waiter in.
    for (let i = 0; i < 5; i++) {
      await new Promise((resolve) => setImmediate(resolve));
      expect(running).toBeLessThanOrEqual(2);
      gates.shift()?.();
    }
    expect(await Promise.all(results)).toEqual(['call 0 failed', 1, 2, 3, 4]);
    expect(peak).toBe(2);
    expect(order).toEqual([0, 1, 2, 3, 4]);
  });
});
