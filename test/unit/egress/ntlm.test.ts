// NTLM codec against MS-NLMP 4.2.4 (NTLMv2 example), round trips, and a hostile upstream's type 2.
// Threat: the upstream proxy (or whoever sits on the path to it) sends a CHALLENGE_MESSAGE crafted to
// make the parser read outside the buffer, throw, or spin; a credentials file with a typo must not echo
// the password into an error the operator pastes into a ticket.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  AV_ID, NTLM_FLAGS, lmV2Response, ntlmAuthenticateMessage, ntlmNegotiateMessage, ntlmV2Blob, ntlmV2Response, ntowfV2,
  parseAvPairs, parseNtlmAuthenticate, parseNtlmChallenge, verifyNtlmV2,
} from '../../../src/egress/ntlm.js';
import type { NtlmChallenge } from '../../../src/egress/ntlm.js';

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex');

// MS-NLMP 4.2.4.3: the CHALLENGE_MESSAGE of the NTLMv2 example (flags 0xe28a8233, target name "Server",
// AV pairs MsvAvNbDomainName "Domain", MsvAvNbComputerName "Server", MsvAvEOL).
const SPEC_CHALLENGE = hex(`4e544c4d53535000020000000c000c003800000033828ae20123456789abcdef
  00000000000000002400240044000000060070170000000f53006500720076006500720002000c0044006f006d00610069
  006e0001000c0053006500720076006500720000000000`);
const SPEC_TARGET_INFO = hex('02000c0044006f006d00610069006e0001000c0053006500720076006500720000000000');
const SERVER_CHALLENGE = hex('0123456789abcdef');
const CLIENT_CHALLENGE = hex('aaaaaaaaaaaaaaaa');
const ZERO_TIME = Buffer.alloc(8);
const SPEC_USER = { user: 'User', domain: 'Domain', password: 'Password' } as const;
// MS-NLMP 4.2.4.1.1 NTOWFv2, 4.2.4.2.1 LMv2 response, 4.2.4.2.2 NTLMv2 response (NTProofStr ‖ temp).
const SPEC_NTOWFV2 = '0c868a403bfd7a93a3001ef22ef02e3f';
const SPEC_LMV2 = '86c35097ac9cec102554764a57cccc19aaaaaaaaaaaaaaaa';
const SPEC_NTPROOFSTR = '68cd0ab851e51c96aabc927bebef6a1c';
const SPEC_TEMP = `01010000000000000000000000000000aaaaaaaaaaaaaaaa00000000${SPEC_TARGET_INFO.toString('hex')}00000000`;

function challengeWith(overrides: Partial<NtlmChallenge>): NtlmChallenge {
  const parsed = parseNtlmChallenge(SPEC_CHALLENGE);
  if (parsed === null) throw new Error('spec challenge did not parse');
  return { ...parsed, ...overrides };
}

function avPair(id: number, value: Buffer): Buffer {
  const head = Buffer.alloc(4);
  head.writeUInt16LE(id, 0);
  head.writeUInt16LE(value.length, 2);
  return Buffer.concat([head, value]);
}

