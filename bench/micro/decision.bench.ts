// Microbenchmarks of the per-hop stages (vitest bench): canonicalize, authorize against 10,000 grants of
// 10 rules each, classify, a PAC decision cached and uncached (QuickJS on its worker thread), and audit
// records: formatted from a record object, or encoded from the hop straight into a batch buffer (the
// file sink's path). `npm run bench:micro`.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, bench, describe } from 'vitest';
import { authorize, canonicalize, compileAuthoritySet, type AuthoritySet } from '../../src/authority/index.js';
import { classifyAddress } from '../../src/resolve/index.js';
import { closeBytesBound, decisionBytesBound, encodeClose, encodeDecision, formatRecord, redactTarget, type DecisionRecordV1 } from '../../src/audit/index.js';
import type { PinnedAddress } from '../../src/core/index.js';
import { closeRecordOf } from '../../src/proxy/hop/audit-hop.js';
import { decisionOf } from '../../src/proxy/hop/decision.js';
import { Hop } from '../../src/proxy/hop/hop.js';
import { PacSource, pacSelector } from '../../src/route/index.js';

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

const record: DecisionRecordV1 = {
  v: 1, kind: 'decision', ts: new Date().toISOString(), connection: 'c1', hop: 1, listener: 'shared', principal: 'g', via: 'token',
  request: 'connect', method: 'CONNECT', target: 'a.cdn3.tenant4242.example:443', scheme: null, canonical: 'a.cdn3.tenant4242.example:443',
  decision: 'allow', reason: 'granted', status: 200, detail: null, rule: 'https://*.cdn3.tenant4242.example:443',
  addresses: [{ address: '93.184.216.34', class: 'public', allowed: true }], pinned: '93.184.216.34', route: 'direct', upstream: null,
  attested: true, credentialObserving: false, timings: { identifyUs: 10, authorizeUs: 20, routeUs: 21, resolveUs: 30, dialUs: 200 }, source: '127.0.0.1',
};

// The same tunnel as a hop, as run-hop.ts records it.
const hop = new Hop(1, 'connect', 'CONNECT', 'a.cdn3.tenant4242.example:443');
hop.canonical = target.value;
hop.principal = { grantId: 'g', via: 'token' };
hop.rule = 'https://*.cdn3.tenant4242.example:443';
const pin = { address: '93.184.216.34', family: 4, port: 443, class: 'public' } as PinnedAddress;
hop.addresses = [{ address: '93.184.216.34', family: 4, class: 'public', allowed: true }];
hop.pinned = [pin];
hop.dialed = pin;
hop.route = { label: 'direct', mode: 'direct', hops: [{ kind: 'direct' }], pacAnswer: null };
hop.routeHops = hop.route.hops;
hop.usedHop = { kind: 'direct' };
Object.assign(hop, { identifyUs: 10, authorizeUs: 20, routeUs: 21, resolveUs: 30, dialUs: 200, firstByteUs: 350 });
const place = { id: 'c1', listener: 'shared', auditSource: '127.0.0.1' };
const closed = { closedBy: 'client_closed', status: 200, bytesUp: 517, bytesDown: 4096 } as const;
// A batch buffer, as the file sink's BatchWriter has; each line goes at its start.
const batch = Buffer.allocUnsafe(128 * 1024);

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
  bench('format an audit record (redact + JSON line)', () => {
    redactTarget('http://user:secret@host.example/path?q=1');
    formatRecord(record);
  });
});

describe('audit records of one tunnel, into the batch buffer', () => {
  bench('decision: decisionOf + formatRecord + write the string (a sink without the fast path)', () => {
    batch.write(formatRecord(decisionOf(hop, place, Date.now())), 0, 'utf8');
  });
  bench('decision: encoded from the hop (the file sink)', () => {
    decisionBytesBound(hop, place);
    encodeDecision(batch, 0, hop, place, Date.now());
  });
  bench('close: the record object + formatRecord + write the string', () => {
    batch.write(formatRecord(closeRecordOf(hop, place, closed, Date.now())), 0, 'utf8');
  });
  bench('close: encoded from the hop (the file sink)', () => {
    closeBytesBound(hop, place, closed);
    encodeClose(batch, 0, hop, place, closed, Date.now());
  });
});

// A corporate-style PAC: intranet suffixes and ranges go direct, the rest through two proxies.
const PAC = `function FindProxyForURL(url, host) {
  if (isPlainHostName(host) || dnsDomainIs(host, ".corp.example") || shExpMatch(host, "*.intranet.example")) return "DIRECT";
  if (isInNet(host, "10.0.0.0", "255.0.0.0")) return "DIRECT";
  if (shExpMatch(url, "https://*.cdn.example/*")) return "PROXY cdnproxy.example:3128; DIRECT";
  return "PROXY proxy1.example:8080; PROXY proxy2.example:8080";
}`;
const pacDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-bench-pac-'));
fs.writeFileSync(path.join(pacDir, 'proxy.pac'), PAC);
const pac = new PacSource({
  file: path.join(pacDir, 'proxy.pac'),
  limits: { timeoutMs: 1000, memoryBytes: 16 * 1024 * 1024, stackBytes: 256 * 1024 },
  host: { lookupSync: () => null, myIpAddress: () => '192.0.2.10', now: () => new Date() },
  fetchText: () => Promise.reject(new Error('no fetch in the benchmark')),
  onError: (message) => {
    throw new Error(message);
  },
  onLoad: () => undefined,
});
if (!(await pac.load())) throw new Error(`PAC did not load: ${pac.lastError}`);
const selector = pacSelector(pac, {});
const cachedDest = canonicalize('www.public.example:443');
if (!cachedDest.ok) throw new Error('dest');
await selector.select(cachedDest.value, 'connect', null);
let uncached = 0;
afterAll(() => {
  selector.close();
  pac.current?.dispose();
  fs.rmSync(pacDir, { recursive: true, force: true });
});

describe('PAC route decision', () => {
  bench('cached (same scheme/host/port as before)', async () => {
    await selector.select(cachedDest.value, 'connect', null);
  });
  bench('uncached (a new host each time: FindProxyForURL runs on the worker)', async () => {
    uncached += 1;
    const dest = canonicalize(`h${uncached}.public.example:443`);
    if (dest.ok) await selector.select(dest.value, 'connect', null);
  });
});
