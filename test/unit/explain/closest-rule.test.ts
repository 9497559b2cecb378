// closestRule (src/explain/closest-rule.ts): which of a grant's rules `sluice explain` names for a
// destination no rule grants. Rules and destinations go through the real parsers.
import { describe, expect, it } from 'vitest';
import { canonicalize, parseDestinationRule, type DestinationRule } from '../../../src/authority/index.js';
import type { CanonicalDestination } from '../../../src/core/index.js';
import { closestRule } from '../../../src/explain/index.js';

function rules(...texts: string[]): DestinationRule[] {
  return texts.map((t) => {
    const r = parseDestinationRule(t);
    if (!r.ok) throw new Error(`${t}: ${r.detail}`);
    return r.value;
  });
}

function dest(authority: string): CanonicalDestination {
  const d = canonicalize(authority);
  if (!d.ok) throw new Error(authority);
  return d.value;
}

describe('closestRule', () => {
  it('prefers the same host on another port, over a rule on the same port', () => {
    const grant = rules('https://other.test:8443', 'https://origin.test:22443');
    expect(closestRule(grant, 'connect', dest('origin.test:8443'))).toEqual({ rule: 'https://origin.test:22443', why: 'same host, port 22443 instead of 8443' });
  });

  it('a wildcard covers the host: *.example.test is the same host for api.example.test', () => {
    expect(closestRule(rules('https://*.example.test'), 'connect', dest('api.example.test:8443'))?.rule).toBe('https://*.example.test:443');
    // …but never the apex, as authorize() never matches it.
    expect(closestRule(rules('https://*.example.test:8443'), 'connect', dest('example.test:9443'))).toBeNull();
  });

  it('same host and port under a rule of the other kind says which scheme the hop needs', () => {
    expect(closestRule(rules('ws://chat.test:8080'), 'connect', dest('chat.test:8080'))).toEqual({ rule: 'ws://chat.test:8080', why: 'same host and port, but a CONNECT needs an https, wss or tcp rule' });
    expect(closestRule(rules('https://api.test:8080'), 'forward', dest('api.test:8080'))?.why).toBe('same host and port, but an absolute-form request needs an http or ws rule');
  });

  it('on the same port, the host sharing most trailing labels, first in the grant on a tie; a rule of the other kind is no match', () => {
    const grant = rules('http://deny.test:443', 'https://a.elsewhere.example:443', 'https://www.example.test:443', 'https://cdn.example.test:443');
    expect(closestRule(grant, 'connect', dest('api.example.test:443'))).toEqual({ rule: 'https://www.example.test:443', why: 'same port, another host' });
    expect(closestRule(grant, 'connect', dest('x.other:443'))?.rule).toBe('https://a.elsewhere.example:443');
  });

  it('null when no rule shares the host or the port, and for no rules at all', () => {
    expect(closestRule(rules('https://api.test', 'http://api.test'), 'connect', dest('deny.test:22443'))).toBeNull();
    expect(closestRule([], 'forward', dest('deny.test:80'))).toBeNull();
  });

  it('IP literals match by address and port', () => {
    expect(closestRule(rules('tcp://[2001:db8::1]:22'), 'connect', dest('[2001:db8::1]:2222'))?.rule).toBe('tcp://[2001:db8::1]:22');
  });
});
