// PacScript: one sandboxed VM per script; hostile PACs (loops, memory bombs, recursion, throws, wrong
// types) fail fast with pac_failed and the script answers correctly afterwards; builtins see only the port.
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_STACK_SIZE } from 'quickjs-wasi';
import { PacScript, QUICKJS_MAX_STACK_BYTES, type PacHostPort, type PacLimits } from '../../../src/route/pac-evaluator.js';

const LIMITS: PacLimits = { timeoutMs: 200, memoryBytes: 8 * 1024 * 1024, stackBytes: 256 * 1024 };
/** Generous bound for "about timeoutMs" on a loaded CI machine. */
const FAIL_FAST_MS = 2000;

const KNOWN: Readonly<Record<string, readonly string[]>> = {
  'intranet.corp': ['10.1.2.3'],
  'dual.corp': ['2001:db8::7', '10.9.8.7'],
  'public.example': ['93.184.216.34'],
};

function recordingPort(): PacHostPort & { readonly asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    lookupSync: (host) => {
      asked.push(host);
      return KNOWN[host] ?? null;
    },
    myIpAddress: () => '192.0.2.10',
    now: () => new Date(Date.UTC(2024, 5, 12, 14, 30, 0)), // Wednesday 12 June 2024, 14:30 UTC
  };
}

const HOSTILE = `
function FindProxyForURL(url, host) {
  if (host === 'loop') { while (true) {} }
  if (host === 'native-loop') { while (true) { new Array(1e6).join('x'); } }
  if (host === 'memory') { var a = []; while (true) a.push(new Array(1e6).join('x')); }
  if (host === 'leak') { leaked = leaked || []; while (true) leaked.push(new Array(1e5).join('y')); }
  if (host === 'recursion') { return (function f(n) { return f(n + 1) + 1; })(0); }
  if (host === 'throw') { throw new Error('boom'); }
  if (host === 'number') { return 42; }
  if (host === 'object') { return { toString: function () { return 'DIRECT'; } }; }
  if (host === 'never') { return new Promise(function () {}); }
  if (host === 'microtasks') { return (async function () { while (true) { await 0; } })(); }
  if (host === 'huge') { return new Array(70000).join('x'); }
  if (host === 'huge-arg') { return shExpMatch(new Array(70000).join('x'), '*') ? 'DIRECT' : 'DIRECT'; }
  if (host === 'control') { throw new Error('line1\\nline2\\u001b[31m'); }
  if (shExpMatch(dnsResolve(host), '10.*')) { return 'PROXY inner.corp:3128'; }
  return 'DIRECT';
}
var leaked;`;

const scripts: PacScript[] = [];
async function load(source: string, port: PacHostPort = recordingPort(), limits: PacLimits = LIMITS): Promise<PacScript> {
  const compiled = await PacScript.compile(source, port, limits);
  if (!compiled.ok) throw new Error(compiled.detail);
  scripts.push(compiled.value);
  return compiled.value;
}
afterEach(() => {
  for (const s of scripts.splice(0)) s.dispose();
});

async function timed<T>(run: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const start = performance.now();
  const value = await run();
  return { value, ms: performance.now() - start };
}

describe('PacScript.compile', () => {
  it.each([
    ['an empty script', '   '],
    ['a syntax error', 'function FindProxyForURL(url, host) { return "DIRECT" '],
    ['no FindProxyForURL', 'function findProxy(url, host) { return "DIRECT"; }'],
    ['FindProxyForURL that is not a function', 'var FindProxyForURL = "DIRECT";'],
    ['top-level code that throws', 'throw new Error("nope"); function FindProxyForURL() { return "DIRECT"; }'],
  ])('fails with pac_failed for %s', async (_name, source) => {
    const compiled = await PacScript.compile(source, recordingPort(), LIMITS);
    expect(compiled).toMatchObject({ ok: false, reason: 'pac_failed' });
  });

  // Loading is bounded too, but more loosely than a call: the bound includes starting the thread, and the
  // hard stop (for loops QuickJS cannot interrupt) allows for host-side parsing of large scripts.
  it.each([
    ['an endless top-level loop', 'while (true) {} function FindProxyForURL() { return "DIRECT"; }', FAIL_FAST_MS + 1000],
    ['a top-level loop of costly native calls', 'while (true) { new Array(1e6).join("x"); } function FindProxyForURL() { return "DIRECT"; }', 6000],
  ])('fails with pac_failed, bounded, for %s', async (_name, source, bound) => {
    const { value, ms } = await timed(() => PacScript.compile(source, recordingPort(), LIMITS));
    expect(value).toMatchObject({ ok: false, reason: 'pac_failed' });
    expect(ms).toBeLessThan(bound);
  });

  it('clamps the stack to the QuickJS bound the package itself has (kept as a constant off the main thread)', () => {
    expect(QUICKJS_MAX_STACK_BYTES).toBe(MAX_STACK_SIZE);
  });

  it('rejects limits that make no sense', async () => {
    const compiled = await PacScript.compile('function FindProxyForURL() { return "DIRECT"; }', recordingPort(), { ...LIMITS, timeoutMs: 0 });
    expect(compiled).toMatchObject({ ok: false, reason: 'pac_failed' });
  });
});

