// The grant compiler: a grant from config or from an admin request body becomes the authority set and
// address policy a hop consults, or a list of issues naming the key that is wrong. A malformed
// destination or address must never compile into something wider than written, a config grant must never
// start without the token its file points at (tokenEnv unset or empty fails closed), and every issue
// must name its key path, so the operator sees which grant and which entry to fix.
import { describe, expect, it } from 'vitest';
import { configSchema, grantSpecSchema, type GrantSection } from '../../../src/config/index.js';
import { authorize, canonicalize } from '../../../src/authority/index.js';
import { checkAddress, HostAddresses, SelfAddresses } from '../../../src/resolve/index.js';
import { sha256 } from '../../../src/identity/index.js';
import { checkConfigGrants, compileGrant, configTokens } from '../../../src/grant/index.js';
import type { CanonicalDestination } from '../../../src/core/index.js';

/** No interface addresses: only the listeners given are `self`, so each case is decided by the grant alone. */
const NO_INTERFACES = new HostAddresses(() => ({}));
const self = (...listeners: string[]): SelfAddresses => new SelfAddresses(listeners, NO_INTERFACES);

const spec = (body: Record<string, unknown>) => grantSpecSchema.parse(body);
const sections = (grants: Record<string, unknown>[]): GrantSection[] => configSchema.shape.grants.parse(grants);

function dest(authority: string): CanonicalDestination {
  const d = canonicalize(authority);
  if (!d.ok) throw new Error(`bad test authority ${authority}`);
  return d.value;
}

function compiled(body: Record<string, unknown>, selfAddresses = self()) {
  const result = compileGrant('g', spec(body), false, selfAddresses, '');
  if (!result.ok) throw new Error(JSON.stringify(result.issues));
  return result.value;
}

const HASH_A = 'a'.repeat(64);

describe('compileGrant: what a valid grant compiles to', () => {
  it('carries id, revoked, generation, limits and the SNI guard; no expiry is null', () => {
    const result = compileGrant('g-1', spec({ destinations: ['https://a.test'], generation: 'run-7', tls: { requireSniMatch: true }, limits: { maxConcurrent: 2 } }), true, self(), '');
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.value).toMatchObject({ id: 'g-1', revoked: true, generation: 'run-7', requireSniMatch: true, expiresAtMs: null, requireAttestedAddress: false });
    expect(result.value.limits.maxConcurrent).toBe(2);
  });

  it('reads expiresAt given as an ISO string with an offset, and as a Date', () => {
    expect(compiled({ limits: { expiresAt: '2030-01-01T02:00:00+02:00' } }).expiresAtMs).toBe(Date.UTC(2030, 0, 1));
    expect(compiled({ limits: { expiresAt: new Date(Date.UTC(2031, 5, 1)) } }).expiresAtMs).toBe(Date.UTC(2031, 5, 1));
  });

  it('authorizes exactly what it names: a CONNECT to another host or port, or the parent of a wildcard, is not granted', () => {
    const grant = compiled({ destinations: ['https://api.a.test', 'https://*.b.test:8443'] });
    expect(authorize(grant.authority, 'connect', dest('api.a.test:443')).ok).toBe(true);
    expect(authorize(grant.authority, 'connect', dest('x.b.test:8443')).ok).toBe(true);
    expect(authorize(grant.authority, 'connect', dest('api.a.test:8443')).ok).toBe(false);
    expect(authorize(grant.authority, 'connect', dest('b.test:8443')).ok).toBe(false);
    expect(authorize(grant.authority, 'connect', dest('evil.test:443')).ok).toBe(false);
    expect(grant.authority.unrestricted).toBe(false);
  });

  it('a grant with no destinations authorizes nothing unless it says unrestricted', () => {
    expect(authorize(compiled({}).authority, 'connect', dest('a.test:443')).ok).toBe(false);
    expect(authorize(compiled({ unrestricted: true }).authority, 'connect', dest('a.test:443')).ok).toBe(true);
  });

  it('threads Sluice’s own addresses into the policy: 0.0.0.0/0 and loopback still cannot reach a Sluice listener', () => {
    const grant = compiled({ unrestricted: true, allowAddressClasses: ['loopback'], allowAddresses: ['0.0.0.0/0', '::/0'] }, self('127.0.0.1:3128'));
    expect(checkAddress(grant.addressPolicy, { address: '127.0.0.1', family: 4 }, 3128)).toMatchObject({ class: 'self', allowed: false });
    expect(checkAddress(grant.addressPolicy, { address: '::1', family: 6 }, 3128)).toMatchObject({ class: 'self', allowed: false });
    expect(checkAddress(grant.addressPolicy, { address: '127.0.0.1', family: 4 }, 8080).allowed).toBe(true);
  });

  it('admits only public addresses by default: a loopback, private or metadata address needs the grant to say so', () => {
    const grant = compiled({ destinations: ['https://a.test'] });
    for (const address of ['127.0.0.1', '10.0.0.1', '169.254.169.254', '::1']) {
      expect(checkAddress(grant.addressPolicy, { address, family: address.includes(':') ? 6 : 4 }, 443).allowed).toBe(false);
    }
    expect(checkAddress(grant.addressPolicy, { address: '93.184.216.34', family: 4 }, 443).allowed).toBe(true);
  });
});

