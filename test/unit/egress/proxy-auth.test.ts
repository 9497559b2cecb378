// The Proxy-Authorization dialogue with the corporate proxy (RFC 9110 §11.6.1, RFC 4559, MS-NLMP), with
// a fake GSSAPI and the real NTLM codec. Threat: a hostile or broken upstream proxy (or whatever answers
// on its port) tries to make Sluice downgrade to a weaker mechanism (Basic sends the password in the
// clear) after its stronger token was refused, to loop the handshake forever, to crash the parser with
// crafted challenges, or to get a credential or token echoed into a denial that reaches the audit log.
// Every verdict detail and thrown message below is scanned for the secrets.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ProxyAuthMode, UpstreamProxy, Verdict } from '../../../src/core/index.js';
import type { Gss, NegotiateContext } from '../../../src/egress/negotiate.js';
import { NTLM_FLAGS, parseNtlmAuthenticate, verifyNtlmV2 } from '../../../src/egress/ntlm.js';
import {
  authModeOf, isConnectionBound, LearnedMechanisms, MAX_AUTH_LEGS, parseChallenges, ProxyAuthDialogue, type AuthLeg, type Challenge,
} from '../../../src/egress/proxy-auth.js';
import { ntlmChallengeMessage } from '../../support/ntlm-proxy.js';

const PASSWORD = 'corp-Secr3t:pw';
const BASIC = `Basic ${Buffer.from(`CORP\\alice:${PASSWORD}`).toString('base64')}`;
const NTLM_CREDS = { user: 'alice', domain: 'CORP', password: PASSWORD };
const TOKENS = ['R1NTLVRPS0VOLUZJUlNU', 'R1NTLVRPS0VOLVNFQ09ORA==', 'R1NTLVRPS0VOLVRISVJE'];
const SERVER_TOKEN = 'U0VSVkVSLVRPS0VOLVgx';
const SERVER_CHALLENGE = Buffer.from('0123456789abcdef', 'hex');
const TYPE2 = ntlmChallengeMessage(SERVER_CHALLENGE, NTLM_FLAGS.UNICODE | NTLM_FLAGS.EXTENDED_SESSIONSECURITY).toString('base64');
/** Everything that must never appear in a denial detail or a thrown message. */
const SECRETS = [PASSWORD, BASIC, BASIC.slice(6), ...TOKENS, SERVER_TOKEN, TYPE2];

function proxy(auth: ProxyAuthMode, opts: { basic?: boolean; ntlm?: boolean; spn?: string } = {}): UpstreamProxy {
  return {
    label: 'http://proxy.corp.test:3128', tls: false, host: 'proxy.corp.test', port: 3128,
    authorization: opts.basic === true ? BASIC : null, auth, ntlm: opts.ntlm === true ? NTLM_CREDS : null, spn: opts.spn ?? null,
    ca: null, inspectsTls: false, sendResolvedAddress: false,
  };
}

interface FakeGss extends Gss {
  readonly spns: string[];
  readonly steps: string[];
}

/**
 * A GSSAPI stand-in: each context answers its steps with TOKENS in order and is complete after
 * `completeAfter` steps; `reject` makes initiate (or the first step) fail with GSSAPI-like text.
 */
function fakeGss(opts: { unavailable?: string; reject?: 'initiate' | 'step'; completeAfter?: number } = {}): FakeGss {
  const spns: string[] = [];
  const steps: string[] = [];
  const message = 'Miscellaneous failure (see text): No Kerberos credentials available (default cache: FILE:/tmp/krb5cc_1000)';
  return {
    spns,
    steps,
    unavailable: opts.unavailable ?? null,
    async initiate(spn: string): Promise<NegotiateContext> {
      spns.push(spn);
      if (opts.reject === 'initiate') throw new Error(message);
      let done = 0;
      return {
        async step(challenge: string) {
          steps.push(challenge);
          if (opts.reject === 'step') throw new Error(`${message}\n  second line`);
          const token = TOKENS[Math.min(done, TOKENS.length - 1)] ?? '';
          done += 1;
          return token;
        },
        get complete() {
          return done >= (opts.completeAfter ?? 1);
        },
      };
    },
  };
}

