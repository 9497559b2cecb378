// Near misses of the credentials identify() takes: another scheme carrying a valid Basic payload, Basic
// with junk around its base64 (Node's decoder skips characters outside the alphabet), and the decoy hash
// an unknown grant id is compared against. Each was a surviving mutant in the December 2026 mutation
// review (docs: CONTRIBUTING.md "Mutation testing"); the mutant ids are Stryker's from that run.
import { describe, expect, it } from 'vitest';
import { identify, parseProxyAuthorization } from '../../../src/identity/identify.js';
import { TokenStore, sha256 } from '../../../src/identity/token-store.js';

const TOKEN_A = 'tok-a-0123456789';
const b64 = (text: string): string => Buffer.from(text, 'utf8').toString('base64');

function storeWithGrantA(): TokenStore {
  const tokens = new TokenStore();
  tokens.set('grant-a', sha256(TOKEN_A));
  return tokens;
}

/** The grant id, or the denial reason, on a shared token listener. */
function who(header: string): string {
  const verdict = identify({ boundGrant: null }, storeWithGrantA(), header);
  return verdict.ok ? verdict.value.grantId : verdict.reason;
}

describe('only the Basic scheme is decoded as user:password (RFC 7617)', () => {
  // Mutants 601 (the scheme-or-base64 check → false), 602 (`||` → `&&`) and 603 (scheme check → false)
  // decoded any scheme as Basic, so these authenticated as grant-a.
  it.each(['Digest', 'Negotiate', 'NTLM', 'Basix'])('refuses %s carrying a valid base64 grant-a:token', (scheme) => {
    const header = `${scheme} ${b64(`grant-a:${TOKEN_A}`)}`;
    expect(who(header)).toBe('token_invalid');
    expect(parseProxyAuthorization(header)).toBe('malformed');
  });

  it('the same payload as Basic identifies grant-a (the refusals above are about the scheme alone)', () => {
    expect(who(`Basic ${b64(`grant-a:${TOKEN_A}`)}`)).toBe('grant-a');
  });
});

describe('a Basic value is base64 and nothing else', () => {
  // Mutants 607 (no ^) and 608 (no $) on the base64 check let junk before or after valid base64 through.
  it.each([
    ['before', `Basic !!${b64('g:t')}`],
    ['after', `Basic ${b64('g:t')}!!`],
    ['in front of the credentials of a real grant', `Basic *${b64(`grant-a:${TOKEN_A}`)}`],
  ])('junk %s the base64 is malformed', (_where, header) => {
    expect(parseProxyAuthorization(header)).toBe('malformed');
  });

  it('junk around grant-a’s valid credentials does not identify grant-a', () => {
    expect(who(`Basic ${b64(`grant-a:${TOKEN_A}`)}!!`)).toBe('token_invalid');
  });
});

describe('parseProxyAuthorization says malformed itself, before any token lookup', () => {
  // identify() answers token_invalid either way, so these mutants survived through it; the parser's own
  // contract is that unusable credentials never reach the token store.
  it.each([
    ['Basic without a colon (mutant 617)', `Basic ${b64('nocolon')}`],
    ['Basic with an empty password (mutants 625, 627)', `Basic ${b64('g:')}`],
    ['Bearer without a token (mutants 595, 597)', 'Bearer '],
    ['a scheme glued to its value (mutant 581)', 'BearerX'],
  ])('%s', (_what, header) => {
    expect(parseProxyAuthorization(header)).toBe('malformed');
  });
});

describe('TokenStore: the decoy never verifies', () => {
  // Mutant 696 (`expected !== undefined` → true): an unknown grant id with the decoy's own text as the
  // password verified, so Basic auth as a grant that does not exist succeeded.
  it('an unknown grant id with the decoy token is refused', () => {
    expect(new TokenStore().verify('missing', 'sluice-decoy-token')).toBe(false);
    expect(storeWithGrantA().verify('grant-zzz', 'sluice-decoy-token')).toBe(false);
  });

  it('identify refuses Basic with an unknown grant id and the decoy token', () => {
    expect(who(`Basic ${b64('grant-zzz:sluice-decoy-token')}`)).toBe('token_invalid');
  });
});
