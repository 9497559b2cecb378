// System mode reads Sluice's own proxy variables with curl's precedence (https_proxy, HTTPS_PROXY, then
// all_proxy, ALL_PROXY for CONNECT; http_proxy, HTTP_PROXY, then all_proxy, ALL_PROXY for absolute-form);
// NO_PROXY follows curl's documented semantics, and a consulted but unparsable variable is an error,
// never ignored and never replaced by DIRECT.
import { describe, expect, it } from 'vitest';
import { canonicalize } from '../../../src/authority/index.js';
import { describeSystemProxy, isSystemProxySplit, parseNoProxy, readSystemProxy, parseUpstream, readCredentialsFile, type SystemProxy } from '../../../src/route/index.js';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const dest = (authority: string) => {
  const v = canonicalize(authority);
  if (!v.ok) throw new Error(v.detail);
  return v.value;
};

describe('NO_PROXY', () => {
  it.each([
    ['example.com', 'example.com:443', true],
    ['example.com', 'www.example.com:443', true],
    ['example.com', 'notexample.com:443', false],
    ['example.com', 'example.com.evil.test:443', false],
    ['.example.com', 'example.com:443', true],
    ['.example.com', 'a.b.example.com:80', true],
    ['*.example.com', 'a.example.com:80', true],
    ['*', 'anything.test:1', true],
    ['example.com:8080', 'example.com:8080', true],
    ['example.com:8080', 'example.com:443', false],
    ['10.0.0.0/8', '10.1.2.3:443', true],
    ['10.0.0.0/8', '11.1.2.3:443', false],
    ['10.0.0.0/8', 'ten.test:443', false], // CIDRs match IP literals only, never resolved names
    ['127.0.0.1', '127.0.0.1:80', true],
    ['::1', '[::1]:80', true],
    ['fd00::/8', '[fd12::1]:80', true],
    ['a.test, b.test  c.test', 'c.test:1', true],
    ['EXAMPLE.COM.', 'example.com:1', true],
  ])('%s against %s → %s', (list, authority, expected) => {
    const parsed = parseNoProxy(list);
    expect(parsed.ok).toBe(true);
    if (parsed.ok) expect(parsed.value.matches(dest(authority))).toBe(expected);
  });

  it.each(['10.0.0.0/33', 'host:99999x', 'bad host!'])('refuses %s', (list) => {
    expect(parseNoProxy(list).ok).toBe(false);
  });
});

describe('system proxy variables', () => {
  it('prefers lowercase, accepts bare host:port, and keeps URL credentials for that proxy only', () => {
    const r = readSystemProxy({ HTTPS_PROXY: 'http://upper:1', https_proxy: 'http://u:p%40ss@lower.test:3128', HTTP_PROXY: 'corp.test:8080' }, undefined);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.value.https?.label).toBe('http://lower.test:3128');
    expect(r.value.https?.authorization).toBe(`Basic ${Buffer.from('u:p@ss').toString('base64')}`);
    expect(r.value.http?.label).toBe('http://corp.test:8080');
    expect(r.value.noProxy).toBeNull();
  });

  it('stops with an error naming the variable when a set value cannot be parsed, without echoing credentials', () => {
    const r = readSystemProxy({ https_proxy: 'socks5://u:secret@h:1', no_proxy: '10.0.0.0/99' }, undefined);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.issues.map((i) => i.variable)).toEqual(['https_proxy', 'no_proxy']);
    expect(JSON.stringify(r.issues)).not.toContain('secret');
  });

  it('treats unset and empty variables as no proxy (direct is the effective route)', () => {
    const r = readSystemProxy({ http_proxy: '' }, undefined);
    expect(r.ok && r.value.http === null && r.value.https === null).toBe(true);
  });
});

/** The system proxy read from `env`, which must parse. */
function system(env: Record<string, string>): SystemProxy {
  const r = readSystemProxy(env, undefined);
  if (!r.ok) throw new Error(JSON.stringify(r.issues));
  return r.value;
}

/** Where each family goes: the proxy label and the variable it came from, or direct. */
const routes = (s: SystemProxy): { connect: string; forward: string } => ({
  connect: s.https === null ? 'direct' : `${s.https.label} from ${s.sources.https ?? '?'}`,
  forward: s.http === null ? 'direct' : `${s.http.label} from ${s.sources.http ?? '?'}`,
});