const context = (gss: Gss = fakeGss(), learned = new LearnedMechanisms()): { gss: Gss; learned: LearnedMechanisms } => ({ gss, learned });
const offer = (...schemes: string[]): Challenge[] => schemes.map((s) => {
  const [scheme, token] = s.split(' ') as [string, string | undefined];
  return { scheme: scheme.toLowerCase(), token: token ?? null };
});

const seen: string[] = [];
/** Records a verdict's detail for the secret scan and returns its value (throws on a denial). */
function leg(verdict: Verdict<AuthLeg>): AuthLeg {
  if (!verdict.ok) {
    seen.push(verdict.detail);
    throw new Error(`expected a leg, got ${verdict.reason}: ${verdict.detail}`);
  }
  return verdict.value;
}
function denial(verdict: Verdict<AuthLeg>): { reason: string; detail: string } {
  if (verdict.ok) throw new Error(`expected a denial, got the leg ${verdict.value.authorization === null ? 'none' : verdict.value.authorization.split(' ')[0] ?? ''}`);
  seen.push(verdict.detail);
  return { reason: verdict.reason, detail: verdict.detail };
}

describe('parseChallenges (RFC 9110 §11.6.1, §11.3)', () => {
  it.each([
    ['Negotiate, NTLM', [{ scheme: 'negotiate', token: null }, { scheme: 'ntlm', token: null }]],
    ['Basic realm="a, b", NTLM', [{ scheme: 'basic', token: null }, { scheme: 'ntlm', token: null }]],
    ['NTLM TlRMTVNTUAACAAAA==', [{ scheme: 'ntlm', token: 'TlRMTVNTUAACAAAA==' }]],
    ['Negotiate oRQwEqADCgEAoQsGCSqGSIb3EgECAg==', [{ scheme: 'negotiate', token: 'oRQwEqADCgEAoQsGCSqGSIb3EgECAg==' }]],
    ['BASIC realm="corp", charset="UTF-8"', [{ scheme: 'basic', token: null }]],
    ['Digest realm="x", qop="auth, auth-int", nonce="abc", Negotiate', [{ scheme: 'digest', token: null }, { scheme: 'negotiate', token: null }]],
    ['realm="x"', []],
    [', , ,', []],
    ['', []],
    ['"Negotiate", NTLM', [{ scheme: 'ntlm', token: null }]],
    ['Negotiate\tabc', []],
  ])('%j', (field, expected) => {
    expect(parseChallenges([field])).toEqual(expected);
  });

  it('reads several fields in order', () => {
    expect(parseChallenges(['Negotiate', 'NTLM', 'Basic realm="p"']).map((c) => c.scheme)).toEqual(['negotiate', 'ntlm', 'basic']);
  });

  it('an auth-param with whitespace around = (BWS) is not a challenge', () => {
    expect(parseChallenges(['Basic realm = "corp", ntlm = "x"']).map((c) => c.scheme)).toEqual(['basic']);
  });

  it('an escaped backslash closes a quoted string: the offer after it is not swallowed (no downgrade to Basic)', () => {
    // realm="C:\\" is the one-character realm C:\ ; NTLM after it is a challenge of its own.
    expect(parseChallenges(['Basic realm="C:\\\\", NTLM']).map((c) => c.scheme)).toEqual(['basic', 'ntlm']);
    expect(parseChallenges(['Basic realm="say \\"hi, there\\"", NTLM']).map((c) => c.scheme)).toEqual(['basic', 'ntlm']);
  });

  it('never throws, and every scheme it gives is a lower-case token (fast-check)', () => {
    const piece = fc.oneof(fc.constantFrom('Negotiate', 'NTLM', 'Basic', ' ', ',', '"', '\\', '=', 'realm', 'abc==', '\t'), fc.string({ maxLength: 6 }));
    fc.assert(
      fc.property(fc.array(fc.array(piece, { maxLength: 20 }).map((p) => p.join('')), { maxLength: 4 }), (fields) => {
        return parseChallenges(fields).every((c) => /^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(c.scheme) && (c.token === null || /^[A-Za-z0-9\-._~+/]+=*$/.test(c.token)));
      }),
      { numRuns: 3000 },
    );
  });
});

