// explain() and its exit status (src/explain/explain.ts): the decision against the grant the caller
// chose (the running instance's, or the config's), and which answers are bad input (exit 2) rather
// than a denial (exit 1). No sockets: the runtime is built from a config, DNS from its hosts table.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { buildRuntime } from '../../../src/app.js';
import { grantSpecSchema, parseConfigText } from '../../../src/config/index.js';
import type { ProxyRuntime } from '../../../src/proxy/index.js';
import { exitCodeOf, explain, formatExplanation, type GrantChoice } from '../../../src/explain/index.js';
import { silentLog } from '../../support/sluice.js';
import { remedyFor, Remedies } from '../../../src/core/index.js';

const fromInstance = (fields: object, revoked = false): GrantChoice => ({ from: 'the running instance at unix:/x', instance: { spec: grantSpecSchema.parse(fields), revoked }, warning: null });

describe('explain', () => {
  let rt: ProxyRuntime;

  beforeAll(async () => {
    const text = stringify({
      state: os.tmpdir(),
      listeners: [{ name: 'shared', listen: '127.0.0.1:0', identify: 'token' }],
      dns: { hosts: { 'api.test': ['127.0.0.1'], 'lan.test': ['10.0.0.7'] } },
      grants: [{ id: 'cfg', tokenSha256: 'ab'.repeat(32), destinations: ['https://api.test'], allowAddressClasses: ['loopback'] }],
    });
    const parsed = parseConfigText(text, path.join(os.tmpdir(), 'explain-unit.yaml'), os.tmpdir());
    if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
    const built = await buildRuntime(parsed.config, { env: {}, log: silentLog, audit: { write: () => undefined, flush: () => Promise.resolve() } });
    if (!built.ok) throw new Error(JSON.stringify(built.issues));
    rt = built.value.runtime;
  });
  afterAll(async () => {
    rt.routes.close();
    await rt.forwardAgent.close();
    await rt.upstreamAgent.close();
  });

  it('decides against the config’s grant by default: allow 0, deny 1', async () => {
    const allowed = await explain(rt, 'cfg', 'https://api.test');
    expect(allowed).toMatchObject({ decision: 'allow', reason: 'granted', source: 'the config', badInput: null });
    expect(exitCodeOf(allowed)).toBe(0);
    const denied = await explain(rt, 'cfg', 'https://lan.test');
    expect(denied).toMatchObject({ decision: 'deny', reason: 'destination_not_granted', badInput: null });
    expect(exitCodeOf(denied)).toBe(1);
  });

  it('decides against the instance’s grant, not the config’s, when the instance answered', async () => {
    const runTime = fromInstance({ destinations: ['https://lan.test'], allowAddressClasses: ['private'] });
    expect(await explain(rt, 'g-1', 'https://lan.test', runTime)).toMatchObject({ decision: 'allow', rule: 'https://lan.test:443', source: 'the running instance at unix:/x' });
    // The same id in the config file does not widen it: the instance's grant is the one in force.
    expect(await explain(rt, 'cfg', 'https://api.test', runTime)).toMatchObject({ decision: 'deny', reason: 'destination_not_granted' });
  });

  it('a host:port that only an http:// rule grants is explained as the proxy runs it: mediated, each request decided', async () => {
    const httpOnly = fromInstance({ destinations: ['http://api.test:8080'], allowAddressClasses: ['loopback'] });
    const mediated = await explain(rt, 'g-2', 'api.test:8080', httpOnly);
    expect(mediated).toMatchObject({ request: 'connect', decision: 'allow', rule: 'http://api.test:8080', pinned: ['127.0.0.1'], badInput: null });
    expect(mediated.detail).toMatch(/^mediated/);
    expect(exitCodeOf(mediated)).toBe(0);
    // The requests inside are still held to the address classes: a private answer is refused.
    const lan = await explain(rt, 'g-3', 'lan.test:8080', fromInstance({ destinations: ['http://lan.test:8080'] }));
    expect(lan).toMatchObject({ request: 'connect', decision: 'deny', reason: 'address_class_denied' });
    // A ws:// rule does not mediate, and a port no rule names stays refused.
    expect(await explain(rt, 'g-4', 'api.test:8080', fromInstance({ destinations: ['ws://api.test:8080'], allowAddressClasses: ['loopback'] }))).toMatchObject({ decision: 'deny', reason: 'destination_not_granted' });
    expect(await explain(rt, 'g-2', 'api.test:9090', httpOnly)).toMatchObject({ decision: 'deny', reason: 'destination_not_granted' });
  });

  it('a revoked or expired grant at the instance is a denial (1), whatever the config file says', async () => {
    const revoked = await explain(rt, 'cfg', 'https://api.test', fromInstance({ destinations: ['https://api.test'], allowAddressClasses: ['loopback'] }, true));
    expect(revoked).toMatchObject({ decision: 'deny', reason: 'grant_revoked', badInput: null });
    expect(exitCodeOf(revoked)).toBe(1);
    const expired = await explain(rt, 'cfg', 'https://api.test', fromInstance({ destinations: ['https://api.test'], limits: { expiresAt: '2000-01-01T00:00:00Z' } }));
    expect(expired.reason).toBe('grant_expired');
    expect(exitCodeOf(expired)).toBe(1);
  });

  it('an unknown grant is bad input (2), with a reload hint when only the config file has it', async () => {
    const none = await explain(rt, 'nobody', 'https://api.test');
    expect(none).toMatchObject({ reason: 'grant_unknown', badInput: 'grant "nobody" is not known to the config' });
    expect(exitCodeOf(none)).toBe(2);
    const stale = await explain(rt, 'cfg', 'https://api.test', { from: 'the running instance at unix:/x', instance: null, warning: null });
    expect(stale.badInput).toMatch(/not known to the running instance at unix:\/x; the config file has it, .*reload it/);
    expect(exitCodeOf(stale)).toBe(2);
  });

  it.each(['api.test', 'api.test:0', 'api.test:65536', 'https://api .test', 'gopher://api.test', 'http://', 'https://[::1'])('a malformed target %s is bad input (2), even for a known grant', async (target) => {
    const e = await explain(rt, 'cfg', target);
    expect(e.decision).toBe('deny');
    expect(e.badInput).toMatch(new RegExp(`^target ${JSON.stringify(target).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: .+ \\([a-z_]+\\)$`));
    expect(exitCodeOf(e)).toBe(2);
  });

  it('prints where the grant came from', async () => {
    expect(formatExplanation(await explain(rt, 'cfg', 'https://api.test'))).toMatch(/^grant:\s+cfg\nsource:\s+the config\n/);
  });

  describe('UX review 2026-12-04 finding 3: a denial says how to fix it', () => {
    it('an address class denial: the fix names the class, as flag and as grant key, after the decision line', async () => {
      const e = await explain(rt, 'g-5', 'https://lan.test', fromInstance({ destinations: ['https://lan.test'] }));
      expect(e).toMatchObject({ reason: 'address_class_denied', rules: null, closest: null });
      expect(e.fix).toBe(remedyFor('address_class_denied', { request: 'connect', scheme: 'https', canonical: 'lan.test:443', addresses: [{ class: 'private', allowed: false }] }));
      expect(e.fix).toContain('allowAddressClasses: [private] on the grant (sluice run --allow-class private)');
      expect(formatExplanation(e)).toMatch(/\ndecision:\s+deny 403 address_class_denied \(resolves to private\)\nfix:\s+allow it with allowAddressClasses: \[private\]/);
    });

    it('destination_not_granted: the grant’s rules, the closest one and the rule to add', async () => {
      const grant = fromInstance({ destinations: ['https://origin.test:22443', 'http://api.test:8080', 'tcp://db.internal.test:5432'], allowAddressClasses: ['loopback'] });
      const e = await explain(rt, 'g-6', 'https://origin.test:8443', grant);
      expect(e.rules).toEqual(['https://origin.test:22443', 'http://api.test:8080', 'tcp://db.internal.test:5432']);
      expect(e.closest).toEqual({ rule: 'https://origin.test:22443', why: 'same host, port 22443 instead of 8443' });
      expect(e.fix).toBe('add a destination rule for https://origin.test:8443 to the grant (sluice run --destination https://origin.test:8443)');
      const text = formatExplanation(e);
      expect(text).toContain('\nrules:      https://origin.test:22443, http://api.test:8080, tcp://db.internal.test:5432\n');
      expect(text).toContain('\nclosest:    https://origin.test:22443 (same host, port 22443 instead of 8443)\n');
      expect(text).toMatch(/\nfix:\s+add a destination rule for https:\/\/origin\.test:8443 to the grant/);
      // An absolute-form request is offered an http:// rule; no rule sharing host or port: no closest line.
      const plain = await explain(rt, 'g-6', 'http://elsewhere.test:9999/x', grant);
      expect(plain.closest).toBeNull();
      expect(plain.fix).toContain('rule for http://elsewhere.test:9999 ');
      expect(formatExplanation(plain)).not.toContain('closest:');
      // A grant without rules says so.
      expect(formatExplanation(await explain(rt, 'g-7', 'https://api.test', fromInstance({ destinations: [] })))).toContain('\nrules:      none\n');
    });

    it('no fix on allow, and none for bad input (exit 2 carries its own message)', async () => {
      const allowed = await explain(rt, 'cfg', 'https://api.test');
      expect(allowed).toMatchObject({ fix: null, rules: null, closest: null });
      expect(formatExplanation(allowed)).not.toMatch(/\n(fix|rules|closest):/);
      expect(await explain(rt, 'nobody', 'https://api.test')).toMatchObject({ fix: null, rules: null });
      expect((await explain(rt, 'cfg', 'https://api .test')).fix).toBeNull();
    });

    it('a revoked grant is told to issue a new one', async () => {
      const revoked = await explain(rt, 'cfg', 'https://api.test', fromInstance({ destinations: ['https://api.test'] }, true));
      expect(revoked.fix).toBe(Remedies.grant_revoked);
    });
  });
});

