// The PAC builtins (Netscape PAC spec, Chromium's pac_js_library semantics, Microsoft's IPv6 extensions),
// answered only from a PacHostPort: they never do I/O, never resolve a name the port does not already
// know, never throw into the script for bad input, and never print PAC-controlled text.
import { isIPv6 } from 'node:net';

export interface PacHostPort {
  /** Synchronous view of Sluice's own resolver: the addresses it already knows for `host` (static hosts, cache, or the pre-resolved destination), or null. Never does I/O. */
  lookupSync(host: string): readonly string[] | null;
  /** The address Sluice would present as its own (configured; default 127.0.0.1). */
  myIpAddress(): string;
  /** Current time, injectable for tests. */
  now(): Date;
}

/** A builtin as the sandbox sees it: any arguments (PAC code is hostile), a primitive result. */
export type PacBuiltin = (...args: unknown[]) => unknown;

/** Every global a PAC script may call: pac-resolver's sandbox plus Microsoft's IPv6 `…Ex` extensions. */
export const PAC_BUILTIN_NAMES = [
  'alert', 'dateRange', 'dnsDomainIs', 'dnsDomainLevels', 'dnsResolve', 'isInNet', 'isPlainHostName',
  'isResolvable', 'localHostOrDomainIs', 'myIpAddress', 'shExpMatch', 'timeRange', 'weekdayRange',
  'dnsResolveEx', 'isResolvableEx', 'myIpAddressEx', 'isInNetEx', 'sortIpAddressList', 'getClientVersion',
] as const;
export type PacBuiltinName = (typeof PAC_BUILTIN_NAMES)[number];
export type PacBuiltins = { readonly [K in PacBuiltinName]: PacBuiltin };

/** shExpMatch gives up (false) after this many matcher steps (~3 ms), so no pattern can stall the event
 * loop; a URL-against-glob match of ordinary sizes needs a few thousand. */
const SHEXP_STEP_BUDGET = 200_000;
const MONTHS = ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'];
const WEEKDAYS = ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'];

export function createPacBuiltins(port: PacHostPort): PacBuiltins {
  // Only the port can fault; everything else is total over any input, so a builtin never throws.
  const known = (host: string): readonly string[] => {
    if (host.length === 0 || host.length > 253) return [];
    try {
      return port.lookupSync(host.toLowerCase()) ?? [];
    } catch {
      return [];
    }
  };
  const myIp = (): string => {
    try {
      return String(port.myIpAddress());
    } catch {
      return '127.0.0.1'; // what Chromium answers when it cannot tell
    }
  };
  // Chromium: dnsResolve answers IPv4 only; an IPv4 literal is its own answer.
  const dnsResolve = (host: unknown): string | null => {
    if (typeof host !== 'string') return null;
    if (ipv4ToUint(host) !== null) return host;
    return known(host).find((a) => ipv4ToUint(a) !== null) ?? null;
  };
  const resolvable = (host: unknown): boolean =>
    typeof host === 'string' && (ipToBytes(host) !== null || known(host).length > 0);
  const clock = (): Date | null => {
    try {
      const now = port.now();
      return Number.isNaN(now.getTime()) ? null : now;
    } catch {
      return null;
    }
  };
  return Object.freeze({
    alert: () => undefined,
    dnsResolve,
    isResolvable: resolvable,
    isResolvableEx: resolvable,
    dnsResolveEx: (host) => {
      if (typeof host !== 'string') return '';
      return ipToBytes(host) !== null ? host : known(host).join(';');
    },
    isInNet: (host, pattern, mask) => {
      const p = ipv4ToUint(pattern);
      const m = ipv4ToUint(mask);
      const h = ipv4ToUint(dnsResolve(host));
      return p !== null && m !== null && h !== null && (h & m) >>> 0 === (p & m) >>> 0;
    },
    isInNetEx,
    sortIpAddressList,
    myIpAddress: myIp,
    myIpAddressEx: myIp,
    getClientVersion: () => '1.0',
    isPlainHostName: (host) => typeof host === 'string' && !host.includes('.'),
    dnsDomainIs: (host, domain) =>
      typeof host === 'string' && typeof domain === 'string' && host.toLowerCase().endsWith(domain.toLowerCase()),
    // Netscape: exact match, or an unqualified host that is the first label of hostdom.
    localHostOrDomainIs: (host, hostdom) => {
      if (typeof host !== 'string' || typeof hostdom !== 'string') return false;
      const h = host.toLowerCase();
      const d = hostdom.toLowerCase();
      return h === d || (!h.includes('.') && d.startsWith(`${h}.`));
    },
    dnsDomainLevels: (host) => (typeof host === 'string' ? host.split('.').length - 1 : 0),
    shExpMatch: (text, pattern) => typeof text === 'string' && typeof pattern === 'string' && shExpMatch(text, pattern),
    timeRange: (...args) => timeRange(clock(), args),
    dateRange: (...args) => dateRange(clock(), args),
    weekdayRange: (...args) => weekdayRange(clock(), args),
  });
}

