// System mode reads Sluice's own proxy variables; NO_PROXY follows curl's documented semantics, and a
// set-but-unparsable variable is an error, never ignored.
import { describe, expect, it } from 'vitest';
import { canonicalize } from '../../../src/authority/index.js';
import { parseNoProxy, readSystemProxy, parseUpstream, readCredentialsFile } from '../../../src/route/index.js';
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
