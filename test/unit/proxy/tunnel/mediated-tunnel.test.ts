// Which CONNECT targets a mediated tunnel serves, and which requests inside it (src/proxy/tunnel/mediated-tunnel.ts).
// The threat: never widen a grant. A target an https/wss/tcp rule (or `unrestricted`) grants keeps its
// opaque tunnel; a target only a ws:// rule or nothing grants is refused as before; and inside the tunnel a
// request may name only the CONNECT target: another host, port or scheme in an absolute-form target, or an
// asterisk- or authority-form target, is refused (RFC 9112 §3.2: request-target forms). The end-to-end
// behaviour with real clients is test/integration/mediated-tunnel.test.ts.
import http from 'node:http';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { canonicalize, compileAuthoritySet } from '../../../../src/authority/index.js';
import type { CanonicalDestination } from '../../../../src/core/index.js';
import type { RuntimeGrant } from '../../../../src/grant/index.js';
import { ConnectionContext } from '../../../../src/proxy/hop/connection-context.js';
import { Hop } from '../../../../src/proxy/hop/hop.js';
import { mediatingRule, targetInTunnel } from '../../../../src/proxy/tunnel/mediated-tunnel.js';

function grantOf(destinations: string[], unrestricted = false): RuntimeGrant {
  const compiled = compileAuthoritySet(destinations, unrestricted);
  if (!compiled.ok) throw new Error('bad rules');
  return { authority: compiled.value } as unknown as RuntimeGrant;
}

function dest(authority: string): CanonicalDestination {
  const d = canonicalize(authority);
  if (!d.ok) throw new Error(authority);
  return d.value;
}

function connectHop(target: string): Hop {
  const hop = new Hop(1, 'connect', 'CONNECT', target);
  hop.canonical = dest(target);
  return hop;
}

function context(withParser = true): ConnectionContext {
  const ctx = new ConnectionContext(new net.Socket(), 'shared', { boundGrant: null });
  if (withParser) ctx.httpServer = http.createServer();
  return ctx;
}

describe('mediatingRule', () => {
  it.each([
    [['http://web.test:8080'], 'web.test:8080', 'http://web.test:8080'],
    [['http://web.test'], 'web.test:80', 'http://web.test:80'],
    [['http://*.web.test:8080'], 'a.web.test:8080', 'http://*.web.test:8080'],
    [['http://[::1]:8080'], '[::1]:8080', 'http://[::1]:8080'],
  ])('%j mediates CONNECT %s by %s', (rules, target, rule) => {
    expect(mediatingRule(context(), connectHop(target), grantOf(rules))).toBe(rule);
  });

  it.each([
    [['http://web.test:8080', 'tcp://web.test:8080'], 'web.test:8080', 'a tcp:// rule keeps the opaque tunnel'],
    [['http://web.test:443', 'https://web.test'], 'web.test:443', 'an https:// rule keeps the opaque tunnel'],
    [['http://web.test:8443', 'wss://web.test:8443'], 'web.test:8443', 'a wss:// rule keeps the opaque tunnel'],
    [['ws://web.test:8080'], 'web.test:8080', 'a ws:// rule alone does not grant plain HTTP requests'],
    [['http://web.test:8080'], 'web.test:8081', 'another port'],
    [['http://web.test:8080'], 'other.test:8080', 'another host'],
    [['http://*.web.test:8080'], 'web.test:8080', 'a wildcard never matches its own apex'],
    [[], 'web.test:8080', 'no rule at all'],
  ])('%j does not mediate CONNECT %s (%s)', (rules, target) => {
    expect(mediatingRule(context(), connectHop(target), grantOf(rules))).toBeNull();
  });

  it('an unrestricted grant tunnels opaquely, as before', () => {
    expect(mediatingRule(context(), connectHop('web.test:8080'), grantOf([], true))).toBeNull();
  });

  it('without a parser on the connection nothing is mediated (the CONNECT is refused as before)', () => {
    expect(mediatingRule(context(false), connectHop('web.test:8080'), grantOf(['http://web.test:8080']))).toBeNull();
  });

  it('times the authorization it did', () => {
    const hop = connectHop('web.test:8080');
    mediatingRule(context(), hop, grantOf(['http://web.test:8080']));
    expect(hop.authorizeUs).not.toBeNull();
  });
});

describe('targetInTunnel', () => {
  const web = dest('web.test:8080');
  it.each([
    ['/', 'http://web.test:8080/'],
    ['/a/b?c=d', 'http://web.test:8080/a/b?c=d'],
    ['//evil.test/x', 'http://web.test:8080//evil.test/x'], // a path, never an authority
    ['/@evil.test', 'http://web.test:8080/@evil.test'],
    ['http://web.test:8080/x', 'http://web.test:8080/x'],
    ['http://WEB.test.:8080/x', 'http://WEB.test.:8080/x'], // the same canonical destination
  ])('%j stands for %j', (raw, absolute) => {
    expect(targetInTunnel(web, raw)).toBe(absolute);
  });

  it.each([
    ['http://other.test:8080/x'],
    ['http://web.test:8081/x'],
    ['http://web.test/x'], // port 80
    ['ws://web.test:8080/x'],
    ['https://web.test:8080/x'],
    ['http://user@web.test:8080/x'],
    ['*'],
    ['web.test:8080'],
    ['x'],
    [''],
  ])('%j is refused', (raw) => {
    expect(targetInTunnel(web, raw)).toBeNull();
  });

  it('an IPv6 destination keeps its brackets', () => {
    expect(targetInTunnel(dest('[::1]:8080'), '/x')).toBe('http://[::1]:8080/x');
  });
});