describe('ProxyAuthDialogue, mode by mode', () => {
  it('authModeOf: the configured mode, else basic with credentials, else none; only Negotiate and NTLM bind the connection', () => {
    expect(authModeOf(proxy('ntlm', { ntlm: true }))).toBe('ntlm');
    const { auth: _auth, ...bare } = proxy('basic', { basic: true });
    expect(authModeOf(bare)).toBe('basic');
    expect(authModeOf({ ...bare, authorization: null })).toBe('none');
    expect([isConnectionBound('negotiate'), isConnectionBound('ntlm'), isConnectionBound('basic'), isConnectionBound(null)]).toEqual([true, true, false, false]);
  });

  it('none: no header, and a 407 ends the hop with upstream_auth_required naming the offer', async () => {
    const dialogue = new ProxyAuthDialogue(proxy('none'), context());
    expect(leg(await dialogue.first())).toEqual({ authorization: null, sameConnection: false });
    const d = denial(await dialogue.answer(offer('Negotiate', 'NTLM')));
    expect(d.reason).toBe('upstream_auth_required');
    expect(d.detail).toMatch(/http:\/\/proxy\.corp\.test:3128 answered 407 \(offers negotiate, ntlm\)/);
  });

  it('basic: preemptive header; a 407 offering Basic is upstream_auth_required (docs/reason-codes.md), one without Basic upstream_auth_unsupported', async () => {
    const dialogue = new ProxyAuthDialogue(proxy('basic', { basic: true }), context());
    expect(leg(await dialogue.first())).toEqual({ authorization: BASIC, sameConnection: false });
    expect(denial(await dialogue.answer(offer('Basic', 'Negotiate'))).reason).toBe('upstream_auth_required');
    const other = new ProxyAuthDialogue(proxy('basic', { basic: true }), context());
    await other.first();
    const d = denial(await other.answer(offer('Negotiate', 'NTLM')));
    expect(d.reason).toBe('upstream_auth_unsupported');
    expect(d.detail).toContain('negotiate, ntlm');
  });

  it('negotiate: the first leg carries a token for HTTP@<proxy host>, or for the configured spn', async () => {
    const gss = fakeGss();
    const dialogue = new ProxyAuthDialogue(proxy('negotiate'), context(gss));
    expect(leg(await dialogue.first())).toEqual({ authorization: `Negotiate ${TOKENS[0]}`, sameConnection: false });
    expect(gss.spns).toEqual(['HTTP@proxy.corp.test']);
    expect(gss.steps).toEqual(['']);
    expect(dialogue.chosen).toBe('negotiate');
    await new ProxyAuthDialogue(proxy('negotiate', { spn: 'HTTP@squid.corp.test' }), context(gss)).first();
    expect(gss.spns).toEqual(['HTTP@proxy.corp.test', 'HTTP@squid.corp.test']);
  });

  it.each(['initiate', 'step'] as const)('negotiate: GSSAPI failing in %s is upstream_auth_failed with its message on one line, never a token', async (where) => {
    const d = denial(await new ProxyAuthDialogue(proxy('negotiate'), context(fakeGss({ reject: where }))).first());
    expect(d.reason).toBe('upstream_auth_failed');
    expect(d.detail).toContain('No Kerberos credentials available');
    expect(d.detail).toContain('HTTP@proxy.corp.test');
    expect(d.detail).not.toMatch(/\n/);
  });

  it('negotiate without the binding is upstream_auth_unsupported, saying why', async () => {
    const d = denial(await new ProxyAuthDialogue(proxy('negotiate'), context(fakeGss({ unavailable: 'kerberos is not installed' }))).first());
    expect(d).toEqual({ reason: 'upstream_auth_unsupported', detail: expect.stringContaining('kerberos is not installed') });
  });

  it('negotiate: a 407 after the token without a continuation token is the proxy rejecting it: upstream_auth_failed', async () => {
    const dialogue = new ProxyAuthDialogue(proxy('negotiate'), context(fakeGss({ completeAfter: 2 })));
    await dialogue.first();
    expect(denial(await dialogue.answer(offer('Negotiate'))).reason).toBe('upstream_auth_failed');
  });

  it('negotiate: a continuation token is stepped on the same connection; once complete, another 407 fails', async () => {
    const gss = fakeGss({ completeAfter: 2 });
    const dialogue = new ProxyAuthDialogue(proxy('negotiate'), context(gss));
    await dialogue.first();
    expect(leg(await dialogue.answer(offer(`Negotiate ${SERVER_TOKEN}`)))).toEqual({ authorization: `Negotiate ${TOKENS[1]}`, sameConnection: true });
    expect(gss.steps).toEqual(['', SERVER_TOKEN]);
    expect(denial(await dialogue.answer(offer(`Negotiate ${SERVER_TOKEN}`))).reason).toBe('upstream_auth_failed');
  });

  it('negotiate: a continuation step that fails is upstream_auth_failed with GSSAPI\'s message', async () => {
    let calls = 0;
    const gss: Gss = {
      unavailable: null,
      initiate: async () => ({
        complete: false,
        step: async () => {
          calls += 1;
          if (calls > 1) throw new Error('Invalid token was supplied');
          return TOKENS[0] ?? '';
        },
      }),
    };
    const dialogue = new ProxyAuthDialogue(proxy('negotiate'), context(gss));
    await dialogue.first();
    const d = denial(await dialogue.answer(offer(`Negotiate ${SERVER_TOKEN}`)));
    expect(d).toEqual({ reason: 'upstream_auth_failed', detail: expect.stringContaining('Invalid token was supplied') });
  });

  it('ntlm: type 1 first, then a type 3 for the proxy\'s type 2 on the same connection, carrying the user and domain and a valid NTLMv2 proof', async () => {
    const dialogue = new ProxyAuthDialogue(proxy('ntlm', { ntlm: true }), context());
    const first = leg(await dialogue.first());
    expect(first.sameConnection).toBe(false);
    const type1 = Buffer.from(first.authorization?.replace(/^NTLM /, '') ?? '', 'base64');
    expect(type1.subarray(0, 8).toString('latin1')).toBe('NTLMSSP\0');
    expect(type1.readUInt32LE(8)).toBe(1);
    expect(dialogue.awaitsChallenge).toBe(true);
    const third = leg(await dialogue.answer(offer(`NTLM ${TYPE2}`, 'Negotiate')));
    expect(third.sameConnection).toBe(true);
    expect(third.authorization).toMatch(/^NTLM [A-Za-z0-9+/]+=*$/);
    const type3 = parseNtlmAuthenticate(Buffer.from(third.authorization?.slice(5) ?? '', 'base64'));
    expect(type3).toMatchObject({ user: 'alice', domain: 'CORP' });
    expect(type3 !== null && verifyNtlmV2(type3, SERVER_CHALLENGE, PASSWORD)).toBe(true);
    expect(type3 !== null && verifyNtlmV2(type3, SERVER_CHALLENGE, 'wrong')).toBe(false);
    expect(dialogue.awaitsChallenge).toBe(false);
    // A second 407 is the proxy refusing the type 3: no third message, no retry.
    expect(denial(await dialogue.answer(offer(`NTLM ${TYPE2}`))).reason).toBe('upstream_auth_failed');
  });

  it.each([
    ['no type 2 at all', 'NTLM'],
    ['a type 2 that is not NTLMSSP', `NTLM ${Buffer.from('not an ntlm message at all, really not').toString('base64')}`],
    ['a type 1 sent back', `NTLM ${Buffer.from('TlRMTVNTUAABAAAAB4IIogAAAAAAAAAAAAAAAAAAAAAGAbEdAAAADw==', 'base64').toString('base64')}`],
    ['a truncated type 2', `NTLM ${Buffer.from(TYPE2, 'base64').subarray(0, 40).toString('base64')}`],
  ])('ntlm: %s after type 1 is upstream_auth_failed', async (_name, challenge) => {
    const dialogue = new ProxyAuthDialogue(proxy('ntlm', { ntlm: true }), context());
    await dialogue.first();
    expect(denial(await dialogue.answer(offer(challenge))).reason).toBe('upstream_auth_failed');
  });

  it('ntlm: a 407 that then offers only Basic gets no Basic (ntlm mode has none to send): upstream_auth_unsupported', async () => {
    const dialogue = new ProxyAuthDialogue(proxy('ntlm', { ntlm: true }), context());
    await dialogue.first();
    expect(denial(await dialogue.answer(offer('Basic'))).reason).toBe('upstream_auth_unsupported');
  });

  it(`more than MAX_AUTH_LEGS (${MAX_AUTH_LEGS}) 407s end the hop with upstream_auth_failed, however the proxy keeps offering tokens`, async () => {
    const dialogue = new ProxyAuthDialogue(proxy('negotiate'), context(fakeGss({ completeAfter: 1000 })));
    await dialogue.first();
    for (let i = 0; i < MAX_AUTH_LEGS; i++) leg(await dialogue.answer(offer(`Negotiate ${SERVER_TOKEN}`)));
    const d = denial(await dialogue.answer(offer(`Negotiate ${SERVER_TOKEN}`)));
    expect(d.reason).toBe('upstream_auth_failed');
    expect(d.detail).toContain(`after ${MAX_AUTH_LEGS} legs`);
  });
});

