// Which proxies of a PAC answer get Sluice's credentials (review 2026-12-04 finding 10, issue 24): only
// those in route.pac.credentialProxies, compared after the URL parsing that gives the proxy its host, so
// no spelling of a listed proxy is missed and no spelling of another one gets in. Any other proxy is
// dialed with no Basic header, no NTLM leg and no Kerberos token; its 407 ends the hop with
// upstream_auth_required (docs/routes.md#pac).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ok, type CanonicalDestination, type UpstreamProxy, type Verdict } from '../../../src/core/index.js';
import { canonicalize } from '../../../src/authority/index.js';
import { LearnedMechanisms, ProxyAuthDialogue, type AuthLeg, type Gss } from '../../../src/egress/index.js';
import { pacSelector, type PacProxySettings, type PacSource } from '../../../src/route/index.js';

const PASSWORD = 'pac-Secr3t';
const BASIC = `Basic ${Buffer.from(`CORP\\svc:${PASSWORD}`).toString('base64')}`;
let dir: string;
let creds: string;

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-pac-cred-'));
  creds = path.join(dir, 'creds.txt');
  fs.writeFileSync(creds, `CORP\\svc:${PASSWORD}\n`);
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** A PacSource stand-in whose script gives one fixed answer. */
function answering(answer: string): PacSource {
  const script = { findProxy: () => Promise.resolve(ok(answer)) };
  return { current: script, lastError: null, stop: () => undefined } as unknown as PacSource;
}

const dest = (authority: string): CanonicalDestination => {
  const parsed = canonicalize(authority);
  if (!parsed.ok) throw new Error(parsed.reason);
  return parsed.value;
};

/** The proxies of the route the PAC answer gives, in order. */
async function proxiesFor(answer: string, settings: PacProxySettings): Promise<UpstreamProxy[]> {
  const route = await pacSelector(answering(answer), settings).select(dest('api.test:443'), 'connect', null, 'g');
  if (!route.ok) throw new Error(route.detail ?? route.reason);
  return route.value.hops.flatMap((h) => (h.kind === 'proxy' ? [h.proxy] : []));
}

/** A GSSAPI stand-in that always has a token, and records the service names it was asked for. */
function fakeGss(): Gss & { spns: string[] } {
  const spns: string[] = [];
  return {
    spns,
    unavailable: null,
    initiate: (spn: string) => {
      spns.push(spn);
      return Promise.resolve({ step: () => Promise.resolve('S0VSQkVST1MtVE9LRU4='), complete: true });
    },
  };
}

function leg(verdict: Verdict<AuthLeg>): AuthLeg {
  if (!verdict.ok) throw new Error(`${verdict.reason}: ${verdict.detail ?? ''}`);
  return verdict.value;
}