describe('explain names how Sluice authenticates to each upstream proxy', () => {
  it('negotiate with its Kerberos service name, ntlm by name; basic reads as before', async () => {
    const dir = os.tmpdir();
    const creds = path.join(dir, `explain-ntlm-${process.pid}.txt`);
    (await import('node:fs')).writeFileSync(creds, 'CORP\\svc:pw\n');
    const text = stringify({
      state: dir,
      listeners: [{ name: 'shared', listen: '127.0.0.1:0', identify: 'token' }],
      route: { mode: 'proxy', proxy: [{ url: 'http://krb.corp.test:8080', auth: 'negotiate', spn: 'HTTP@vip.corp.test' }, { url: 'http://ntlm.corp.test:8080', auth: 'ntlm', credentialsFile: creds }, { url: 'http://basic.corp.test:8080', credentialsFile: creds }] },
      grants: [{ id: 'cfg', tokenSha256: 'ab'.repeat(32), destinations: ['https://api.test'] }],
    });
    const parsed = parseConfigText(text, path.join(dir, 'explain-auth.yaml'), dir);
    if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
    const built = await buildRuntime(parsed.config, { env: {}, log: silentLog, audit: { write: () => undefined, flush: () => Promise.resolve() } });
    if (!built.ok) throw new Error(JSON.stringify(built.issues));
    const rt = built.value.runtime;
    try {
      const out = formatExplanation(await explain(rt, 'cfg', 'https://api.test'));
      expect(out).toContain('proxy http://krb.corp.test:8080 (auth negotiate, Kerberos service HTTP@vip.corp.test)');
      expect(out).toContain('proxy http://ntlm.corp.test:8080 (auth ntlm)');
      expect(out).toMatch(/proxy http:\/\/basic\.corp\.test:8080: unattested/);
      expect(out).not.toContain('pw');
    } finally {
      rt.routes.close();
      await rt.forwardAgent.close();
      await rt.upstreamAgent.close();
      (await import('node:fs')).rmSync(creds, { force: true });
    }
  });
});