describe('review 2026-12 finding 11: ALL_PROXY, and one variable without the other', () => {
  it('ALL_PROXY only: CONNECT and absolute-form both use it', () => {
    const s = system({ ALL_PROXY: 'http://all.test:3128' });
    expect(routes(s)).toEqual({ connect: 'http://all.test:3128 from ALL_PROXY', forward: 'http://all.test:3128 from ALL_PROXY' });
    expect(isSystemProxySplit(s)).toBe(false);
  });

  it('HTTP_PROXY only: absolute-form through it, CONNECT direct, and the summary says which and why', () => {
    const s = system({ HTTP_PROXY: 'http://corp.test:8080' });
    expect(routes(s)).toEqual({ connect: 'direct', forward: 'http://corp.test:8080 from HTTP_PROXY' });
    expect(isSystemProxySplit(s)).toBe(true);
    expect(describeSystemProxy(s)).toEqual([
      'https, wss, tcp (CONNECT): system direct (no https_proxy, HTTPS_PROXY, all_proxy or ALL_PROXY set)',
      'http, ws (absolute-form): system proxy http://corp.test:8080 (from HTTP_PROXY)',
    ]);
  });

  it('HTTPS_PROXY and ALL_PROXY: CONNECT uses HTTPS_PROXY, absolute-form falls back to ALL_PROXY', () => {
    const s = system({ HTTPS_PROXY: 'http://tls.test:3128', ALL_PROXY: 'http://all.test:3128' });
    expect(routes(s)).toEqual({ connect: 'http://tls.test:3128 from HTTPS_PROXY', forward: 'http://all.test:3128 from ALL_PROXY' });
  });

  it.each([
    ['lowercase all_proxy before ALL_PROXY', { all_proxy: 'http://lower.test:1', ALL_PROXY: 'http://upper.test:1' }, 'http://lower.test:1 from all_proxy', 'http://lower.test:1 from all_proxy'],
    ['a scheme variable before all_proxy', { https_proxy: 'http://tls.test:1', all_proxy: 'http://all.test:1' }, 'http://tls.test:1 from https_proxy', 'http://all.test:1 from all_proxy'],
    ['http_proxy before HTTP_PROXY', { http_proxy: 'http://lower.test:1', HTTP_PROXY: 'http://upper.test:1' }, 'direct', 'http://lower.test:1 from http_proxy'],
    // curl skips uppercase HTTP_PROXY (a CGI concern); Sluice is no CGI program and honours it.
    ['uppercase HTTP_PROXY before all_proxy', { HTTP_PROXY: 'http://upper.test:1', all_proxy: 'http://all.test:1' }, 'http://all.test:1 from all_proxy', 'http://upper.test:1 from HTTP_PROXY'],
    // curl_getenv() returns NULL for an empty value: an empty variable is unset and the next one is read.
    ['an empty https_proxy as unset', { https_proxy: ' ', ALL_PROXY: 'http://all.test:1' }, 'http://all.test:1 from ALL_PROXY', 'http://all.test:1 from ALL_PROXY'],
  ])('reads %s', (_what, env, connect, forward) => {
    expect(routes(system(env))).toEqual({ connect, forward });
  });

  it('socks5:// in ALL_PROXY, when a family falls back to it: an issue naming ALL_PROXY (fail closed, never direct)', () => {
    const r = readSystemProxy({ https_proxy: 'http://tls.test:3128', ALL_PROXY: 'socks5://u:secret@127.0.0.1:1080' }, undefined);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.issues).toHaveLength(1);
    expect(r.issues[0]?.variable).toBe('ALL_PROXY');
    expect(r.issues[0]?.message).toMatch(/socks5 is not supported .*never goes direct/);
    expect(JSON.stringify(r.issues)).not.toContain('secret');
  });

  it('socks5:// in ALL_PROXY while both families have their own variable: not consulted, as in curl', () => {
    const s = system({ http_proxy: 'http://web.test:1', https_proxy: 'http://tls.test:1', all_proxy: 'socks5://127.0.0.1:1080' });
    expect(routes(s)).toEqual({ connect: 'http://tls.test:1 from https_proxy', forward: 'http://web.test:1 from http_proxy' });
  });

  it('says NO_PROXY destinations go direct, and nothing is split when no variable is set', () => {
    const s = system({ ALL_PROXY: 'http://all.test:1', NO_PROXY: 'local.test' });
    expect(describeSystemProxy(s).at(-1)).toBe('destinations matching NO_PROXY: system direct');
    expect(isSystemProxySplit(system({}))).toBe(false);
    expect(describeSystemProxy(system({}))[1]).toBe('http, ws (absolute-form): system direct (no http_proxy, HTTP_PROXY, all_proxy or ALL_PROXY set)');
  });
});

describe('upstream proxy settings', () => {
  it('refuses credentials in route.proxy.url, paths, and unsupported schemes', () => {
    expect(parseUpstream('http://u:p@corp.test:8080', {}).ok).toBe(false);
    expect(parseUpstream('http://corp.test:8080/path', {}).ok).toBe(false);
    expect(parseUpstream('socks5://corp.test:1080', {}).ok).toBe(false);
    const https = parseUpstream('https://[::1]', {});
    expect(https.ok && https.value.label).toBe('https://[::1]:443');
  });

  it('reads one user:password line from credentialsFile', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-creds-'));
    try {
      const file = path.join(dir, 'corp.txt');
      fs.writeFileSync(file, '\nalice:s3:cret\n');
      expect(readCredentialsFile(file)).toEqual({ ok: true, value: `Basic ${Buffer.from('alice:s3:cret').toString('base64')}` });
      fs.writeFileSync(file, 'no-colon\n');
      expect(readCredentialsFile(file).ok).toBe(false);
      expect(readCredentialsFile(path.join(dir, 'missing')).ok).toBe(false);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
