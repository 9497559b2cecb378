// An unknown key is named by its full path with the keys allowed there, read from the schema (issue 17,
// item 3): `dns.timeoutMz`, not `dns`; every unknown key of a file, not the first.
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { parseConfigText } from '../../../src/config/index.js';
import { closestKey, knownKeysAt, unknownKeyMessage } from '../../../src/config/unknown-key.js';

const listeners = [{ name: 'shared', listen: '127.0.0.1:0' }];

function issuesOf(config: Record<string, unknown>): { path: string; message: string }[] {
  const parsed = parseConfigText(stringify(config), '/cfg/sluice.yaml', '/cfg');
  return parsed.ok ? [] : [...parsed.issues];
}

describe('knownKeysAt reads the allowed keys from the schema, through defaults, arrays and optionals', () => {
  it.each([
    [[], 'listeners'],
    [['dns'], 'timeoutMs'],
    [['grants', 3], 'destinations'],
    [['grants', 0, 'limits'], 'expiresAt'],
    [['listeners', 1, 'proxyProtocol'], 'trustedSources'],
    [['route', 'pac'], 'caFile'],
    [['ledger', 'redis'], 'urlEnv'],
  ] as [PropertyKey[], string][])('at %j it includes %s', (path, key) => {
    expect(knownKeysAt(path)).toContain(key);
  });

  it('knows no keys inside a record or a scalar', () => {
    expect(knownKeysAt(['dns', 'hosts', 'a.test'])).toEqual([]);
    expect(knownKeysAt(['state', 'x'])).toEqual([]);
    expect(knownKeysAt(['nosuch'])).toEqual([]);
  });
});

describe('closestKey', () => {
  it.each([
    ['timeoutMz', ['servers', 'timeoutMs', 'hosts'], 'timeoutMs'],
    ['destinatons', ['id', 'destinations', 'unrestricted'], 'destinations'],
    ['TimeoutMs', ['timeoutMs'], 'timeoutMs'],
    ['banana', ['servers', 'timeoutMs', 'hosts'], null],
  ])('%s among %j is %s', (key, known, closest) => {
    expect(closestKey(key, known)).toBe(closest);
  });

  it('lists the allowed keys when none is close', () => {
    expect(unknownKeyMessage('banana', ['a', 'b'])).toBe('unknown key; expected one of a, b');
  });
});

describe('unknown keys in a config file', () => {
  it('names each by its full path, at every depth, all in one pass', () => {
    const issues = issuesOf({
      listeners: [{ name: 'lb', listen: '127.0.0.1:0', proxyProtocol: { trustedSources: ['10.0.0.0/8'], verison: 2 } }],
      timeuts: {},
      dns: { timeoutMz: 5, serverz: [] },
      grants: [{ id: 'a', destinations: [] }, { id: 'b', destinatons: [], limits: { maxBytez: 1 } }],
    });
    expect(issues.map((i) => i.path)).toEqual([
      'listeners[0].proxyProtocol.verison',
      'dns.timeoutMz',
      'dns.serverz',
      'grants[1].limits.maxBytez',
      'grants[1].destinatons',
      'timeuts',
    ]);
    expect(issues.find((i) => i.path === 'dns.timeoutMz')?.message).toBe('unknown key; did you mean "timeoutMs"?');
    expect(issues.find((i) => i.path === 'grants[1].destinatons')?.message).toBe('unknown key; did you mean "destinations"?');
  });

  it('never echoes a value: a token pasted under a wrong key stays out of the message', () => {
    const issues = issuesOf({ listeners, grants: [{ id: 'a', destinations: [], token: 'sekret-token-value' }] });
    expect(issues).toEqual([{ path: 'grants[0].token', message: expect.stringMatching(/^unknown key/) }]);
    expect(JSON.stringify(issues)).not.toContain('sekret-token-value');
  });
});