describe('MS-NLMP 4.2.4 NTLMv2 example', () => {
  it('NTOWFv2("Password", "User", "Domain") is 4.2.4.1.1', () => {
    expect(ntowfV2('Password', 'User', 'Domain').toString('hex')).toBe(SPEC_NTOWFV2);
  });

  it('uppercases the user but not the domain (3.3.2: Uppercase(User) ‖ UserDom)', () => {
    expect(ntowfV2('Password', 'user', 'Domain').toString('hex')).toBe(SPEC_NTOWFV2);
    expect(ntowfV2('Password', 'User', 'DOMAIN').toString('hex')).not.toBe(SPEC_NTOWFV2);
  });

  it('the LMv2 response is 4.2.4.2.1 and the NTLMv2 response is NTProofStr ‖ temp of 4.2.4.2.2', () => {
    const key = ntowfV2('Password', 'User', 'Domain');
    expect(lmV2Response(key, SERVER_CHALLENGE, CLIENT_CHALLENGE).toString('hex')).toBe(SPEC_LMV2);
    const blob = ntlmV2Blob(ZERO_TIME, CLIENT_CHALLENGE, SPEC_TARGET_INFO);
    expect(blob.toString('hex')).toBe(SPEC_TEMP);
    expect(ntlmV2Response(key, SERVER_CHALLENGE, blob).toString('hex')).toBe(SPEC_NTPROOFSTR + SPEC_TEMP);
  });

  it('parses the 4.2.4.3 CHALLENGE_MESSAGE', () => {
    const challenge = parseNtlmChallenge(SPEC_CHALLENGE);
    expect(challenge).not.toBeNull();
    expect(challenge?.serverChallenge.toString('hex')).toBe('0123456789abcdef');
    expect(challenge?.flags).toBe(0xe28a8233);
    expect(challenge?.targetName).toBe('Server');
    expect(challenge?.targetInfo.equals(SPEC_TARGET_INFO)).toBe(true);
  });

  it('builds a type 3 for that challenge whose LM and NT responses are the spec bytes, and it parses back', () => {
    const message = ntlmAuthenticateMessage(challengeWith({}), SPEC_USER, { clientChallenge: CLIENT_CHALLENGE, timestamp: ZERO_TIME });
    const parsed = parseNtlmAuthenticate(message);
    expect(parsed).not.toBeNull();
    expect(parsed?.lmResponse.toString('hex')).toBe(SPEC_LMV2);
    expect(parsed?.ntResponse.toString('hex')).toBe(SPEC_NTPROOFSTR + SPEC_TEMP);
    expect(parsed?.user).toBe('User');
    expect(parsed?.domain).toBe('Domain');
    expect(parsed?.workstation).toBe('');
    // The challenge offered KEY_EXCH, SIGN, SEAL, VERSION: none is echoed (no session key, no Version field).
    expect((parsed?.flags ?? 0) & 0x40000000).toBe(0);
    expect((parsed?.flags ?? 0) & (0x10 | 0x20 | NTLM_FLAGS.VERSION)).toBe(0);
    expect((parsed?.flags ?? 0) & NTLM_FLAGS.UNICODE).toBe(NTLM_FLAGS.UNICODE);
    // Domain and user are UTF-16LE, as the challenge negotiated UNICODE.
    expect(message.includes(Buffer.from('User', 'utf16le'))).toBe(true);
  });
});

describe('ntlmNegotiateMessage', () => {
  it('is a 32-byte type 1 with UNICODE, OEM, REQUEST_TARGET, NTLM, ALWAYS_SIGN, EXTENDED_SESSIONSECURITY and nothing else', () => {
    const message = ntlmNegotiateMessage();
    expect(message.length).toBe(32);
    expect(message.subarray(0, 12).toString('hex')).toBe('4e544c4d5353500001000000');
    expect(message.readUInt32LE(12)).toBe(0x00088207);
    // No domain or workstation: the host's names do not leak to the upstream.
    expect(message.subarray(16).equals(Buffer.alloc(16))).toBe(true);
  });
});

