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