/** Glob match: `*` any run, `?` one UTF-16 unit, everything else literal (no regex, so no metacharacters). */
function shExpMatch(text: string, pattern: string): boolean {
  let [t, p, star, mark] = [0, 0, -1, 0];
  for (let steps = 0; t < text.length; steps++) {
    if (steps > SHEXP_STEP_BUDGET) return false;
    if (p < pattern.length && (pattern[p] === '?' || (pattern[p] === text[t] && pattern[p] !== '*'))) {
      t++;
      p++;
    } else if (p < pattern.length && pattern[p] === '*') {
      star = p++;
      mark = t;
    } else if (star >= 0) {
      p = star + 1;
      t = ++mark;
    } else return false;
  }
  while (pattern[p] === '*') p++;
  return p === pattern.length;
}

/** Strict dotted-quad IPv4 (no leading zeros, which inet_aton would read as octal) as an unsigned 32-bit number. */
function ipv4ToUint(text: unknown): number | null {
  if (typeof text !== 'string' || text.length > 15) return null;
  const parts = text.split('.');
  if (parts.length !== 4) return null;
  let value = 0;
  for (const part of parts) {
    if (!/^(?:0|[1-9]\d{0,2})$/.test(part) || Number(part) > 255) return null;
    value = value * 256 + Number(part);
  }
  return value;
}

/** An IPv4 or IPv6 literal (no zone id) as 4 or 16 bytes. */
function ipToBytes(text: string): number[] | null {
  const v4 = ipv4ToUint(text);
  if (v4 !== null) return [v4 >>> 24, (v4 >>> 16) & 255, (v4 >>> 8) & 255, v4 & 255];
  if (!isIPv6(text) || text.includes('%')) return null;
  let head = text;
  const lastColon = text.lastIndexOf(':');
  const tail = ipv4ToUint(text.slice(lastColon + 1));
  if (tail !== null) head = `${text.slice(0, lastColon + 1)}${(tail >>> 16).toString(16)}:${(tail & 0xffff).toString(16)}`;
  const [left = '', right] = head.split('::');
  const lead = left === '' ? [] : left.split(':');
  const trail = right === undefined || right === '' ? [] : right.split(':');
  const zeros = Array<string>(Math.max(0, 8 - lead.length - trail.length)).fill('0');
  const groups = right === undefined ? lead : [...lead, ...zeros, ...trail];
  if (groups.length !== 8) return null;
  return groups.flatMap((g) => [parseInt(g, 16) >> 8, parseInt(g, 16) & 255]);
}

const V4_MAPPED_PREFIX = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255];

// Microsoft isInNetEx(ipAddress, "prefix/bits"); like Chromium, IPv4 is compared as IPv4-mapped IPv6 when
// the families differ, and a host name (not a literal) is never resolved here.
function isInNetEx(address: unknown, prefix: unknown): boolean {
  if (typeof address !== 'string' || typeof prefix !== 'string') return false;
  const [net = '', bitsText = '', ...extra] = prefix.trim().split('/');
  let a = ipToBytes(address.trim());
  let n = ipToBytes(net);
  if (a === null || n === null || extra.length > 0 || !/^\d{1,3}$/.test(bitsText)) return false;
  let bits = Number(bitsText);
  if (bits > n.length * 8) return false;
  if (a.length !== n.length) {
    if (n.length === 4) bits += 96;
    if (a.length === 4) a = [...V4_MAPPED_PREFIX, ...a];
    if (n.length === 4) n = [...V4_MAPPED_PREFIX, ...n];
  }
  for (let i = 0; i < n.length && bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 255 : (0xff00 >> bits) & 255;
    if (((a[i] ?? 0) & mask) !== ((n[i] ?? 0) & mask)) return false;
  }
  return true;
}

// Microsoft sortIpAddressList: IPv6 before IPv4, then ascending; false if any entry is not an IP literal.
function sortIpAddressList(list: unknown): string | false {
  if (typeof list !== 'string') return false;
  const items = list.replace(/\s+/g, '').split(';').filter((s) => s !== '');
  const parsed = items.map((text) => ({ text, bytes: ipToBytes(text) }));
  if (parsed.length === 0 || parsed.some((x) => x.bytes === null)) return false;
  const compare = (x: readonly number[], y: readonly number[]): number => {
    if (x.length !== y.length) return y.length - x.length;
    for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return (x[i] ?? 0) - (y[i] ?? 0);
    return 0;
  };
  return parsed.sort((x, y) => compare(x.bytes ?? [], y.bytes ?? [])).map((x) => x.text).join(';');
}

/** Splits off the optional trailing "GMT" argument (Netscape: times are local unless it is given). */
function withoutGmt(args: readonly unknown[]): { rest: readonly unknown[]; utc: boolean } {
  return args.length > 0 && args[args.length - 1] === 'GMT' ? { rest: args.slice(0, -1), utc: true } : { rest: args, utc: false };
}