describe('ntlmAuthenticateMessage', () => {
  it('verifies against the right password only, and only for its own server challenge', () => {
    const parsed = parseNtlmAuthenticate(ntlmAuthenticateMessage(challengeWith({}), SPEC_USER));
    if (parsed === null) throw new Error('type 3 did not parse');
    expect(verifyNtlmV2(parsed, SERVER_CHALLENGE, 'Password')).toBe(true);
    expect(verifyNtlmV2(parsed, SERVER_CHALLENGE, 'password')).toBe(false);
    expect(verifyNtlmV2(parsed, hex('0123456789abcdee'), 'Password')).toBe(false);
    expect(verifyNtlmV2({ ...parsed, domain: 'Other' }, SERVER_CHALLENGE, 'Password')).toBe(false);
  });

  it('draws a fresh client challenge each time and stamps the current FILETIME when the server sent none', () => {
    const a = parseNtlmAuthenticate(ntlmAuthenticateMessage(challengeWith({}), SPEC_USER));
    const b = parseNtlmAuthenticate(ntlmAuthenticateMessage(challengeWith({}), SPEC_USER));
    // temp: 8 bytes of header, then Time (8), then ClientChallenge (8); the response has NTProofStr (16) first.
    expect(a?.ntResponse.subarray(32, 40).equals(b?.ntResponse.subarray(32, 40) ?? Buffer.alloc(0))).toBe(false);
    const ticks = a?.ntResponse.readBigUInt64LE(24) ?? 0n;
    const nowTicks = (BigInt(Date.now()) + 11_644_473_600_000n) * 10_000n;
    expect(nowTicks - ticks < 600_000_000n && ticks - nowTicks < 600_000_000n).toBe(true); // within a minute
  });

  it('uses the server MsvAvTimestamp and sends Z(24) as LmChallengeResponse (MS-NLMP 3.1.5.1.2)', () => {
    const stamp = hex('0090d336b734c301');
    const targetInfo = Buffer.concat([avPair(AV_ID.NB_DOMAIN_NAME, Buffer.from('Domain', 'utf16le')), avPair(AV_ID.TIMESTAMP, stamp), avPair(AV_ID.EOL, Buffer.alloc(0))]);
    const parsed = parseNtlmAuthenticate(ntlmAuthenticateMessage(challengeWith({ targetInfo }), SPEC_USER));
    expect(parsed?.ntResponse.subarray(24, 32).equals(stamp)).toBe(true);
    expect(parsed?.lmResponse.equals(Buffer.alloc(24))).toBe(true);
    expect(parsed !== null && verifyNtlmV2(parsed, SERVER_CHALLENGE, 'Password')).toBe(true);
  });

  it('writes OEM strings when the challenge did not select UNICODE', () => {
    const flags = (0xe28a8233 & ~NTLM_FLAGS.UNICODE) >>> 0;
    const message = ntlmAuthenticateMessage(challengeWith({ flags }), { ...SPEC_USER, workstation: 'WS' });
    const parsed = parseNtlmAuthenticate(message);
    expect((parsed?.flags ?? 0) & (NTLM_FLAGS.UNICODE | NTLM_FLAGS.OEM)).toBe(NTLM_FLAGS.OEM);
    expect(parsed?.user).toBe('User');
    expect(parsed?.workstation).toBe('WS');
    expect(message.includes(Buffer.from('Domain', 'latin1'))).toBe(true);
  });

  it('refuses a client challenge or timestamp of the wrong size without naming the password', () => {
    const creds = { user: 'u', domain: 'd', password: 'hunter2-secret' };
    expect(() => ntlmAuthenticateMessage(challengeWith({}), creds, { clientChallenge: Buffer.alloc(7) })).toThrow(/8 bytes/);
    try {
      ntlmAuthenticateMessage(challengeWith({}), creds, { timestamp: Buffer.alloc(3) });
      expect.unreachable();
    } catch (error) {
      expect(String(error)).not.toContain('hunter2');
    }
  });

  it('never carries the password or the NT hash in the message', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 6, maxLength: 40 }), (password) => {
        const message = ntlmAuthenticateMessage(challengeWith({}), { user: 'u', domain: 'd', password });
        for (const form of [Buffer.from(password, 'utf16le'), Buffer.from(password, 'utf8')]) expect(message.includes(form)).toBe(false);
        expect(message.includes(ntowfV2(password, 'u', 'd'))).toBe(false);
      }),
      { numRuns: 100 },
    );
  });
});