describe('PacScript.findProxy', () => {
  it('evaluates shExpMatch(dnsResolve(host), "10.*") from the port only', async () => {
    const port = recordingPort();
    const script = await load(HOSTILE, port);
    expect(await script.findProxy('https://intranet.corp/', 'intranet.corp')).toEqual({ ok: true, value: 'PROXY inner.corp:3128' });
    expect(await script.findProxy('https://dual.corp/', 'dual.corp')).toEqual({ ok: true, value: 'PROXY inner.corp:3128' });
    expect(await script.findProxy('https://public.example/', 'public.example')).toEqual({ ok: true, value: 'DIRECT' });
    // localhost resolves on every real machine; a PAC sees only what the port knows.
    expect(await script.findProxy('http://localhost/', 'localhost')).toEqual({ ok: true, value: 'DIRECT' });
    expect(port.asked).toEqual(['intranet.corp', 'dual.corp', 'public.example', 'localhost']);
  });

  it('evaluates isInNet(dnsResolve(host), "10.0.0.0", "255.0.0.0")', async () => {
    const script = await load(`function FindProxyForURL(url, host) {
      if (isInNet(dnsResolve(host), "10.0.0.0", "255.0.0.0")) return "PROXY ten.corp:8080; DIRECT";
      if (isInNet(host, "93.184.0.0", "255.255.0.0")) return "HTTPS edge.corp:443";
      return "DIRECT"; }`);
    expect(await script.findProxy('https://intranet.corp/', 'intranet.corp')).toEqual({ ok: true, value: 'PROXY ten.corp:8080; DIRECT' });
    expect(await script.findProxy('https://public.example/', 'public.example')).toEqual({ ok: true, value: 'HTTPS edge.corp:443' });
    expect(await script.findProxy('https://unknown.example/', 'unknown.example')).toEqual({ ok: true, value: 'DIRECT' });
  });

  it('gives the PAC the port’s address and clock, never its own', async () => {
    const script = await load(`function FindProxyForURL(url, host) {
      return [myIpAddress(), myIpAddressEx(), weekdayRange("WED", "GMT"), timeRange(14, "GMT"), dateRange("JUN", "GMT"),
        dnsResolveEx("dual.corp"), isResolvable("nowhere.example"), getClientVersion(), typeof alert("x")].join(" "); }`);
    expect(await script.findProxy('https://a.example/', 'a.example')).toEqual({
      ok: true,
      value: '192.0.2.10 192.0.2.10 true true true 2001:db8::7;10.9.8.7 false 1.0 undefined',
    });
  });

  it.concurrent.for([
    ['an endless loop', 'loop'],
    ['a loop of costly native calls (interrupt handler not polled)', 'native-loop'],
    ['a memory bomb', 'memory'],
    ['memory kept in a global', 'leak'],
    ['infinite recursion', 'recursion'],
    ['a throw', 'throw'],
    ['a number', 'number'],
    ['an object', 'object'],
    ['a promise that never settles', 'never'],
    ['an endless microtask loop', 'microtasks'],
    ['an overlong string', 'huge'],
    ['an overlong builtin argument', 'huge-arg'],
  ] as const)('fails fast with pac_failed on %s, then answers the next call', async ([, host], { expect }) => {
    // Concurrent (each script has its own thread), so this test disposes its own script.
    const compiled = await PacScript.compile(HOSTILE, recordingPort(), LIMITS);
    if (!compiled.ok) throw new Error(compiled.detail);
    const script = compiled.value;
    try {
      const { value, ms } = await timed(() => script.findProxy(`https://${host}/`, host));
      expect(value).toMatchObject({ ok: false, reason: 'pac_failed' });
      expect(ms).toBeLessThan(FAIL_FAST_MS);
      expect(await script.findProxy('https://intranet.corp/', 'intranet.corp')).toEqual({ ok: true, value: 'PROXY inner.corp:3128' });
    } finally {
      script.dispose();
    }
  });

  it('survives one failure after another', async () => {
    const script = await load(HOSTILE);
    for (const host of ['loop', 'memory', 'native-loop', 'leak', 'never']) {
      expect(await script.findProxy(`https://${host}/`, host)).toMatchObject({ ok: false, reason: 'pac_failed' });
    }
    expect(await script.findProxy('https://public.example/', 'public.example')).toEqual({ ok: true, value: 'DIRECT' });
  });

  it('masks control characters of the script’s own error message', async () => {
    const script = await load(HOSTILE);
    const failed = await script.findProxy('https://control/', 'control');
    expect(failed).toMatchObject({ ok: false, reason: 'pac_failed' });
    expect(failed.ok ? '' : failed.detail).toMatch(/line1\?line2\?\[31m/);
  });

  it('gives the script no host objects: no require, process, fetch or console', async () => {
    const script = await load(`function FindProxyForURL(url, host) {
      return [typeof require, typeof process, typeof fetch, typeof console, typeof XMLHttpRequest, typeof setTimeout].join(); }`);
    expect(await script.findProxy('https://a.example/', 'a.example')).toEqual({ ok: true, value: Array(6).fill('undefined').join() });
  });

  it('runs calls one at a time, in order', async () => {
    const script = await load('var n = 0; function FindProxyForURL(url, host) { n = n + 1; return "PROXY p" + n + ".corp:3128"; }');
    const answers = await Promise.all([1, 2, 3, 4, 5].map(() => script.findProxy('https://a.example/', 'a.example')));
    expect(answers.map((a) => (a.ok ? a.value : a.detail))).toEqual([1, 2, 3, 4, 5].map((n) => `PROXY p${n}.corp:3128`));
  });

  it('serves principals in turn: a flooding principal gets its own pac_limit_reached, another principal’s call runs next (finding 15)', async () => {
    const script = await load('var n = 0; function FindProxyForURL(url, host) { n = n + 1; return "PROXY " + host + "-" + n + ".corp:3128"; }', recordingPort(), {
      ...LIMITS,
      maxWaitingPerPrincipal: 3,
    });
    // The first call is evaluated at once; three more wait; the fifth is the flooder's own refusal.
    const flood = ['f1', 'f2', 'f3', 'f4', 'f5'].map((h) => script.findProxy(`https://${h}/`, h, 'attacker'));
    const victim = script.findProxy('https://v/', 'v', 'victim');
    const answers = await Promise.all([...flood, victim]);
    expect(answers.map((a) => (a.ok ? a.value : a.reason))).toEqual([
      'PROXY f1-1.corp:3128',
      'PROXY f2-2.corp:3128',
      'PROXY f3-4.corp:3128',
      'PROXY f4-5.corp:3128',
      'pac_limit_reached',
      'PROXY v-3.corp:3128', // right after the flooder's next call, not after all of them
    ]);
  });

  it('a failure in a queued call does not disturb the calls around it', async () => {
    const script = await load(HOSTILE);
    const answers = await Promise.all(['intranet.corp', 'loop', 'public.example'].map((h) => script.findProxy(`https://${h}/`, h)));
    expect(answers.map((a) => a.ok)).toEqual([true, false, true]);
  });

  it('answers pac_failed once disposed, including a call in flight', async () => {
    const script = await load(HOSTILE);
    const inFlight = script.findProxy('https://loop/', 'loop');
    script.dispose();
    expect(await inFlight).toMatchObject({ ok: false, reason: 'pac_failed' });
    expect(await script.findProxy('https://intranet.corp/', 'intranet.corp')).toMatchObject({ ok: false, reason: 'pac_failed' });
  });
});
