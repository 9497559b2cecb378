// Where `sluice explain` takes its grant from (src/explain/grant-source.ts): the running instance when
// one answers, else the config file, and a named warning whenever an instance is there but cannot be
// asked. The threat: an operator misled into believing a grant allows (or denies) what the running
// instance decides otherwise, or a token shown where a grant view is read.
import { describe, expect, it } from 'vitest';
import { chooseGrant, specOfView, type AdminAnswer, type AskAdmin } from '../../../src/explain/index.js';

const VIEW = {
  id: 'g-1',
  source: 'runtime',
  generation: 'run-7',
  destinations: ['https://api.test'],
  unrestricted: false,
  allowAddressClasses: ['loopback'],
  allowAddresses: ['10.9.0.0/16'],
  requireAttestedAddress: true,
  limits: { maxConcurrent: 4, expiresAt: '2030-01-01T00:00:00.000Z' },
  issuedAt: '2026-12-01T00:00:00.000Z',
  expiresAt: '2030-01-01T00:00:00.000Z',
  revokedAt: null,
  listen: null,
  usage: { activeConnections: 0, connections: 3, bytes: 10 },
};

function answering(answer: AdminAnswer, seen: string[] = []): AskAdmin {
  return (p) => {
    seen.push(p);
    return Promise.resolve(answer);
  };
}

const failing = (message: string): AskAdmin => () => Promise.reject(new Error(message));
const base = { grantId: 'g-1', configFile: 'sluice.yaml', admin: 'unix:/run/s/admin.sock' };

describe('chooseGrant', () => {
  it('takes the running instance’s grant, asked by its escaped id', async () => {
    const seen: string[] = [];
    const choice = await chooseGrant({ ...base, grantId: 'a/../b', ask: answering({ status: 200, body: VIEW }, seen) });
    expect(seen).toEqual(['/v1/grants/a%2F..%2Fb']);
    expect(choice.warning).toBeNull();
    expect(choice.from).toBe('the running instance at unix:/run/s/admin.sock (a run-time grant)');
    expect(choice.instance?.revoked).toBe(false);
    expect(choice.instance?.spec).toMatchObject({ destinations: ['https://api.test'], allowAddressClasses: ['loopback'], allowAddresses: ['10.9.0.0/16'], requireAttestedAddress: true, generation: 'run-7', limits: { maxConcurrent: 4 } });
  });

  it('carries a revocation the config file cannot know', async () => {
    const choice = await chooseGrant({ ...base, ask: answering({ status: 200, body: { ...VIEW, source: 'config', revokedAt: '2026-12-02T00:00:00.000Z' } }) });
    expect(choice.instance?.revoked).toBe(true);
    expect(choice.from).toContain('(a config file grant)');
  });

  it('says the instance does not know the grant (404): no fall-back to the config file', async () => {
    const choice = await chooseGrant({ ...base, ask: answering({ status: 404, body: { error: 'grant_not_found' } }) });
    expect(choice.instance).toBeNull();
    expect(choice.warning).toBeNull();
  });

  it.each([
    ['ENOENT', 'cannot reach the admin socket at /run/s/admin.sock: is sluice running? (ENOENT)'],
    ['ECONNREFUSED', 'cannot reach the admin socket at /run/s/admin.sock: is sluice running? (ECONNREFUSED)'],
  ])('falls back to the config file quietly when nothing listens (%s)', async (_code, message) => {
    const choice = await chooseGrant({ ...base, ask: failing(message) });
    expect(choice.instance).toBeUndefined();
    expect(choice.warning).toBeNull();
    expect(choice.from).toBe('the config file sluice.yaml (no running instance answered at unix:/run/s/admin.sock)');
  });

  it('warns when an instance is there but cannot be asked (permission, timeout)', async () => {
    const denied = await chooseGrant({ ...base, ask: failing('cannot reach the admin socket at /run/s/admin.sock: permission denied (run as the user that runs sluice)') });
    expect(denied.instance).toBeUndefined();
    expect(denied.warning).toMatch(/permission denied .*; explaining against the config file's grants$/);
    const slow = await chooseGrant({ ...base, ask: failing('the admin socket at /run/s/admin.sock did not answer within 15 s') });
    expect(slow.warning).toContain('did not answer');
  });

  it('names SLUICE_ADMIN_TOKEN when the admin API wants a token, and falls back', async () => {
    const choice = await chooseGrant({ ...base, admin: 'http://127.0.0.1:9', ask: answering({ status: 401, body: { error: 'admin_unauthorized' } }) });
    expect(choice.instance).toBeUndefined();
    expect(choice.warning).toBe("the running instance at http://127.0.0.1:9 answered 401 admin_unauthorized (set SLUICE_ADMIN_TOKEN to its admin token); explaining against the config file's grants");
  });

  it('does not vouch for a stale fleet instance (503): warns and falls back', async () => {
    const choice = await chooseGrant({ ...base, ask: answering({ status: 503, body: { error: 'ledger_unavailable' } }) });
    expect(choice.instance).toBeUndefined();
    expect(choice.warning).toContain('503 ledger_unavailable');
  });

  it('refuses an answer that is not a grant view rather than explaining an empty grant', async () => {
    for (const body of [{ error: 'x' }, [], 'text', null, { ...VIEW, destinations: 'https://api.test' }, { ...VIEW, allowAddressClasses: ['self'] }, { ...VIEW, revokedAt: 5 }]) {
      const choice = await chooseGrant({ ...base, ask: answering({ status: 200, body }) });
      expect.soft(choice.instance, JSON.stringify(body)).toBeUndefined();
      expect.soft(choice.warning, JSON.stringify(body)).toContain('not a grant view');
    }
  });

  it('asks nobody when the config has no admin.listen', async () => {
    const seen: string[] = [];
    const choice = await chooseGrant({ ...base, admin: undefined, ask: answering({ status: 200, body: VIEW }, seen) });
    expect(seen).toEqual([]);
    expect(choice.instance).toBeUndefined();
    expect(choice.from).toContain('no admin.listen');
  });
});

describe('specOfView', () => {
  it('keeps only the fields that decide a hop: a token or hash in an answer goes nowhere', () => {
    const parsed = specOfView({ ...VIEW, token: 'tok-secret', tokenSha256: 'ab'.repeat(32) });
    expect(parsed).not.toBeNull();
    expect(JSON.stringify(parsed)).not.toMatch(/tok-secret|abab/);
  });
});
