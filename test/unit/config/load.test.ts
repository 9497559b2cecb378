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
