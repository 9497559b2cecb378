// Specifies the lines `sluice watch` prints: one per event kind for a person (time, label, columns; colour
// only when asked), the --json line, and that nothing from the stream reaches the terminal as a control byte.
import { beforeAll, describe, expect, it } from 'vitest';
import { formatEventLine, formatJsonLine, printable, type WatchEvent } from '../../../../src/cli/watch/event-line.js';

beforeAll(() => {
  // HH:MM:SS is local time: pin the zone so the expected lines hold on any machine.
  process.env['TZ'] = 'UTC';
});

const NOW = Date.parse('2026-12-05T10:00:00.000Z');
const plain = { isColor: false, nowMs: NOW };
const at = '2026-12-05T09:59:58.250Z';

describe('formatEventLine', () => {
  it.each<[string, WatchEvent, string]>([
    [
      'an allowed decision',
      { id: 1, event: 'decision', data: { ts: at, decision: 'allow', reason: 'granted', grant: 'g-1', generation: 'run-7', destination: 'https://api.github.com:443' } },
      '09:59:58  ALLOW     granted  g-1  https://api.github.com:443\n',
    ],
    [
      'a denied decision',
      { id: 2, event: 'decision', data: { ts: at, decision: 'deny', reason: 'destination_not_granted', grant: 'g-1', destination: 'https://evil.test:443' } },
      '09:59:58  DENY      destination_not_granted  g-1  https://evil.test:443\n',
    ],
    [
      'a decision without a grant (no principal)',
      { id: 3, event: 'decision', data: { ts: at, decision: 'deny', reason: 'token_missing', grant: null, destination: 'https://x.test:443' } },
      '09:59:58  DENY      token_missing  -  https://x.test:443\n',
    ],
    [
      'an ask, with the seconds left counted from now',
      { id: 4, event: 'ask', data: { ts: at, ask: 'a-1', grant: 'g-1', destination: 'https://pypi.org:443', expiresAt: '2026-12-05T10:00:30.400Z', waiting: 2 } },
      '09:59:58  ASK       a-1  g-1  https://pypi.org:443  (expires in 30s)\n',
    ],
    [
      'an ask that has already expired',
      { id: 5, event: 'ask', data: { ts: at, ask: 7, grant: 'g-1', destination: 'https://pypi.org:443', expiresAt: '2026-12-05T09:00:00Z' } },
      '09:59:58  ASK       7  g-1  https://pypi.org:443  (expires in 0s)\n',
    ],
    [
      'an ask answered for the grant',
      { id: 6, event: 'ask_answered', data: { ts: at, ask: 'a-1', grant: 'g-1', destination: 'https://pypi.org:443', decision: 'allow', scope: 'grant', answeredBy: 'admin' } },
      '09:59:58  ANSWERED  a-1  allow for the grant by admin  g-1  https://pypi.org:443\n',
    ],
    [
      'an ask that timed out',
      { id: 7, event: 'ask_answered', data: { ts: at, ask: 'a-2', grant: 'g-1', destination: 'https://x.test:443', decision: 'timeout', scope: null, answeredBy: 'timeout' } },
      '09:59:58  ANSWERED  a-2  timed out  g-1  https://x.test:443\n',
    ],
    [
      'an ask ended by a revoke',
      { id: 8, event: 'ask_answered', data: { ts: at, ask: 'a-3', grant: 'g-1', destination: 'https://x.test:443', decision: 'deny', scope: null, answeredBy: 'revoked' } },
      '09:59:58  ANSWERED  a-3  deny (grant revoked)  g-1  https://x.test:443\n',
    ],
    [
      'an ask denied once',
      { id: 9, event: 'ask_answered', data: { ts: at, ask: 'a-4', grant: 'g-1', destination: 'https://x.test:443', decision: 'deny', scope: 'once', answeredBy: 'admin' } },
      '09:59:58  ANSWERED  a-4  deny once by admin  g-1  https://x.test:443\n',
    ],
    ['a grant revoked', { id: 8, event: 'grant', data: { ts: at, action: 'revoke', grant: 'g-1', generation: 'run-7' } }, '09:59:58  GRANT     revoke  g-1  generation run-7\n'],
    ['a grant issued without a generation', { id: 9, event: 'grant', data: { ts: at, action: 'issue', grant: 'g-2', generation: null } }, '09:59:58  GRANT     issue  g-2\n'],
    ['a grant revoked on another instance of a fleet', { id: 10, event: 'grant', data: { ts: at, action: 'revoke', grant: 'g-3', generation: 'run-7', via: 'fleet' } }, '09:59:58  GRANT     revoke  g-3  generation run-7  (on another instance)\n'],
    ['a grant that expired', { id: 11, event: 'grant', data: { ts: at, action: 'expire', grant: 'g-4', generation: null } }, '09:59:58  GRANT     expire  g-4\n'],
    ['a gap (no ts: the time is now)', { id: null, event: 'gap', data: { from: 5, to: 9, reason: 'slow_reader' } }, '10:00:00  GAP       lost events 5..9 (slow_reader)\n'],
    [
      "a restart gap (the ids lost were an earlier process's)",
      { id: 0, event: 'gap', data: { from: null, to: null, reason: 'restart' } },
      '10:00:00  GAP       lost the events from before Sluice restarted (restart)\n',
    ],
    ['a kind this watcher does not know', { id: 10, event: 'budget', data: { ts: at, grant: 'g-1' } }, '09:59:58  BUDGET    {"ts":"2026-12-05T09:59:58.250Z","grant":"g-1"}\n'],
  ])('%s', (_name, event, line) => {
    expect(formatEventLine(event, plain)).toBe(line);
  });

  it('colours ALLOW green, DENY red and ASK yellow when asked, and nothing else', () => {
    const color = { isColor: true, nowMs: NOW };
    const allow = formatEventLine({ id: 1, event: 'decision', data: { ts: at, decision: 'allow', reason: 'granted', grant: 'g', destination: 'd' } }, color);
    const deny = formatEventLine({ id: 2, event: 'decision', data: { ts: at, decision: 'deny', reason: 'r', grant: 'g', destination: 'd' } }, color);
    const ask = formatEventLine({ id: 3, event: 'ask', data: { ts: at, ask: 'a', grant: 'g', destination: 'd', expiresAt: at } }, color);
    const grant = formatEventLine({ id: 4, event: 'grant', data: { ts: at, action: 'issue', grant: 'g' } }, color);
    expect(allow).toBe('09:59:58  \x1b[32mALLOW\x1b[0m     granted  g  d\n');
    expect(deny).toBe('09:59:58  \x1b[31mDENY\x1b[0m      r  g  d\n');
    expect(ask).toMatch(/^09:59:58 {2}\x1b\[33mASK\x1b\[0m {7}a {2}g {2}d/);
    expect(grant).not.toContain('\x1b');
  });

  it('shows control characters from the stream as \\xNN, so a destination cannot drive the terminal', () => {
    const line = formatEventLine({ id: 1, event: 'decision', data: { ts: at, decision: 'deny', reason: 'r\x1b[2J', grant: 'g\x07', destination: 'https://a\u009b.test:443' } }, plain);
    expect(line).toBe('09:59:58  DENY      r\\x1b[2J  g\\x07  https://a\\x9b.test:443\n');
    expect(printable('tab\there\nnl')).toBe('tab\\x09here\\x0anl');
  });
});

describe('formatJsonLine', () => {
  it('prints {"id","event","data"} on one line', () => {
    const data = { ts: at, decision: 'allow', reason: 'granted', grant: 'g-1', destination: 'https://a.test:443' };
    const line = formatJsonLine({ id: 12, event: 'decision', data });
    expect(line.endsWith('\n')).toBe(true);
    expect(line.slice(0, -1)).not.toContain('\n');
    expect(JSON.parse(line)).toEqual({ id: 12, event: 'decision', data });
  });
});