describe('route.pac.credentialProxies gates the credentials of PAC-named proxies', () => {
  it('Basic: the listed proxy gets the Authorization, the other one none', async () => {
    const [listed, other] = await proxiesFor('PROXY proxy.corp.test:8080; PROXY evil.test:8080', { credentialsFile: creds, credentialProxies: ['proxy.corp.test:8080'] });
    expect(listed).toMatchObject({ label: 'http://proxy.corp.test:8080', authorization: BASIC, auth: 'basic' });
    expect(listed?.credentialsWithheld).toBeUndefined();
    expect(other).toMatchObject({ label: 'http://evil.test:8080', authorization: null, auth: 'none', ntlm: null, credentialsWithheld: true });
    const gss = fakeGss();
    expect(leg(await new ProxyAuthDialogue(listed!, { gss, learned: new LearnedMechanisms() }).first()).authorization).toBe(BASIC);
    expect(leg(await new ProxyAuthDialogue(other!, { gss, learned: new LearnedMechanisms() }).first()).authorization).toBeNull();
  });

  it('the port is part of the entry: the listed host on another port gets nothing', async () => {
    const [other] = await proxiesFor('PROXY proxy.corp.test:3128', { credentialsFile: creds, credentialProxies: ['proxy.corp.test:8080'] });
    expect(other).toMatchObject({ authorization: null, credentialsWithheld: true });
  });

  it('NTLM: the listed proxy starts the NTLM handshake, the other one gets no leg and its 407 is upstream_auth_required', async () => {
    const [listed, other] = await proxiesFor('PROXY proxy.corp.test:8080; PROXY evil.test:8080', { auth: 'ntlm', credentialsFile: creds, credentialProxies: ['proxy.corp.test:8080'] });
    expect(listed).toMatchObject({ auth: 'ntlm', ntlm: { user: 'svc', domain: 'CORP', password: PASSWORD } });
    expect(other).toMatchObject({ auth: 'none', ntlm: null, authorization: null, credentialsWithheld: true });
    const context = { gss: fakeGss(), learned: new LearnedMechanisms() };
    expect(leg(await new ProxyAuthDialogue(listed!, context).first()).authorization).toMatch(/^NTLM /);
    const dialogue = new ProxyAuthDialogue(other!, context);
    expect(leg(await dialogue.first()).authorization).toBeNull();
    const refused = await dialogue.answer([{ scheme: 'ntlm', token: null }, { scheme: 'basic', token: null }]);
    expect(refused).toEqual({
      ok: false,
      reason: 'upstream_auth_required',
      detail: 'http://evil.test:8080 answered 407 (offers ntlm, basic); it is not in route.pac.credentialProxies, so Sluice sends it no credentials',
    });
  });

  it('Negotiate: only the listed proxy is asked for a Kerberos token', async () => {
    const [listed, other] = await proxiesFor('PROXY proxy.corp.test:8080; PROXY evil.test:8080', { auth: 'negotiate', credentialProxies: ['proxy.corp.test:8080'] });
    const gss = fakeGss();
    const context = { gss, learned: new LearnedMechanisms() };
    expect(leg(await new ProxyAuthDialogue(listed!, context).first()).authorization).toMatch(/^Negotiate /);
    expect(leg(await new ProxyAuthDialogue(other!, context).first()).authorization).toBeNull();
    expect(gss.spns).toEqual(['HTTP@proxy.corp.test']);
  });

  it('auto: a proxy outside the list never learns or answers a mechanism', async () => {
    const [other] = await proxiesFor('HTTPS evil.test:443', { auth: 'auto', credentialsFile: creds, credentialProxies: ['proxy.corp.test:8080'] });
    expect(other).toMatchObject({ auth: 'none', authorization: null, ntlm: null, credentialsWithheld: true });
    const refused = await new ProxyAuthDialogue(other!, { gss: fakeGss(), learned: new LearnedMechanisms() }).answer([{ scheme: 'negotiate', token: null }]);
    expect(refused).toMatchObject({ ok: false, reason: 'upstream_auth_required' });
  });

  it.each([
    ['PROXY 127.1:3128', '127.0.0.1:3128'],
    ['PROXY PROXY.Corp.Test:8080', 'proxy.corp.test:8080'],
    ['PROXY [0:0::1]:3128', '[::1]:3128'],
    ['HTTPS proxy.corp.test:8080', 'proxy.corp.test:8080'],
  ])('a listed proxy is recognized however the PAC spells it: %s', async (answer, entry) => {
    const [listed] = await proxiesFor(answer, { credentialsFile: creds, credentialProxies: [entry] });
    expect(listed).toMatchObject({ authorization: BASIC });
  });

  it.each([
    ['PROXY proxy.corp.test.evil.test:8080'],
    ['PROXY evilproxy.corp.test:8080'],
    ['PROXY 127.0.0.2:3128'],
    ['PROXY [::2]:3128'],
  ])('a proxy that only resembles a listed one gets nothing: %s', async (answer) => {
    const [other] = await proxiesFor(answer, { credentialsFile: creds, credentialProxies: ['proxy.corp.test:8080', '127.0.0.1:3128', '[::1]:3128'] });
    expect(other).toMatchObject({ authorization: null, credentialsWithheld: true });
  });

  it('fails closed when credentials are set and the list is absent (the config refuses this; the selector does not rely on it)', async () => {
    const [proxy] = await proxiesFor('PROXY proxy.corp.test:8080', { credentialsFile: creds });
    expect(proxy).toMatchObject({ authorization: null, auth: 'none', credentialsWithheld: true });
  });

  it('without credentials, nothing is withheld and nothing changes', async () => {
    const [proxy] = await proxiesFor('PROXY proxy.corp.test:8080', {});
    expect(proxy).toMatchObject({ authorization: null, auth: 'none' });
    expect(proxy?.credentialsWithheld).toBeUndefined();
  });

  it('a proxy outside the list keeps caFile and inspectsTls: only the credentials are withheld', async () => {
    const [other] = await proxiesFor('PROXY evil.test:8080', { credentialsFile: creds, inspectsTls: true, credentialProxies: ['proxy.corp.test:8080'] });
    expect(other).toMatchObject({ inspectsTls: true, credentialsWithheld: true });
  });
});
