// System mode: the proxy variables of Sluice's own environment, read with curl's precedence (review
// 2026-12 finding 11): CONNECT (https, wss, tcp) takes https_proxy, HTTPS_PROXY, all_proxy, ALL_PROXY;
// absolute-form (http, ws) takes http_proxy, HTTP_PROXY, all_proxy, ALL_PROXY; the first one set and
// non-empty wins. Unlike curl, uppercase HTTP_PROXY is honoured (see docs/routes.md: Sluice is no CGI
// program, and ignoring it would send plain HTTP direct). A variable that is consulted and cannot be
// parsed is an error at startup, never ignored and never replaced by DIRECT.
import type { UpstreamProxy } from '../core/index.js';
import { parseNoProxy, type NoProxy } from './no-proxy.js';
import { parseUpstream, redactUrl } from './upstream.js';

export interface SystemProxy {
  /** Absolute-form requests (http, ws). */
  readonly http: UpstreamProxy | null;
  /** CONNECT tunnels (https, wss, tcp). */
  readonly https: UpstreamProxy | null;
  /** The variable each proxy was read from, or null when none of its variables is set. */
  readonly sources: { readonly http: string | null; readonly https: string | null };
  readonly noProxy: NoProxy | null;
}

export interface SystemProxyIssue {
  readonly variable: string;
  readonly message: string;
}

type Env = Readonly<Record<string, string | undefined>>;

/** In the order curl consults them (lowercase first, then uppercase, then all_proxy / ALL_PROXY). */
export const SYSTEM_PROXY_VARIABLES = {
  http: ['http_proxy', 'HTTP_PROXY', 'all_proxy', 'ALL_PROXY'],
  https: ['https_proxy', 'HTTPS_PROXY', 'all_proxy', 'ALL_PROXY'],
} as const;

/** The first variable of `names` that is set and not empty (curl treats an empty one as unset). */
function pick(env: Env, names: readonly string[]): { variable: string; value: string } | null {
  for (const variable of names) {
    const value = env[variable];
    if (value !== undefined && value.trim() !== '') return { variable, value: value.trim() };
  }
  return null;
}

function parseProxyVariable(found: { variable: string; value: string }, caFile: string | undefined): UpstreamProxy | SystemProxyIssue {
  // A bare host:port is what many tools accept; treat it as http://host:port.
  const url = /^[a-z][a-z0-9+.-]*:\/\//i.test(found.value) ? found.value : `http://${found.value}`;
  const parsed = parseUpstream(url, { allowUrlCredentials: true, caFile });
  if (parsed.ok) return parsed.value;
  // socks5:// and the like: curl would use them, Sluice chains only HTTP(S) proxies. Going direct instead
  // would bypass the proxy the operator named, so this stops startup (fail closed).
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(found.value)?.[1]?.toLowerCase();
  const hint = scheme !== undefined && scheme.startsWith('socks') ? '; Sluice chains only http:// and https:// proxies and never goes direct instead' : '';
  return { variable: found.variable, message: `${redactUrl(found.value)}: ${parsed.message}${hint}` };
}

export function readSystemProxy(env: Env, caFile: string | undefined): { ok: true; value: SystemProxy } | { ok: false; issues: SystemProxyIssue[] } {
  const issues: SystemProxyIssue[] = [];
  const read = (names: readonly string[]): { proxy: UpstreamProxy | null; variable: string | null } => {
    const found = pick(env, names);
    if (found === null) return { proxy: null, variable: null };
    const parsed = parseProxyVariable(found, caFile);
    if ('message' in parsed) {
      // all_proxy consulted for both families is one issue, not two.
      if (!issues.some((i) => i.variable === parsed.variable)) issues.push(parsed);
      return { proxy: null, variable: found.variable };
    }
    return { proxy: parsed, variable: found.variable };
  };
  const http = read(SYSTEM_PROXY_VARIABLES.http);
  const https = read(SYSTEM_PROXY_VARIABLES.https);
  let noProxy: NoProxy | null = null;
  const rawNoProxy = pick(env, ['no_proxy', 'NO_PROXY']);
  if (rawNoProxy !== null) {
    const parsed = parseNoProxy(rawNoProxy.value);
    if (parsed.ok) noProxy = parsed.value;
    else issues.push({ variable: rawNoProxy.variable, message: parsed.message });
  }
  if (issues.length > 0) return { ok: false, issues };
  return { ok: true, value: { http: http.proxy, https: https.proxy, sources: { http: http.variable, https: https.variable }, noProxy } };
}

function describeFamily(family: string, proxy: UpstreamProxy | null, source: string | null, names: readonly string[]): string {
  if (proxy === null || source === null) return `${family}: system direct (no ${names.slice(0, -1).join(', ')} or ${names.at(-1) ?? ''} set)`;
  return `${family}: system proxy ${proxy.label} (from ${source})`;
}

/**
 * One line per request family saying which route it takes and why, for the startup log and `sluice
 * explain`: for example `https, wss, tcp (CONNECT): system direct (no https_proxy, HTTPS_PROXY,
 * all_proxy or ALL_PROXY set)`. A NO_PROXY list adds a line; the hop's own route label stays
 * `system direct` or `system proxy …`.
 */
export function describeSystemProxy(system: SystemProxy): string[] {
  const lines = [
    describeFamily('https, wss, tcp (CONNECT)', system.https, system.sources.https, SYSTEM_PROXY_VARIABLES.https),
    describeFamily('http, ws (absolute-form)', system.http, system.sources.http, SYSTEM_PROXY_VARIABLES.http),
  ];
  if (system.noProxy !== null) lines.push('destinations matching NO_PROXY: system direct');
  return lines;
}

/** True when one family goes through a proxy and the other goes direct: worth a warning at startup. */
export function isSystemProxySplit(system: SystemProxy): boolean {
  return (system.http === null) !== (system.https === null);
}