describe('ProxyAuthDialogue, auto', () => {
  const all = { basic: true, ntlm: true };

  it.each([
    ['everything usable and offered', fakeGss(), all, ['Basic realm="p"', 'NTLM', 'Negotiate'], 'negotiate'],
    ['no GSSAPI binding', fakeGss({ unavailable: 'not installed' }), all, ['Basic realm="p"', 'NTLM', 'Negotiate'], 'ntlm'],
    ['no credentials file', fakeGss(), {}, ['Basic realm="p"', 'NTLM'], null],
    ['only Basic offered', fakeGss(), all, ['Basic realm="p"'], 'basic'],
    ['NTLM and Basic offered', fakeGss(), all, ['Basic realm="p"', 'NTLM'], 'ntlm'],
  ] as const)('strongest usable among the offer: %s', async (_name, gss, creds, offered, expected) => {
    const learned = new LearnedMechanisms();
    const dialogue = new ProxyAuthDialogue(proxy('auto', creds), context(gss, learned));
    expect(leg(await dialogue.first()).authorization).toBeNull();
    const next = await dialogue.answer(offer(...offered));
    if (expected === null) {
      expect(denial(next).reason).toBe('upstream_auth_unsupported');
      expect(learned.get('http://proxy.corp.test:3128')).toBeUndefined();
      return;
    }
    const value = leg(next);
    expect(dialogue.chosen).toBe(expected);
    expect(value.authorization?.split(' ')[0]?.toLowerCase()).toBe(expected);
    expect(learned.get('http://proxy.corp.test:3128')).toBe(expected);
  });

  it('learns the offer: the next dialogue with the same proxy authenticates on its first leg; another proxy does not', async () => {
    const learned = new LearnedMechanisms();
    const gss = fakeGss();
    await new ProxyAuthDialogue(proxy('auto', all), context(gss, learned)).answer(offer('Negotiate', 'NTLM'));
    expect(leg(await new ProxyAuthDialogue(proxy('auto', all), context(gss, learned)).first()).authorization).toBe(`Negotiate ${TOKENS[0]}`);
    const elsewhere = { ...proxy('auto', all), label: 'http://other.corp.test:3128', host: 'other.corp.test' };
    expect(leg(await new ProxyAuthDialogue(elsewhere, context(gss, learned)).first()).authorization).toBeNull();
  });

  it('a proxy that stops offering the learned mechanism gets a fresh choice from its new offer; a still-offered one that fails does not', async () => {
    const learned = new LearnedMechanisms();
    learned.set(proxy('auto', all).label, 'basic');
    const dialogue = new ProxyAuthDialogue(proxy('auto', all), context(fakeGss(), learned));
    expect(leg(await dialogue.first()).authorization).toBe(BASIC);
    // The proxy now offers NTLM only: the next leg is NTLM's type 1, and that is what is learned.
    expect(leg(await dialogue.answer(offer('NTLM'))).authorization).toMatch(/^NTLM TlRMTVNTUAAB/);
    expect(learned.get(proxy('auto', all).label)).toBe('ntlm');
    learned.set(proxy('auto', all).label, 'basic');
    const again = new ProxyAuthDialogue(proxy('auto', all), context(fakeGss(), learned));
    await again.first();
    expect(denial(await again.answer(offer('Basic', 'NTLM'))).reason).toBe('upstream_auth_required');
  });

  it('falls back from Negotiate to NTLM when this machine has no Kerberos credentials (initiate or step rejects)', async () => {
    for (const reject of ['initiate', 'step'] as const) {
      const learned = new LearnedMechanisms();
      const dialogue = new ProxyAuthDialogue(proxy('auto', all), context(fakeGss({ reject }), learned));
      const value = leg(await dialogue.answer(offer('Negotiate', 'NTLM', 'Basic realm="p"')));
      expect(value.authorization).toMatch(/^NTLM /);
      expect(learned.get('http://proxy.corp.test:3128')).toBe('ntlm');
    }
  });

  it('a learned Negotiate whose ticket has since gone falls back as a fresh dialogue would, instead of failing the hop', async () => {
    const learned = new LearnedMechanisms();
    learned.set('http://proxy.corp.test:3128', 'negotiate');
    const dialogue = new ProxyAuthDialogue(proxy('auto', all), context(fakeGss({ reject: 'initiate' }), learned));
    const first = await dialogue.first();
    const authorization = first.ok && first.value.authorization === null
      ? leg(await dialogue.answer(offer('Negotiate', 'NTLM'))).authorization
      : leg(first).authorization;
    expect(authorization).toMatch(/^NTLM /);
    // With only Negotiate offered, the missing ticket is the answer: upstream_auth_failed, with GSSAPI's reason.
    const only = new ProxyAuthDialogue(proxy('auto', all), context(fakeGss({ reject: 'initiate' }), learned));
    learned.set('http://proxy.corp.test:3128', 'negotiate');
    const onlyFirst = await only.first();
    const d = onlyFirst.ok ? denial(await only.answer(offer('Negotiate'))) : denial(onlyFirst);
    expect(d).toEqual({ reason: 'upstream_auth_failed', detail: expect.stringContaining('No Kerberos credentials') });
  });

  it('never falls back after the proxy rejected a Negotiate token: not to NTLM, not to Basic', async () => {
    for (const retry of [['Negotiate', 'NTLM', 'Basic realm="p"'], ['NTLM'], ['Basic realm="p"']]) {
      const dialogue = new ProxyAuthDialogue(proxy('auto', all), context(fakeGss()));
      expect(leg(await dialogue.answer(offer('Negotiate', 'NTLM', 'Basic realm="p"'))).authorization).toMatch(/^Negotiate /);
      const next = await dialogue.answer(offer(...retry));
      const d = denial(next);
      expect(['upstream_auth_failed', 'upstream_auth_unsupported']).toContain(d.reason);
    }
  });

  it('never falls back to Basic after the proxy rejected the NTLM type 3', async () => {
    const dialogue = new ProxyAuthDialogue(proxy('auto', all), context(fakeGss({ unavailable: 'no' })));
    leg(await dialogue.answer(offer('NTLM', 'Basic realm="p"')));
    leg(await dialogue.answer(offer(`NTLM ${TYPE2}`)));
    expect(denial(await dialogue.answer(offer('NTLM', 'Basic realm="p"'))).reason).toBe('upstream_auth_failed');
    const again = new ProxyAuthDialogue(proxy('auto', all), context(fakeGss({ unavailable: 'no' })));
    leg(await again.answer(offer('NTLM', 'Basic realm="p"')));
    expect(denial(await again.answer(offer('Basic realm="p"'))).reason).toBe('upstream_auth_unsupported');
  });

  it('with nothing usable (no binding, no credentials file) any offer is upstream_auth_unsupported, saying so', async () => {
    const d = denial(await new ProxyAuthDialogue(proxy('auto'), context(fakeGss({ unavailable: 'no' }))).answer(offer('Negotiate', 'NTLM', 'Basic realm="p"')));
    expect(d.reason).toBe('upstream_auth_unsupported');
    expect(d.detail).toContain('nothing usable');
  });

  it('LearnedMechanisms is bounded: a PAC naming endless proxies cannot grow it', () => {
    const learned = new LearnedMechanisms(3);
    for (const label of ['a', 'b', 'c']) learned.set(label, 'ntlm');
    learned.set('c', 'basic');
    expect(learned.get('a')).toBe('ntlm');
    learned.set('d', 'negotiate');
    expect([learned.get('a'), learned.get('d')]).toEqual([undefined, 'negotiate']);
  });
});