describe('explain says which PAC-named proxies get no credentials (review 2026-12-04 finding 10)', () => {
  it('a proxy outside route.pac.credentialProxies is shown with no credentials; the listed one with its auth', async () => {
    const fs = await import('node:fs');
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'explain-pac-cred-'));
    const creds = path.join(dir, 'creds.txt');
    fs.writeFileSync(creds, 'CORP\\svc:pw\n');
    const pac = path.join(dir, 'corp.pac');
    fs.writeFileSync(pac, 'function FindProxyForURL(url, host) { return "PROXY proxy.corp.test:8080; PROXY other.test:3128"; }');
    const text = stringify({
      state: dir,
      listeners: [{ name: 'shared', listen: '127.0.0.1:0', identify: 'token' }],
      route: { mode: 'pac', pac: { file: pac, auth: 'ntlm', credentialsFile: creds, credentialProxies: ['proxy.corp.test:8080'] } },
      grants: [{ id: 'cfg', tokenSha256: 'ab'.repeat(32), destinations: ['https://api.test'] }],
    });
    const parsed = parseConfigText(text, path.join(dir, 'explain-pac.yaml'), dir);
    if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
    const built = await buildRuntime(parsed.config, { env: {}, log: silentLog, audit: { write: () => undefined, flush: () => Promise.resolve() } });
    if (!built.ok) throw new Error(JSON.stringify(built.issues));
    const rt = built.value.runtime;
    try {
      const out = formatExplanation(await explain(rt, 'cfg', 'https://api.test'));
      expect(out).toContain('1. proxy http://proxy.corp.test:8080 (auth ntlm): unattested');
      expect(out).toContain('2. proxy http://other.test:3128 (no credentials: not in route.pac.credentialProxies): unattested');
      expect(out).not.toContain('pw');
    } finally {
      rt.routes.close();
      await rt.forwardAgent.close();
      await rt.upstreamAgent.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
