// Microbenchmarks of one CONNECT hop's decision with 10,000 grants of 10 rules each (issue 16 targets:
// a hit under 1 µs p99, a miss under 2 µs p99). A miss is what a new key costs before the dial: the
// Basic credentials parsed and the token's SHA-256 compared (identify), the target canonicalized, the
// grant checked and authorized, the IP literal classified and pinned, and the outcome remembered. A hit
// is the lookup that replaces all of that, the grant liveness check that still runs, and filling the hop.
// The route stage is left out of both: the direct route is a constant. `npm run bench:micro`.
import { bench, describe } from 'vitest';
import { authorize, parseConnectTarget } from '../../src/authority/index.js';
import { grantSpecSchema } from '../../src/config/index.js';
import { GrantRegistry } from '../../src/grant/index.js';
import { identify, sha256 } from '../../src/identity/index.js';
import { literalAnswer, pin, SelfAddresses } from '../../src/resolve/index.js';
import { applyRemembered, HopCache } from '../../src/proxy/hop/hop-cache.js';
import { Hop } from '../../src/proxy/hop/hop.js';
import type { Route } from '../../src/route/index.js';

const GRANTS = 10_000;
const self = new SelfAddresses(['127.0.0.1:3128']);
const registry = new GrantRegistry(self, Date.now);
const installs = [];
for (let g = 0; g < GRANTS; g += 1) {
  const destinations = [];
  for (let r = 0; r < 9; r += 1) destinations.push(r % 2 === 0 ? `https://api${r}.tenant${g}.example` : `https://*.cdn${r}.tenant${g}.example`);
  destinations.push(`tcp://127.0.0.1:${1000 + (g % 50_000)}`);
  const spec = grantSpecSchema.parse({ destinations, allowAddressClasses: ['loopback'] });
  const compiled = registry.compile({ id: `g${g}`, spec, revoked: false, tokenSha256: null }, '');
  if (!compiled.ok) throw new Error('grant');
  installs.push({ grant: compiled.value, tokenSha256: sha256(`token-${g}`) });
}
registry.install(installs);

const GRANT = 4242;
const header = `Basic ${Buffer.from(`g${GRANT}:token-${GRANT}`).toString('base64')}`;
const target = `127.0.0.1:${1000 + GRANT}`;
const listener = { boundGrant: null };
const ROUTE: Route = { label: 'direct', mode: 'direct', hops: [{ kind: 'direct' }], pacAnswer: null };
const cache = new HopCache({ registry, self, routes: {}, now: () => performance.now() });

/** Everything a miss runs before the dial, then remembering it; false if the hop was refused. */
function decideMiss(key: string): boolean {
  const hop = new Hop(1, 'connect', 'CONNECT', target);
  const stamp = cache.stamp();
  const principal = identify(listener, registry.tokens, header);
  if (!principal.ok) return false;
  hop.principal = principal.value;
  const grant = registry.grants.get(principal.value.grantId);
  if (grant === undefined || grant.revoked) return false;
  hop.grant = grant;
  const dest = parseConnectTarget(target);
  if (!dest.ok) return false;
  hop.canonical = dest.value;
  const authorized = authorize(grant.authority, 'connect', dest.value);
  if (!authorized.ok) return false;
  hop.rule = authorized.value.text;
  hop.route = ROUTE;
  hop.routeHops = ROUTE.hops;
  const answer = literalAnswer(dest.value);
  if (answer === null) return false;
  const pinned = pin(dest.value, [answer], grant.addressPolicy);
  if (!pinned.verdict.ok) return false;
  hop.addresses = pinned.classified;
  hop.pinned = pinned.verdict.value;
  hop.answerTtlMs = Infinity;
  cache.remember(key, hop, stamp);
  return true;
}

const hitKey = HopCache.key('connect', 'shared', null, header, target);
if (!decideMiss(hitKey)) throw new Error('the benchmark hop is refused');
const missKey = HopCache.key('connect', 'other', null, header, target);

describe('one CONNECT hop decision, 10,000 grants', () => {
  bench('cache hit: lookup, grant liveness, hop filled', () => {
    const hop = new Hop(1, 'connect', 'CONNECT', target);
    const remembered = cache.get(HopCache.key('connect', 'shared', null, header, target));
    if (remembered === undefined) throw new Error('miss');
    const grant = registry.grants.get(remembered.principal.grantId);
    if (grant !== remembered.grant || grant.revoked || (grant.expiresAtMs !== null && Date.now() >= grant.expiresAtMs)) throw new Error('grant');
    hop.principal = remembered.principal;
    hop.grant = grant;
    applyRemembered(hop, remembered);
  });
  bench('cache miss: identify (SHA-256), canonicalize, authorize, classify, pin, remember', () => {
    // Remembered under one key again and again: the decision's cost, not the cost of a map that a
    // stream of new keys keeps growing and evicting (that is the bench's tunnels-per-second figure).
    if (!decideMiss(missKey)) throw new Error('refused');
  });
});
