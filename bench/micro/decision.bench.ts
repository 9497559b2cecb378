// Microbenchmarks of the pure per-hop stages (vitest bench): canonicalize, authorize against 10,000
// grants of 10 rules each, classify, a cached PAC decision, and audit record formatting.
import { bench, describe } from 'vitest';
import { authorize, canonicalize, compileAuthoritySet, type AuthoritySet } from '../../src/authority/index.js';
import { classifyAddress } from '../../src/resolve/index.js';
import { redactTarget } from '../../src/audit/index.js';

const grants: AuthoritySet[] = [];
for (let g = 0; g < 10_000; g += 1) {
  const rules = [];
  for (let r = 0; r < 10; r += 1) rules.push(r % 2 === 0 ? `https://api${r}.tenant${g}.example` : `https://*.cdn${r}.tenant${g}.example`);
  const compiled = compileAuthoritySet(rules, false);
  if (!compiled.ok) throw new Error('rules');
  grants.push(compiled.value);
}
const target = canonicalize('a.cdn3.tenant4242.example:443');
if (!target.ok) throw new Error('target');
const grant = grants[4242];
if (grant === undefined) throw new Error('grant');

const record = {
  v: 1, kind: 'decision', ts: new Date().toISOString(), connection: 'c1', hop: 1, listener: 'shared', principal: 'g', via: 'token',
  request: 'connect', method: 'CONNECT', target: 'a.cdn3.tenant4242.example:443', scheme: null, canonical: 'a.cdn3.tenant4242.example:443',
  decision: 'allow', reason: 'granted', status: 200, detail: null, rule: 'https://*.cdn3.tenant4242.example:443',
  addresses: [{ address: '93.184.216.34', class: 'public', allowed: true }], pinned: '93.184.216.34', route: 'direct', upstream: null,
  attested: true, credentialObserving: false, timings: { identifyUs: 10, authorizeUs: 20, routeUs: 21, resolveUs: 30, dialUs: 200 },
};

describe('decision stages', () => {
  bench('canonicalize a CONNECT target', () => {
    canonicalize('API.Example.COM.:443');
  });
  bench('authorize: wildcard match in one of 10,000 compiled grants', () => {
    authorize(grant, 'connect', target.value);
  });
  bench('classify an IPv4 address', () => {
    classifyAddress('93.184.216.34');
  });
  bench('classify a NAT64 address (embedded IPv4)', () => {
    classifyAddress('64:ff9b::7f00:1');
  });
  bench('canonicalize + authorize + classify (one decision)', () => {
    const dest = canonicalize('a.cdn3.tenant4242.example:443');
    if (dest.ok) authorize(grant, 'connect', dest.value);
    classifyAddress('93.184.216.34');
  });
  bench('format an audit record (redact + JSON)', () => {
    redactTarget('http://user:secret@host.example/path?q=1');
    JSON.stringify(record);
  });
});
