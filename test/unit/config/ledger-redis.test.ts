// ledger.redis names one Redis server (url or urlEnv) or a Sentinel group (sentinels with name), exactly
// one of them; the Sentinel-only keys are refused beside a URL (which carries its own user, password and
// TLS), each error at its key path. The secrets come from the environment and never reach the label
// that logs and errors print (docs/fleet.md, "Sentinel").
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { parseConfigText, parseSentinelAddress, type ConfigFile } from '../../../src/config/index.js';
import { redisTargetLabel, redisTargetOptions, resolveRedisTarget } from '../../../src/ledger/index.js';

const listeners = [{ name: 'shared', listen: '127.0.0.1:0' }];

function parse(redis: Record<string, unknown>): ReturnType<typeof parseConfigText> {
  return parseConfigText(stringify({ listeners, ledger: { store: 'redis', redis } }), '/cfg/sluice.yaml', '/cfg');
}
const issuesOf = (redis: Record<string, unknown>): string[] => {
  const r = parse(redis);
  return r.ok ? [] : r.issues.map((i) => `${i.path}: ${i.message}`);
};
const sentinels = ['10.0.0.1:26379', '[fd00::2]:26379', 'sentinel-3.corp.test:26379'];

describe('ledger.redis: one server or one Sentinel group', () => {
  it.each([
    ['a URL', { url: 'redis://10.0.0.5:6379/0' }],
    ['a URL variable', { urlEnv: 'SLUICE_REDIS_URL' }],
    ['sentinels with the group name', { sentinels, name: 'sluice' }],
    ['sentinels with users, password variables and TLS with a CA', { sentinels, name: 'sluice', username: 'sluice', passwordEnv: 'P', sentinelUsername: 's', sentinelPasswordEnv: 'SP', tls: { caFile: 'ca.pem' } }],
    ['sentinels with tls: true', { sentinels, name: 'sluice', tls: true }],
  ])('accepts %s', (_name, redis) => {
    expect(issuesOf(redis)).toEqual([]);
  });

  it.each([
    ['nothing', {}, 'ledger.redis: give exactly one of url, urlEnv and sentinels (with name)'],
    ['a URL and a URL variable', { url: 'redis://a:6379', urlEnv: 'U' }, 'ledger.redis.urlEnv: give exactly one of url, urlEnv and sentinels (with name)'],
    ['a URL and sentinels', { url: 'redis://a:6379', sentinels, name: 'sluice' }, 'ledger.redis.sentinels: give exactly one of url, urlEnv and sentinels (with name)'],
    ['sentinels without the group name', { sentinels }, 'ledger.redis.name: sentinels need the master group name (sentinel monitor <name> …)'],
    ['a group name beside a URL', { url: 'redis://a:6379', name: 'sluice' }, 'ledger.redis.name: only with sentinels'],
    ['a password variable beside a URL', { urlEnv: 'U', passwordEnv: 'P' }, 'ledger.redis.passwordEnv: only with sentinels'],
    ['tls beside a URL (rediss:// says it)', { url: 'redis://a:6379', tls: true }, 'ledger.redis.tls: only with sentinels'],
    ['no sentinel at all', { sentinels: [], name: 'sluice' }, 'ledger.redis.sentinels: list at least one sentinel host:port'],
    ['a sentinel without a port', { sentinels: ['10.0.0.1'], name: 'sluice' }, 'ledger.redis.sentinels[0]: expected host:port or [IPv6]:port'],
    ['an IPv6 sentinel without brackets', { sentinels: ['fd00::2:26379'], name: 'sluice' }, 'ledger.redis.sentinels[0]: expected host:port or [IPv6]:port'],
    ['an IPv4 address in brackets', { sentinels: ['[10.0.0.1]:26379'], name: 'sluice' }, 'ledger.redis.sentinels[0]: expected host:port or [IPv6]:port'],
    ['port 0', { sentinels: ['10.0.0.1:0'], name: 'sluice' }, 'ledger.redis.sentinels[0]: expected host:port or [IPv6]:port'],
    ['a group name with a space', { sentinels, name: 'my master' }, 'ledger.redis.name: the master group name'],
  ])('refuses %s, naming the key', (_name, redis, issue) => {
    const issues = issuesOf(redis);
    expect(issues).toHaveLength(1);
    expect(issues[0]).toContain(issue);
  });

  it('parses sentinel addresses to host and port', () => {
    expect(sentinels.map(parseSentinelAddress)).toEqual([
      { host: '10.0.0.1', port: 26379 },
      { host: 'fd00::2', port: 26379 },
      { host: 'sentinel-3.corp.test', port: 26379 },
    ]);
  });

  it('resolves tls.caFile against the working directory', () => {
    const r = parse({ sentinels, name: 'sluice', tls: { caFile: 'certs/ca.pem' } });
    expect(r.ok && r.config.ledger.redis?.tls).toEqual({ caFile: '/cfg/certs/ca.pem' });
  });
});