describe('parseNtlmChallenge refuses malformed messages', () => {
  const mutate = (edit: (m: Buffer) => void, base = SPEC_CHALLENGE): Buffer => {
    const copy = Buffer.from(base);
    edit(copy);
    return copy;
  };
  it.each([
    ['shorter than the 48-byte header', SPEC_CHALLENGE.subarray(0, 47)],
    ['a wrong signature', mutate((m) => m.write('NTLMSSX', 0, 'latin1'))],
    ['message type 3', mutate((m) => m.writeUInt32LE(3, 8))],
    ['a target info offset past the end', mutate((m) => m.writeUInt32LE(SPEC_CHALLENGE.length - 10, 44))],
    ['a target info offset near 2^32 (wraps in 32-bit arithmetic)', mutate((m) => m.writeUInt32LE(0xfffffff0, 44))],
    ['a target info length past the end', mutate((m) => m.writeUInt16LE(0xffff, 40))],
    ['an AV pair running past the target info', mutate((m) => m.writeUInt16LE(0x00ff, 0x44 + 2))],
    ['an AV list without MsvAvEOL', mutate((m) => m.writeUInt16LE(0x24 - 4, 40))],
    ['bytes after MsvAvEOL', Buffer.concat([mutate((m) => m.writeUInt16LE(0x24 + 4, 40)), Buffer.alloc(4, 1)])],
    ['an MsvAvTimestamp that is not 8 bytes', (() => {
      const info = Buffer.concat([avPair(AV_ID.TIMESTAMP, Buffer.alloc(4)), avPair(AV_ID.EOL, Buffer.alloc(0))]);
      const m = Buffer.concat([SPEC_CHALLENGE.subarray(0, 0x44), info]);
      m.writeUInt16LE(info.length, 40);
      m.writeUInt16LE(info.length, 42);
      return m;
    })()],
  ])('null for %s', (_label, message) => {
    expect(parseNtlmChallenge(message)).toBeNull();
  });

  // The target name is informational: an unreadable one reads as empty (ntlm_fake_auth sends a bogus offset).
  it.each([
    ['a target name pointing into the header', mutate((m) => m.writeUInt32LE(8, 16))],
    ['an odd-length UNICODE target name', mutate((m) => m.writeUInt16LE(11, 12))],
  ])('reads %s as an empty target name, the rest intact', (_label, message) => {
    const parsed = parseNtlmChallenge(message);
    expect(parsed?.targetName).toBe('');
    expect(parsed?.serverChallenge.toString('hex')).toBe('0123456789abcdef');
    expect(parsed?.targetInfo.length).toBeGreaterThan(0);
  });

  it("reads Squid ntlm_fake_auth's 40-byte challenge (no target info flag, bogus name offset)", () => {
    // Captured from /usr/lib/squid/ntlm_fake_auth (Squid 5.7): `YR <type 1>` answered `TT <this>`.
    const squid = Buffer.from('TlRMTVNTUAACAAAACQAJAK6qqqoCAAAA0LJupOW3RZEAAAAAAAA6AFdPUktHUk9VUA==', 'base64');
    const parsed = parseNtlmChallenge(squid);
    expect(parsed).not.toBeNull();
    expect(parsed?.serverChallenge.toString('hex')).toBe('d0b26ea4e5b74591');
    expect(parsed?.targetInfo.length).toBe(0);
  });

  it('never throws on arbitrary bytes, nor on the spec message with NTLMSSP header and fuzzed bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
        const withHeader = Buffer.concat([SPEC_CHALLENGE.subarray(0, 12), Buffer.from(bytes)]);
        expect(() => parseNtlmChallenge(Buffer.from(bytes))).not.toThrow();
        expect(() => parseNtlmChallenge(withHeader)).not.toThrow();
      }),
      { numRuns: 2000 },
    );
  });

  it('never throws on the spec message with its field descriptors set to any offset and length, and what it returns lies inside the message', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(12, 40),
        fc.integer({ min: 0, max: 0xffff }),
        fc.nat({ max: 0xffffffff }),
        fc.array(fc.tuple(fc.nat({ max: SPEC_CHALLENGE.length - 1 }), fc.nat({ max: 255 })), { maxLength: 4 }),
        fc.nat({ max: SPEC_CHALLENGE.length }),
        (field, length, offset, flips, cut) => {
          const m = Buffer.from(SPEC_CHALLENGE);
          m.writeUInt16LE(length, field);
          m.writeUInt32LE(offset >>> 0, field + 4);
          for (const [at, value] of flips) m[at] = value;
          const message = m.subarray(0, Math.max(cut, 0));
          const parsed = parseNtlmChallenge(message);
          if (parsed !== null) {
            expect(parsed.targetInfo.length).toBeLessThanOrEqual(message.length);
            expect(parsed.targetInfo.length === 0 || parseAvPairs(parsed.targetInfo) !== null).toBe(true);
            expect(parsed.serverChallenge.length).toBe(8);
          }
        },
      ),
      { numRuns: 3000 },
    );
  });

  it('parseNtlmAuthenticate never throws on arbitrary or fuzzed type 3 bytes', () => {
    const valid = ntlmAuthenticateMessage(challengeWith({}), SPEC_USER);
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), fc.array(fc.tuple(fc.nat({ max: valid.length - 1 }), fc.nat({ max: 255 })), { maxLength: 6 }), (bytes, flips) => {
        const m = Buffer.from(valid);
        for (const [at, value] of flips) m[at] = value;
        expect(() => parseNtlmAuthenticate(Buffer.from(bytes))).not.toThrow();
        const parsed = parseNtlmAuthenticate(m);
        if (parsed !== null) expect(() => verifyNtlmV2(parsed, SERVER_CHALLENGE, 'Password')).not.toThrow();
      }),
      { numRuns: 2000 },
    );
  });
});
