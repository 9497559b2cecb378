// Specifies how a connection's principal is identified: from a grant token in Proxy-Authorization
// (RFC 9110 §11.7.1; Basic per RFC 7617 with grant id as user and token as password; Bearer per RFC 6750),
// or from a dedicated listener, where another grant's token is refused so authority never bleeds
// (docs/scenarios.md scenario 4).
import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { identify, parseProxyAuthorization, type ListenerIdentity } from '../../../src/identity/identify.js';
import { TokenStore, sha256 } from '../../../src/identity/token-store.js';

const TOKEN_A = 'tok-a-0123456789';
const TOKEN_B = 'tok-b-9876543210';
const ODD_TOKEN = 'p@ss:w/rd+%';

const tokens = new TokenStore();
tokens.set('grant-a', sha256(TOKEN_A));
tokens.set('grant-b', sha256(TOKEN_B));
tokens.set('grant-odd', sha256(ODD_TOKEN));

const basic = (userAndPassword: string): string => `Basic ${Buffer.from(userAndPassword, 'utf8').toString('base64')}`;
const SHARED: ListenerIdentity = { boundGrant: null };
const DEDICATED_A: ListenerIdentity = { boundGrant: 'grant-a' };

/** The grant id and how it was identified, or the denial reason. */
function who(listener: ListenerIdentity, header: string | undefined): string {
  const verdict = identify(listener, tokens, header);
  return verdict.ok ? `${verdict.value.grantId} via ${verdict.value.via}` : verdict.reason;
}

describe('identify on a shared token listener', () => {
  it.each([
    ['Basic grant:token', basic(`grant-a:${TOKEN_A}`), 'grant-a via token'],
    ['Basic, scheme in any case (RFC 9110 §11.1)', basic(`grant-a:${TOKEN_A}`).replace('Basic', 'bAsIc'), 'grant-a via token'],
    ['Basic with a raw token holding : and @', basic(`grant-odd:${ODD_TOKEN}`), 'grant-odd via token'],
    ['Basic with an empty user finds the grant by token', basic(`:${TOKEN_B}`), 'grant-b via token'],
    ['Bearer token', `Bearer ${TOKEN_A}`, 'grant-a via token'],
    ['Bearer with extra spaces', `Bearer   ${TOKEN_B}  `, 'grant-b via token'],
  ])('accepts %s', (_what, header, expected) => {
    expect(who(SHARED, header)).toBe(expected);
  });

  it.each([
    ['no header', undefined, 'token_missing'],
    ['an empty header', '', 'token_missing'],
    ['a wrong token', basic('grant-a:wrong'), 'token_invalid'],
    ['another grant’s token under this grant id', basic(`grant-a:${TOKEN_B}`), 'token_invalid'],
    ['an unknown grant id, answered like a wrong token (no existence leak)', basic(`grant-zzz:${TOKEN_A}`), 'token_invalid'],
    ['an unknown Bearer token', 'Bearer nope', 'token_invalid'],
    ['Basic with invalid base64', 'Basic !!!', 'token_invalid'],
    ['Basic without a value', 'Basic', 'token_invalid'],
    ['Basic with only a space', 'Basic ', 'token_invalid'],
    ['Basic without a colon', basic(`grant-a${TOKEN_A}`), 'token_invalid'],
    ['Basic with an empty token', basic('grant-a:'), 'token_invalid'],
    ['Bearer without a value', 'Bearer ', 'token_invalid'],
    ['an unsupported scheme', 'Digest x', 'token_invalid'],
    ['a bare token without a scheme', TOKEN_A, 'token_invalid'],
  ])('refuses %s', (_what, header, reason) => {
    expect(who(SHARED, header)).toBe(reason);
  });
});

describe('identify on a listener dedicated to grant A', () => {
  it.each([
    ['no header: the listener decides', undefined, 'grant-a via listener'],
    ['A’s own token', basic(`grant-a:${TOKEN_A}`), 'grant-a via listener'],
    ['A’s own token as Bearer', `Bearer ${TOKEN_A}`, 'grant-a via listener'],
    ['B’s valid token: authority never bleeds between principals', basic(`grant-b:${TOKEN_B}`), 'token_grant_mismatch'],
    ['B’s valid token as Bearer', `Bearer ${TOKEN_B}`, 'token_grant_mismatch'],
    ['a bad token', basic('grant-a:wrong'), 'token_invalid'],
    ['an unknown grant id', basic(`grant-zzz:${TOKEN_A}`), 'token_invalid'],
    ['a malformed header', 'Basic !!!', 'token_invalid'],
  ])('%s → %s', (_what, header, expected) => {
    expect(who(DEDICATED_A, header)).toBe(expected);
  });
});

