// NTLM credentials files (route/upstream.ts): `DOMAIN\\user:password`, `user@domain:password` or
// `user:password`; a refusal names the expected shape and never holds the password.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { readNtlmCredentials } from '../../../src/route/upstream.js';

describe('readNtlmCredentials', () => {
  it.each([
    ['CORP\\alice:pa:ss', { user: 'alice', domain: 'CORP', password: 'pa:ss' }],
    ['alice@corp.example:pw', { user: 'alice', domain: 'corp.example', password: 'pw' }],
    ['alice:pw', { user: 'alice', domain: '', password: 'pw' }],
    ['\n\r\n  CORP\\alice:pw  \r\nsecond:line\n', { user: 'alice', domain: 'CORP', password: 'pw' }],
    ['\uFEFFCORP\\alice:pw\n', { user: 'alice', domain: 'CORP', password: 'pw' }],
    ['a@b@corp:pw', { user: 'a@b', domain: 'corp', password: 'pw' }],
  ])('reads %j', (text, expected) => {
    expect(readNtlmCredentials(text)).toEqual(expected);
  });

  it.each([
    ['', /empty/],
    ['  \n\n', /empty/],
    ['CORP\\alice', /no colon/],
    [':Secret-Pw1', /empty user/],
    ['CORP\\:Secret-Pw1', /empty user/],
    ['\\alice:Secret-Pw1', /empty domain/],
    ['alice@:Secret-Pw1', /empty domain/],
    ['CORP\\alice:', /empty password/],
  ])('refuses %j with a message that never holds the password', (text, message) => {
    const result = readNtlmCredentials(text);
    expect(typeof result).toBe('string');
    expect(result).toMatch(message);
    expect(result).not.toContain('Secret-Pw1');
    expect(result).not.toContain('alice');
  });

  it('never returns an error holding any part of the line after the colon', () => {
    fc.assert(
      fc.property(fc.constantFrom('', '\\', 'CORP\\', '@corp', 'x@'), fc.string({ maxLength: 30 }).map((p) => `Zq7${p}`).filter((p) => !/[\r\n]/.test(p) && p.trim() === p), (account, password) => {
        // Zq7 prefix: a password that happens to be a word of the fixed message ("name") is not a leak.
        const result = readNtlmCredentials(`${account}:${password}`);
        if (typeof result === 'string') expect(result.includes(password)).toBe(false);
      }),
      { numRuns: 500 },
    );
  });
});