describe('compileGrant: a malformed grant is refused with issues naming the key path', () => {
  it('names grants[i].destinations[j] for each bad destination of a config grant, and compiles nothing', () => {
    const result = compileGrant('g', spec({ destinations: ['https://ok.test', 'ftp://a.test', 'https://a.test/path', 'tcp://a.test'] }), false, self(), 'grants[3]');
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.issues.map((i) => i.path)).toEqual(['grants[3].destinations[1]', 'grants[3].destinations[2]', 'grants[3].destinations[3]']);
    expect(result.issues[0]?.message).toContain('ftp://a.test');
  });

  it('names destinations[j] without a prefix for an admin request body', () => {
    const result = compileGrant('g', spec({ destinations: ['https://a.*.test'] }), false, self(), '');
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.issues).toEqual([{ path: 'destinations[0]', message: expect.stringContaining('wildcard') }]);
  });

  it.each([
    ['a user part smuggled in', 'https://user@a.test'],
    ['a wildcard that is not the whole first label', 'https://*a.test'],
    ['a wildcard over an address', 'https://*.10.0.0.1'],
    ['a port out of range', 'https://a.test:65536'],
    ['no scheme', 'a.test:443'],
  ])('refuses a destination with %s', (_why, destination) => {
    const result = compileGrant('g', spec({ destinations: [destination] }), false, self(), '');
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.issues.map((i) => i.path)).toEqual(['destinations[0]']);
  });

  it('names allowAddresses[j] for each entry that is not an address or CIDR (a bad prefix never widens to /0)', () => {
    const result = compileGrant('g', spec({ allowAddresses: ['10.0.0.0/8', '10.0.0.0/33', 'intranet', '::/129', '10.0.0.0/8/8', '10.0.0.0/-1'] }), false, self(), 'grants[0]');
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.issues.map((i) => i.path)).toEqual(['grants[0].allowAddresses[1]', 'grants[0].allowAddresses[2]', 'grants[0].allowAddresses[3]', 'grants[0].allowAddresses[4]', 'grants[0].allowAddresses[5]']);
    expect(result.issues[1]?.message).toContain('"intranet"');
  });

  it('reports bad destinations and bad addresses together, in one pass', () => {
    const result = compileGrant('g', spec({ destinations: ['gopher://a.test'], allowAddresses: ['nope'] }), false, self(), 'grants[1]');
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.issues.map((i) => i.path)).toEqual(['grants[1].destinations[0]', 'grants[1].allowAddresses[0]']);
  });
});

describe('configTokens: each config grant’s token hash, failing closed', () => {
  it('takes tokenSha256 as given, and hashes the variable tokenEnv names', () => {
    const result = configTokens(sections([
      { id: 'hashed', tokenSha256: HASH_A },
      { id: 'from-env', tokenEnv: 'GRANT_TOKEN' },
      { id: 'listener-only' },
    ]), { GRANT_TOKEN: 's3cret' });
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.value.get('hashed')).toEqual(Buffer.from(HASH_A, 'hex'));
    expect(result.value.get('from-env')).toEqual(sha256('s3cret'));
    expect(result.value.has('listener-only')).toBe(false);
    expect([...result.value.keys()]).toEqual(['hashed', 'from-env']);
  });

  it('refuses an unset and an empty tokenEnv, naming grants[i].tokenEnv and the variable, and returns no partial table', () => {
    const result = configTokens(sections([
      { id: 'ok', tokenEnv: 'SET' },
      { id: 'unset', tokenEnv: 'NOT_SET' },
      { id: 'empty', tokenEnv: 'EMPTY' },
    ]), { SET: 'x', EMPTY: '' });
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.issues).toEqual([
      { path: 'grants[1].tokenEnv', message: expect.stringContaining('NOT_SET') },
      { path: 'grants[2].tokenEnv', message: expect.stringContaining('EMPTY') },
    ]);
  });

  it('never puts a token in an issue message', () => {
    const result = configTokens(sections([{ id: 'a', tokenEnv: 'A' }, { id: 'b', tokenEnv: 'B' }]), { A: 'the-real-token', B: '' });
    expect(result.ok).toBe(false);
    if (!result.ok) expect(JSON.stringify(result.issues)).not.toContain('the-real-token');
  });
});

describe('checkConfigGrants: every config grant validated before anything is installed', () => {
  it('is empty for grants that compile and whose tokens are available', () => {
    const grants = sections([{ id: 'a', tokenEnv: 'A', destinations: ['https://a.test'] }, { id: 'b', tokenSha256: HASH_A, allowAddresses: ['10.0.0.0/8'] }]);
    expect(checkConfigGrants(grants, { A: 'token' }, self())).toEqual([]);
  });

  it('collects both kinds of issue: compile issues with the grant’s index, and a missing token', () => {
    const grants = sections([
      { id: 'fine', destinations: ['https://a.test'] },
      { id: 'bad-dest', destinations: ['https://a.test', 'nope://x'], allowAddresses: ['1.2.3.4/99'] },
      { id: 'no-token', tokenEnv: 'MISSING', destinations: ['https://b.test'] },
    ]);
    const issues = checkConfigGrants(grants, {}, self());
    expect(issues.map((i) => i.path)).toEqual(['grants[1].destinations[1]', 'grants[1].allowAddresses[0]', 'grants[2].tokenEnv']);
  });
});