describe('resolveRedisTarget: the environment and the CA file, named by key', () => {
  const section = (redis: Record<string, unknown>): NonNullable<ConfigFile['ledger']['redis']> => {
    const r = parse(redis);
    if (!r.ok || r.config.ledger.redis === undefined) throw new Error(JSON.stringify(r.ok ? 'no redis' : r.issues));
    return r.config.ledger.redis;
  };

  it('names every variable that is not set, and a CA file that cannot be read', () => {
    const r = resolveRedisTarget(section({ sentinels, name: 'sluice', passwordEnv: 'SLUICE_T_P', sentinelPasswordEnv: 'SLUICE_T_SP', tls: { caFile: '/nonexistent/ca.pem' } }), {});
    expect(r.ok).toBe(false);
    expect(r.ok ? [] : r.issues.map((i) => i.path)).toEqual(['ledger.redis.passwordEnv', 'ledger.redis.sentinelPasswordEnv', 'ledger.redis.tls.caFile']);
    const url = resolveRedisTarget(section({ urlEnv: 'SLUICE_T_URL' }), { SLUICE_T_URL: '' });
    expect(url.ok ? [] : url.issues).toEqual([{ path: 'ledger.redis.urlEnv', message: 'environment variable SLUICE_T_URL is not set' }]);
  });

  it('gives ioredis the sentinels, the group, the secrets and TLS; the label names the group, never a password', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-redis-target-'));
    try {
      const ca = path.join(dir, 'ca.pem');
      fs.writeFileSync(ca, '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
      const r = resolveRedisTarget(section({ sentinels, name: 'sluice', username: 'sl', passwordEnv: 'P', sentinelPasswordEnv: 'SP', tls: { caFile: ca } }), { P: 'pw-redis', SP: 'pw-sentinel' });
      if (!r.ok) throw new Error(JSON.stringify(r.issues));
      const { url, options } = redisTargetOptions(r.value, 500);
      expect(url).toBeNull();
      expect(options).toMatchObject({
        sentinels: [{ host: '10.0.0.1', port: 26379 }, { host: 'fd00::2', port: 26379 }, { host: 'sentinel-3.corp.test', port: 26379 }],
        name: 'sluice',
        role: 'master',
        username: 'sl',
        password: 'pw-redis',
        sentinelPassword: 'pw-sentinel',
        enableTLSForSentinelMode: true,
        sentinelCommandTimeout: 500,
      });
      expect((options.tls as { ca: string }).ca).toContain('BEGIN CERTIFICATE');
      const label = redisTargetLabel(r.value);
      expect(label).toBe('sentinel group sluice via 10.0.0.1:26379,[fd00::2]:26379,sentinel-3.corp.test:26379 (TLS)');
      expect(label).not.toContain('pw-');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('labels a URL as redis://host:port/db: no user name, no password, no query (UX review 2026-12-04 finding 8)', () => {
    const label = (url: string): string | false => {
      const r = resolveRedisTarget(section({ url }), {});
      return r.ok && redisTargetLabel(r.value);
    };
    expect(label('redis://sluice:s3cret@10.0.0.5:6379/0')).toBe('redis://10.0.0.5:6379/0');
    expect(label('redis://:s3cret@redis.corp.test')).toBe('redis://redis.corp.test:6379/0');
    expect(label('rediss://sluice:s3cret@[fd00::5]:6380/3?password=s3cret')).toBe('rediss://[fd00::5]:6380/3');
    expect(label('redis://10.0.0.5:6379?db=2&password=s3cret')).toBe('redis://10.0.0.5:6379/2');
  });
});