describe('parseProxyAuthorization', () => {
  it.each([
    [undefined, null],
    ['', null],
    [basic('g:t'), { grantId: 'g', token: 't' }],
    [basic(':t'), { grantId: null, token: 't' }],
    // Clients percent-decode proxy URL userinfo before Basic-encoding it; Sluice never decodes again.
    [basic('g%2D1:t%3At'), { grantId: 'g%2D1', token: 't%3At' }],
    [basic('g:%zz'), { grantId: 'g', token: '%zz' }], // not valid percent-encoding: taken as sent
    [basic('g:a:b'), { grantId: 'g', token: 'a:b' }], // RFC 7617 §2: the user-id ends at the first colon
    ['Bearer t', { grantId: null, token: 't' }],
    ['Basic', 'malformed'],
    ['Basic !!!', 'malformed'],
    ['Digest x', 'malformed'],
    [' Basic Zzp0', 'malformed'],
  ])('%j → %j', (header, expected) => {
    expect(parseProxyAuthorization(header)).toEqual(expected);
  });
});

describe('TokenStore', () => {
  it('holds only hashes and verifies in constant time against the grant’s hash', () => {
    const store = new TokenStore();
    store.set('g', sha256('secret'));
    expect(store.verify('g', 'secret')).toBe(true);
    expect(store.verify('g', 'Secret')).toBe(false);
    expect(store.verify('missing', 'secret')).toBe(false);
    expect(store.findByToken('secret')).toBe('g');
    expect(inspect(store, { depth: 5, showHidden: true })).not.toContain('secret');
  });

  it('replacing or deleting a grant’s token retires the old token at once', () => {
    const store = new TokenStore();
    store.set('g', sha256('old'));
    store.set('g', sha256('new'));
    expect(store.verify('g', 'old')).toBe(false);
    expect(store.findByToken('old')).toBeUndefined();
    expect(store.verify('g', 'new')).toBe(true);
    store.delete('g');
    expect(store.verify('g', 'new')).toBe(false);
    expect(store.findByToken('new')).toBeUndefined();
  });

  it('sha256 is the SHA-256 of the UTF-8 token (what config tokenSha256 holds)', () => {
    expect(sha256('test').toString('hex')).toBe('9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08');
  });
});

describe('review 2026-12 finding 13: a token valid for another grant costs what a random token costs', () => {
  /** Counts the token work identify() asks of the store: each call hashes once and compares once. */
  class CountingStore extends TokenStore {
    calls: string[] = [];
    override verify(grantId: string, token: string): boolean {
      this.calls.push('verify');
      return super.verify(grantId, token);
    }
    override findByToken(token: string): string | undefined {
      this.calls.push('findByToken');
      return super.findByToken(token);
    }
  }
  const store = new CountingStore();
  store.set('grant-a', sha256(TOKEN_A));
  store.set('grant-b', sha256(TOKEN_B));

  it.each([
    ['Basic', basic(`grant-b:${TOKEN_B}`), basic('grant-b:tok-b-random-guess')],
    ['Bearer', `Bearer ${TOKEN_B}`, 'Bearer tok-b-random-guess'],
  ])('%s: the same store calls on grant A’s listener, and only the audit reason differs', (_form, valid, random) => {
    store.calls = [];
    const a = identify(DEDICATED_A, store, valid);
    const validCalls = store.calls;
    store.calls = [];
    const b = identify(DEDICATED_A, store, random);
    expect(store.calls).toEqual(validCalls);
    expect(validCalls).toHaveLength(1);
    expect([a.ok ? 'ok' : a.reason, b.ok ? 'ok' : b.reason]).toEqual(['token_grant_mismatch', 'token_invalid']);
  });
});

// Issue 28: on an `identify: certificate` listener the verified client certificate is the principal. A
// certificate that names no grant (or several) is refused whatever token comes with it: the listener
// never falls back to tokens. A token of another grant is refused as on a dedicated listener.
describe('identify on a certificate listener', () => {
  const MAPPED_A: ListenerIdentity = { boundGrant: 'grant-a', certificate: 'mapped' };
  it.each([
    ['no token', MAPPED_A, undefined, 'grant-a via certificate'],
    ['the same grant’s token', MAPPED_A, `Bearer ${TOKEN_A}`, 'grant-a via certificate'],
    ['another grant’s valid token', MAPPED_A, `Bearer ${TOKEN_B}`, 'token_grant_mismatch'],
    ['another grant’s token as Basic with its id', MAPPED_A, basic(`grant-b:${TOKEN_B}`), 'token_grant_mismatch'],
    ['a wrong token', MAPPED_A, 'Bearer nope', 'token_invalid'],
    ['an unmapped certificate and no token', { boundGrant: null, certificate: 'unknown' } as ListenerIdentity, undefined, 'certificate_not_granted'],
    ['an unmapped certificate and a valid token', { boundGrant: null, certificate: 'unknown' } as ListenerIdentity, `Bearer ${TOKEN_B}`, 'certificate_not_granted'],
    ['an ambiguous certificate and a valid token', { boundGrant: null, certificate: 'ambiguous' } as ListenerIdentity, basic(`grant-a:${TOKEN_A}`), 'certificate_not_granted'],
  ])('%s', (_name, listener, header, expected) => {
    expect(who(listener, header)).toBe(expected);
  });
});