describe('no secret in any denial', () => {
  it('the password, the Basic header, the Kerberos and NTLM tokens appear in no detail collected above', () => {
    expect(seen.length).toBeGreaterThan(15);
    for (const detail of seen) for (const secret of SECRETS) expect(detail, detail).not.toContain(secret);
  });

  it('nor when every mode meets every hostile answer (fast-check)', async () => {
    const challenge = fc.constantFrom('Negotiate', `Negotiate ${SERVER_TOKEN}`, 'NTLM', `NTLM ${TYPE2}`, 'NTLM AAAA', 'Basic realm="p"', 'Digest realm="x"', `X-${PASSWORD}`);
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom<ProxyAuthMode>('none', 'basic', 'negotiate', 'ntlm', 'auto'),
        fc.constantFrom<'initiate' | 'step' | undefined>(undefined, 'initiate', 'step'),
        fc.array(fc.array(challenge, { maxLength: 4 }), { minLength: 1, maxLength: MAX_AUTH_LEGS + 2 }),
        async (mode, reject, answers) => {
          const dialogue = new ProxyAuthDialogue(proxy(mode, { basic: mode !== 'ntlm', ntlm: true }), context(fakeGss({ ...(reject === undefined ? {} : { reject }), completeAfter: 2 })));
          let verdict = await dialogue.first();
          for (const a of answers) {
            if (!verdict.ok) break;
            verdict = await dialogue.answer(parseChallenges(a));
          }
          if (verdict.ok) return true;
          return [PASSWORD, BASIC.slice(6), ...TOKENS, SERVER_TOKEN, TYPE2].every((s) => !verdict.detail.includes(s));
        },
      ),
      { numRuns: 500 },
    );
  });
});