/** A non-negative integer from a number or a string of digits, as PAC authors write either. */
function integer(arg: unknown): number | null {
  if (typeof arg === 'number') return Number.isInteger(arg) && arg >= 0 ? arg : null;
  return typeof arg === 'string' && /^\d{1,4}$/.test(arg) ? Number(arg) : null;
}

/** Inclusive range; when `start > end` and `wrap`, the range wraps (22h..6h, DEC..FEB, FRI..MON). */
function inRange(start: number, value: number, end: number, wrap: boolean): boolean {
  return start <= end ? start <= value && value <= end : wrap && (value >= start || value <= end);
}

const TIME_LIMITS: Readonly<Record<number, readonly number[]>> = { 1: [23], 2: [23, 23], 4: [23, 59, 23, 59], 6: [23, 59, 59, 23, 59, 59] };

// timeRange(h) | (h1, h2) | (h1, m1, h2, m2) | (h1, m1, s1, h2, m2, s2) [, "GMT"]. As in Chromium/Mozilla,
// (h1, h2) covers h1:00:00 to h2:59:59 and (h1, m1, h2, m2) ends at m2:59; unlike them, every form wraps.
function timeRange(now: Date | null, args: readonly unknown[]): boolean {
  const { rest, utc } = withoutGmt(args);
  const n = rest.map(integer);
  const limits = TIME_LIMITS[n.length];
  if (now === null || limits === undefined || n.some((v, i) => v === null || v > (limits[i] ?? 0))) return false;
  const v = n as number[];
  const at = (h = 0, m = 0, s = 0): number => h * 3600 + m * 60 + s;
  const current = utc ? at(now.getUTCHours(), now.getUTCMinutes(), now.getUTCSeconds()) : at(now.getHours(), now.getMinutes(), now.getSeconds());
  if (v.length === 1) return Math.floor(current / 3600) === v[0];
  if (v.length === 2) return inRange(at(v[0]), current, at(v[1], 59, 59), true);
  if (v.length === 4) return inRange(at(v[0], v[1]), current, at(v[2], v[3], 59), true);
  return inRange(at(v[0], v[1], v[2]), current, at(v[3], v[4], v[5]), true);
}

type DateKind = 'd' | 'm' | 'y';
const DATE_WEIGHT: Readonly<Record<DateKind, number>> = { d: 1, m: 100, y: 10_000 };
const DATE_SHAPES = new Set(['d', 'm', 'y', 'dm', 'my', 'dmy']);

function dateField(arg: unknown): { kind: DateKind; value: number } | null {
  const month = typeof arg === 'string' ? MONTHS.indexOf(arg) : -1;
  if (month >= 0) return { kind: 'm', value: month };
  const n = integer(arg);
  if (n !== null && n >= 1 && n <= 31) return { kind: 'd', value: n };
  if (n !== null && n >= 1000) return { kind: 'y', value: n };
  return null;
}

// dateRange(day | month | year) or a range of the same shape twice: (d1, d2), (m1, m2), (y1, y2),
// (d1, m1, d2, m2), (m1, y1, m2, y2), (d1, m1, y1, d2, m2, y2) [, "GMT"]. Ranges without a year wrap.
function dateRange(now: Date | null, args: readonly unknown[]): boolean {
  const { rest, utc } = withoutGmt(args);
  const fields = rest.map(dateField);
  if (now === null || fields.length === 0 || fields.length > 6) return false;
  const today: Record<DateKind, number> = utc
    ? { d: now.getUTCDate(), m: now.getUTCMonth(), y: now.getUTCFullYear() }
    : { d: now.getDate(), m: now.getMonth(), y: now.getFullYear() };
  const valid = fields.filter((f) => f !== null);
  const first = valid[0];
  if (valid.length !== fields.length || first === undefined) return false;
  if (valid.length === 1) return first.value === today[first.kind];
  const half = valid.length / 2;
  const kinds = valid.map((f) => f.kind).join('');
  const shape = kinds.slice(0, half);
  if (!Number.isInteger(half) || kinds.slice(half) !== shape || !DATE_SHAPES.has(shape)) return false;
  const key = (part: typeof valid): number => part.reduce((k, f) => k + f.value * DATE_WEIGHT[f.kind], 0);
  const todayKey = [...shape].reduce((k, c) => k + today[c as DateKind] * DATE_WEIGHT[c as DateKind], 0);
  return inRange(key(valid.slice(0, half)), todayKey, key(valid.slice(half)), !shape.includes('y'));
}

// weekdayRange(wd1 [, wd2] [, "GMT"]) with the upper-case names of the Netscape spec; wraps (FRI..MON).
function weekdayRange(now: Date | null, args: readonly unknown[]): boolean {
  const { rest, utc } = withoutGmt(args);
  const days = rest.map((d) => (typeof d === 'string' ? WEEKDAYS.indexOf(d) : -1));
  const [from, to] = days;
  if (now === null || from === undefined || days.length > 2 || days.includes(-1)) return false;
  return inRange(from, utc ? now.getUTCDay() : now.getDay(), to ?? from, true);
}
