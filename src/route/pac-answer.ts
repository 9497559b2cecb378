// Parses what FindProxyForURL returned ("PROXY a:3128; HTTPS b:443; DIRECT") into ordered entries, by the
// Netscape PAC return-value grammar as Chromium reads it (ProxyList::SetFromPacString); it never resolves or
// dials what it names, and it rejects what it cannot read instead of guessing (never a silent DIRECT).
import { isIPv6 } from 'node:net';
import { deny, ok, type Verdict } from '../core/index.js';

export type PacEntry =
  | { readonly kind: 'direct' }
  | { readonly kind: 'proxy'; readonly tls: boolean; readonly host: string; readonly port: number; readonly text: string }
  | { readonly kind: 'unsupported'; readonly text: string };

export const MAX_PAC_ANSWER_CHARS = 4096;
export const MAX_PAC_ENTRIES = 32;

interface Keyword {
  readonly kind: 'proxy' | 'unsupported';
  readonly tls: boolean;
  readonly defaultPort: number;
}

// PROXY and HTTP are the same hop (Chromium); HTTPS is a TLS connection to the proxy itself. SOCKS* and
// Chromium's QUIC are valid PAC but not routes Sluice can take: they are kept, marked unsupported, so the
// route selector can skip them and say why.
const KEYWORDS: ReadonlyMap<string, Keyword> = new Map([
  ['PROXY', { kind: 'proxy', tls: false, defaultPort: 80 }],
  ['HTTP', { kind: 'proxy', tls: false, defaultPort: 80 }],
  ['HTTPS', { kind: 'proxy', tls: true, defaultPort: 443 }],
  ['SOCKS', { kind: 'unsupported', tls: false, defaultPort: 1080 }],
  ['SOCKS4', { kind: 'unsupported', tls: false, defaultPort: 1080 }],
  ['SOCKS5', { kind: 'unsupported', tls: false, defaultPort: 1080 }],
  ['QUIC', { kind: 'unsupported', tls: true, defaultPort: 443 }],
]);

const DIRECT: PacEntry = Object.freeze({ kind: 'direct' });
const NAME = /^(?:[a-z0-9_-]{1,63}\.)*[a-z0-9_-]{1,63}$/;
const BRACKETED = /^\[([^\]]*)\](?::([^:]*))?$/;
const PLAIN = /^([^:[\]]*)(?::([^:]*))?$/;

export function parsePacAnswer(answer: unknown): Verdict<readonly PacEntry[]> {
  if (typeof answer !== 'string') return deny('pac_failed', `FindProxyForURL returned ${answer === null ? 'null' : typeof answer}, not a string`);
  if (answer.length > MAX_PAC_ANSWER_CHARS) return deny('pac_failed', `the PAC answer is longer than ${MAX_PAC_ANSWER_CHARS} characters`);
  const entries: PacEntry[] = [];
  for (const raw of answer.split(';')) {
    const words = raw.trim().split(/\s+/).filter((w) => w !== '');
    if (words.length === 0) continue; // "PROXY a:1;" and "; DIRECT" are common and harmless
    if (entries.length === MAX_PAC_ENTRIES) return deny('pac_failed', `the PAC answer lists more than ${MAX_PAC_ENTRIES} entries`);
    const entry = parseEntry(words);
    if (entry === null) return deny('pac_failed', `the PAC answer has an unreadable entry ${JSON.stringify(raw.trim().slice(0, 80))}`);
    entries.push(entry);
  }
  if (entries.length === 0) return deny('pac_failed', 'the PAC answer is empty');
  return ok(entries);
}

function parseEntry(words: readonly string[]): PacEntry | null {
  const [first = '', target, ...extra] = words;
  const keyword = first.toUpperCase();
  if (keyword === 'DIRECT') return target === undefined ? DIRECT : null;
  const spec = KEYWORDS.get(keyword);
  if (spec === undefined || target === undefined || extra.length > 0) return null;
  const hostPort = parseHostPort(target, spec.defaultPort);
  if (hostPort === null) return null;
  const text = `${keyword} ${hostPort.host.includes(':') ? `[${hostPort.host}]` : hostPort.host}:${hostPort.port}`;
  if (spec.kind === 'unsupported') return { kind: 'unsupported', text };
  return { kind: 'proxy', tls: spec.tls, host: hostPort.host, port: hostPort.port, text };
}

/** `host[:port]` or `[v6][:port]`; the host comes back lower-case and without brackets. */
function parseHostPort(text: string, defaultPort: number): { host: string; port: number } | null {
  const lower = text.toLowerCase();
  const bracketed = BRACKETED.exec(lower);
  const match = bracketed ?? PLAIN.exec(lower);
  const host = match?.[1];
  const portText = match?.[2];
  if (host === undefined) return null;
  const hostOk = bracketed !== null ? isIPv6(host) && !host.includes('%') : host.length <= 253 && NAME.test(host);
  if (!hostOk) return null;
  if (portText === undefined) return { host, port: defaultPort };
  const port = /^\d{1,5}$/.test(portText) ? Number(portText) : 0;
  return port >= 1 && port <= 65535 ? { host, port } : null;
}
