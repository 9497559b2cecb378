// Specifies the auth-failure throttle (issue 13, roadmap item 4): failures count per presented grant id
// (per source address for a token without one) under a per-source ceiling, in one-minute windows, in
// bounded memory that fails closed. Token clients on one host share 127.0.0.1, so a guesser must lock
// out only the grant id it presents, never another principal presenting a valid token.
import { describe, expect, it } from 'vitest';
import { AuthThrottle } from '../../../src/grant/admission.js';

const basic = (user: string, token = 'guess'): string => `Basic ${Buffer.from(`${user}:${token}`).toString('base64')}`;
const LOOPBACK = '127.0.0.1';

function throttle(perGrantId = 3, perSource = 10): { t: AuthThrottle; advance(ms: number): void } {
  let now = 1_000_000;
  return { t: new AuthThrottle({ perGrantId, perSource }, () => now), advance: (ms) => void (now += ms) };
}

function fail(t: AuthThrottle, header: string, source = LOOPBACK, times = 1): void {
  for (let i = 0; i < times; i += 1) t.recordFailure(header, source);
}

describe('AuthThrottle', () => {
  it('blocks the presented grant id after perGrantId failures, and not another grant id from the same address', () => {
    const { t } = throttle();
    fail(t, basic('a'), LOOPBACK, 2);
    expect(t.isBlocked(basic('a', 'right'), () => LOOPBACK)).toBe(false);
    fail(t, basic('a'));
    expect(t.isBlocked(basic('a', 'right'), () => LOOPBACK)).toBe(true);
    expect(t.isBlocked(basic('b', 'right'), () => LOOPBACK)).toBe(false);
  });

  it('counts a grant id’s failures from every address together: more addresses buy no more guesses', () => {
    const { t } = throttle();
    for (const source of ['127.0.0.1', '127.0.0.2', '127.0.0.3']) fail(t, basic('a'), source);
    expect(t.isBlocked(basic('a'), () => '127.0.0.9')).toBe(true);
  });

  it('counts a token without a grant id (Bearer, empty user, unreadable) per source address', () => {
    const { t } = throttle();
    fail(t, 'Bearer guess-1');
    fail(t, basic('', 'guess-2'));
    fail(t, 'Basic %%%');
    expect(t.isBlocked('Bearer right', () => LOOPBACK)).toBe(true);
    expect(t.isBlocked('Bearer right', () => '127.0.0.2')).toBe(false);
    expect(t.isBlocked(basic('a'), () => LOOPBACK)).toBe(false);
  });

  it('blocks every presentation from an address past perSource failures, whatever grant ids they named', () => {
    const { t } = throttle(3, 10);
    for (let i = 0; i < 10; i += 1) fail(t, basic(`id-${i}`));
    expect(t.isBlocked(basic('b', 'right'), () => LOOPBACK)).toBe(true);
    expect(t.isBlocked(basic('b', 'right'), () => '127.0.0.2')).toBe(false);
  });

  it('keeps a grant id apart from an address that spells the same', () => {
    const { t } = throttle(1, 100);
    fail(t, 'Bearer guess', 'x');
    expect(t.isBlocked(basic('x'), () => 'elsewhere')).toBe(false);
    expect(t.isBlocked(basic('source x'), () => 'x')).toBe(false);
  });

  it('starts a new window after a minute', () => {
    const { t, advance } = throttle();
    fail(t, basic('a'), LOOPBACK, 3);
    advance(59_999);
    expect(t.isBlocked(basic('a'), () => LOOPBACK)).toBe(true);
    advance(1);
    expect(t.isBlocked(basic('a'), () => LOOPBACK)).toBe(false);
  });

  it('asks for no source address and parses nothing while nothing has failed this window', () => {
    const { t } = throttle();
    let asked = 0;
    expect(t.isBlocked(basic('a'), () => (asked++, LOOPBACK))).toBe(false);
    expect(asked).toBe(0);
  });

  it('fails closed past 10,000 tracked grant ids: a spray neither resets the guessed grant id nor buys untracked guesses', () => {
    const { t } = throttle(3, 1_000_000);
    fail(t, basic('target'), LOOPBACK, 3);
    // 9,999 more grant ids fill the table (10,000 with the target), each from its own address.
    for (let i = 0; i < 9_999; i += 1) fail(t, basic(`spray-${i}`), `10.0.${i >> 8}.${i & 255}`);
    expect(t.isBlocked(basic('target'), () => LOOPBACK)).toBe(true);
    // New grant ids now share one overflow count: after perGrantId failures among them, they are all blocked.
    fail(t, basic('untracked-1'));
    fail(t, basic('untracked-2'));
    expect(t.isBlocked(basic('untracked-3'), () => LOOPBACK)).toBe(false);
    fail(t, basic('untracked-3'));
    expect(t.isBlocked(basic('untracked-4'), () => LOOPBACK)).toBe(true);
  });
});

// The operational log from the threat: a guesser must not be able to flood it (one warning per source
// per window, bounded however many sources), nor make it hold a token (the header, the token or a grant
// id that may be a token put in the user field never reach it).
describe('AuthThrottle: the operational log', () => {
  function logged(perGrantId = 3, perSource = 10): { t: AuthThrottle; advance(ms: number): void; lines: { obj: object; msg: string }[] } {
    let now = 1_000_000;
    const lines: { obj: object; msg: string }[] = [];
    const t = new AuthThrottle({ perGrantId, perSource }, () => now, { warn: (obj, msg) => void lines.push({ obj, msg }) });
    return { t, lines, advance: (ms) => void (now += ms) };
  }

  it('warns once when a source is first throttled, with the seconds left in the window, and not again until the next window', () => {
    const { t, lines, advance } = logged();
    fail(t, basic('a'), LOOPBACK, 2);
    expect(lines).toEqual([]);
    advance(15_000);
    fail(t, basic('a'), LOOPBACK, 50);
    expect(lines.map((l) => l.obj)).toEqual([{ reason: 'auth_rate_limited', source: LOOPBACK, limit: 'grant_id', retryAfterSeconds: 45 }]);
    expect(t.retryAfterSeconds()).toBe(45);
    advance(45_000);
    fail(t, basic('a'), LOOPBACK, 3);
    expect(lines).toHaveLength(2);
    expect(lines[1]?.obj).toMatchObject({ retryAfterSeconds: 60 });
  });

  it('names the source ceiling when that is what throttles, and never the header, the token or the presented id', () => {
    const { t, lines } = logged(100, 5);
    const secret = 'sluice_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
    for (let i = 0; i < 5; i += 1) fail(t, basic(`${secret}${i}`, secret));
    fail(t, `Bearer ${secret}`);
    expect(lines).toHaveLength(1);
    expect(lines[0]?.obj).toMatchObject({ limit: 'source' });
    expect(lines[0]?.msg).toContain('limits.authFailuresPerMinutePerSource');
    expect(JSON.stringify(lines)).not.toContain(secret);
    expect(JSON.stringify(lines)).not.toContain(Buffer.from(secret).toString('base64').slice(0, 20));
  });

  it('is bounded: a spray from more sources than are tracked adds one overflow warning, not one per source', () => {
    const { t, lines } = logged(1, 1);
    for (let i = 0; i < 10_050; i += 1) fail(t, 'Bearer x', `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`);
    expect(lines.length).toBe(10_001);
    expect(lines.at(-1)?.msg).toMatch(/more sources than are named/);
  });
});
