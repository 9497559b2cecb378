// Config cross-checks that guard how far a listener reaches (review 2026-12, findings 9, 10 and 12): each
// refused config is a key-path issue, so `sluice check-config` and `sluice start` both exit 2 on it.
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { parseConfigText, type ConfigIssue } from '../../../src/config/index.js';

const grants = [{ id: 'a', destinations: ['https://a.test'] }];

function issuesOf(config: Record<string, unknown>): readonly ConfigIssue[] {
  const parsed = parseConfigText(stringify({ grants, ...config }), '/cfg/sluice.yaml', '/cfg');
  return parsed.ok ? [] : parsed.issues;
}

describe('listeners[].socketGroup', () => {
  it('is accepted on a unix: listener, as a name or a gid', () => {
    expect(issuesOf({ listeners: [{ name: 'a', listen: 'unix:/run/a.sock', grant: 'a', socketGroup: 'sandboxes' }] })).toEqual([]);
    expect(issuesOf({ listeners: [{ name: 'a', listen: 'unix:/run/a.sock', grant: 'a', socketGroup: 21010 }] })).toEqual([]);
  });

  it('is refused on a TCP listener, which has no socket file', () => {
    expect(issuesOf({ listeners: [{ name: 't', listen: '127.0.0.1:0', socketGroup: 'sandboxes' }] })).toEqual([
      expect.objectContaining({ path: 'listeners[0].socketGroup' }),
    ]);
  });

  it.each([['-rf'], ['a:b'], [''], [-1], [1.5]])('refuses the malformed group %j', (group) => {
    const issues = issuesOf({ listeners: [{ name: 'a', listen: 'unix:/run/a.sock', grant: 'a', socketGroup: group }] });
    expect(issues.map((i) => i.path)).toContain('listeners[0].socketGroup');
  });
});

describe('a listener bound to a grant (no token needed) must not be reachable from the network', () => {
  it.each([['0.0.0.0:3180'], ['[::]:3180'], ['192.0.2.7:3180'], ['10.0.0.1:0'], ['localhost:3180'], ['[::ffff:127.0.0.1]:3180']])(
    'refuses %s at listeners[N].listen',
    (listen) => {
      const issues = issuesOf({ listeners: [{ name: 'shared', listen: '127.0.0.1:0' }, { name: 'sandbox', listen, grant: 'a' }] });
      expect(issues).toEqual([expect.objectContaining({ path: 'listeners[1].listen', message: expect.stringContaining('loopback') })]);
    },
  );

  it.each([['127.0.0.1:0'], ['127.9.9.9:3180'], ['[::1]:3180'], ['unix:/run/a.sock']])('accepts %s', (listen) => {
    expect(issuesOf({ listeners: [{ name: 'sandbox', listen, grant: 'a' }] })).toEqual([]);
  });

  it('leaves token-identified listeners where the operator puts them', () => {
    expect(issuesOf({ listeners: [{ name: 'shared', listen: '0.0.0.0:3180', identify: 'token' }] })).toEqual([]);
  });
});

describe('a TCP admin listener needs a token (finding 10: a config error, not a start-up failure)', () => {
  const listeners = [{ name: 'shared', listen: '127.0.0.1:0' }];

  it('is refused at admin.listen without admin.tokenSha256 or admin.tokenEnv', () => {
    expect(issuesOf({ listeners, admin: { listen: '127.0.0.1:9180' } })).toEqual([
      expect.objectContaining({ path: 'admin.listen', message: expect.stringContaining('admin.tokenSha256') }),
    ]);
  });

  it.each([
    ['a token digest', { listen: '127.0.0.1:9180', tokenSha256: 'ab'.repeat(32) }],
    ['a token variable', { listen: '[::1]:9180', tokenEnv: 'SLUICE_ADMIN_TOKEN' }],
    ['a Unix socket without a token', { listen: 'unix:/run/sluice/admin.sock' }],
  ])('is accepted with %s', (_what, admin) => {
    expect(issuesOf({ listeners, admin })).toEqual([]);
  });
});

describe('every error of a file in one pass (issue 17, item 3)', () => {
  const listeners = [{ name: 'shared', listen: '127.0.0.1:0' }];

  it('cross-checks the sections that parsed when another has a schema error', () => {
    const issues = issuesOf({
      listeners: [...listeners, { name: 'shared', listen: '127.0.0.1:0' }],
      dns: { timeoutMs: -1 },
      grants: [
        { id: 'a', destinations: [] },
        { id: 'a', destinations: [] },
      ],
    });
    expect(issues.map((i) => i.path)).toEqual(['dns.timeoutMs', 'grants[1].id', 'listeners[1].name']);
  });

  it('does not call a grant missing when it is there but has an error of its own', () => {
    const issues = issuesOf({ listeners: [{ name: 's', listen: 'unix:/run/s.sock', grant: 'b' }], grants: [{ id: 'b', destinations: 'not-a-list' }] });
    expect(issues.map((i) => i.path)).toEqual(['grants[0].destinations']);
  });

  it('returns the draft of what parsed, paths resolved, list items at their own index', () => {
    const parsed = parseConfigText(stringify({ listeners: [{ name: 'x', listen: 'nope' }, { name: 'y', listen: 'unix:./y.sock' }], grants, dns: { nope: 1 } }), '/cfg/s.yaml', '/cfg');
    expect(parsed.ok).toBe(false);
    const draft = !parsed.ok ? parsed.draft : null;
    expect(draft?.listeners.map((l) => l?.listen)).toEqual([undefined, 'unix:/cfg/y.sock']);
    expect(draft?.dns).toBeUndefined();
    expect(draft?.grants.map((g) => g?.id)).toEqual(['a']);
  });
});

describe('a config grant that has already expired is an error, not a grant that refuses every hop', () => {
  const at = '2030-01-01T00:00:00Z';
  const atMs = Date.parse(at);
  const text = stringify({ listeners: [{ name: 'shared', listen: '127.0.0.1:0' }], grants: [{ id: 'a', destinations: [], limits: { expiresAt: at } }] });

  it('is refused from its expiresAt on, naming grants[N].limits.expiresAt', () => {
    for (const nowMs of [atMs, atMs + 86_400_000]) {
      const parsed = parseConfigText(text, '/cfg/s.yaml', '/cfg', { nowMs });
      expect(!parsed.ok && parsed.issues).toEqual([{ path: 'grants[0].limits.expiresAt', message: expect.stringContaining('has passed') }]);
    }
  });

  it('is accepted one millisecond before', () => {
    expect(parseConfigText(text, '/cfg/s.yaml', '/cfg', { nowMs: atMs - 1 }).ok).toBe(true);
  });
});
