// System mode: the HTTP_PROXY / HTTPS_PROXY / NO_PROXY of Sluice's own environment (lowercase wins, as
// curl reads them). A variable that is set but cannot be parsed is an error at startup, never ignored.
import type { UpstreamProxy } from '../core/index.js';
import { parseNoProxy, type NoProxy } from './no-proxy.js';
import { parseUpstream, redactUrl } from './upstream.js';

export interface SystemProxy {
  readonly http: UpstreamProxy | null;
  readonly https: UpstreamProxy | null;
  readonly noProxy: NoProxy | null;
}

export interface SystemProxyIssue {
  readonly variable: string;
  readonly message: string;
}

function pick(env: Readonly<Record<string, string | undefined>>, name: string): { variable: string; value: string } | null {
  for (const variable of [name.toLowerCase(), name.toUpperCase()]) {
    const value = env[variable];
    if (value !== undefined && value.trim() !== '') return { variable, value: value.trim() };
  }
  return null;
}

export function readSystemProxy(env: Readonly<Record<string, string | undefined>>, caFile: string | undefined): { ok: true; value: SystemProxy } | { ok: false; issues: SystemProxyIssue[] } {
  const issues: SystemProxyIssue[] = [];
  const parseVar = (name: string): UpstreamProxy | null => {
    const found = pick(env, name);
    if (found === null) return null;
    // A bare host:port is what many tools accept; treat it as http://host:port.
    const url = /^[a-z][a-z0-9+.-]*:\/\//i.test(found.value) ? found.value : `http://${found.value}`;
    const parsed = parseUpstream(url, { allowUrlCredentials: true, caFile });
    if (!parsed.ok) {
      issues.push({ variable: found.variable, message: `${redactUrl(found.value)}: ${parsed.message}` });
      return null;
    }
    return parsed.value;
  };
  const http = parseVar('http_proxy');
  const https = parseVar('https_proxy');
  let noProxy: NoProxy | null = null;
  const rawNoProxy = pick(env, 'no_proxy');
  if (rawNoProxy !== null) {
    const parsed = parseNoProxy(rawNoProxy.value);
    if (parsed.ok) noProxy = parsed.value;
    else issues.push({ variable: rawNoProxy.variable, message: parsed.message });
  }
  if (issues.length > 0) return { ok: false, issues };
  return { ok: true, value: { http, https, noProxy } };
}
