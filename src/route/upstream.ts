// Builds UpstreamProxy values from config: the proxy URL, how Sluice authenticates to it (Basic or NTLM
// credentials from a file holding one line `user:password`, Negotiate with the service's own Kerberos
// credentials, or auto) and its extra trusted CA. Credentials go only into this proxy's Proxy-Authorization.
import { readFileSync } from 'node:fs';
import net from 'node:net';
import type { ProxyAuthMode, ProxyNtlmCredentials, UpstreamProxy } from '../core/index.js';

export interface UpstreamSettings {
  /** Absent: basic with a credentials file (or URL credentials), otherwise none. */
  readonly auth?: Exclude<ProxyAuthMode, 'none'> | undefined;
  readonly spn?: string | undefined;
  readonly credentialsFile?: string | undefined;
  readonly caFile?: string | undefined;
  readonly inspectsTls?: boolean | undefined;
  readonly sendResolvedAddress?: boolean | undefined;
  /** Credentials found in the URL itself (system mode's HTTP_PROXY=http://user:pass@host). */
  readonly allowUrlCredentials?: boolean;
}

/** A failure names the settings key at fault when it is one (`url`, `credentialsFile`, `caFile`). */
export type Parsed<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly message: string; readonly key?: 'url' | 'credentialsFile' | 'caFile' | 'auth' };

/** The first non-empty line of a credentials file, `user:password` (the user may be `DOMAIN\user`). */
function readCredentialsLine(file: string): Parsed<string> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    return { ok: false, message: `cannot read credentials file (${(error as NodeJS.ErrnoException).code ?? 'error'})` };
  }
  const line = text.split(/\r?\n/).find((l) => l.trim() !== '')?.trim() ?? '';
  if (!line.includes(':') || line.startsWith(':')) return { ok: false, message: 'credentials file must hold one line user:password' };
  return { ok: true, value: line };
}

export function readCredentialsFile(file: string): Parsed<string> {
  const line = readCredentialsLine(file);
  if (!line.ok) return line;
  return { ok: true, value: `Basic ${Buffer.from(line.value, 'utf8').toString('base64')}` };
}

/**
 * The first non-empty line of an NTLM credentials file: `DOMAIN\user:password`, `user@domain:password`
 * or `user:password` (empty domain: the proxy's default). The password is everything after the first
 * colon. An error message names the expected shape, never the line (it holds the password).
 */
export function readNtlmCredentials(text: string): ProxyNtlmCredentials | string {
  const line = text.replace(/^\uFEFF/, '').split(/\r?\n/).find((l) => l.trim() !== '')?.trim();
  if (line === undefined) return 'the NTLM credentials file is empty; it holds one line DOMAIN\\user:password';
  const colon = line.indexOf(':');
  if (colon < 0) return 'the NTLM credentials line has no colon; it is DOMAIN\\user:password, user@domain:password or user:password';
  const account = line.slice(0, colon);
  const password = line.slice(colon + 1);
  const slash = account.indexOf('\\');
  const at = account.lastIndexOf('@');
  const [domain, user] = slash >= 0 ? [account.slice(0, slash), account.slice(slash + 1)] : at >= 0 ? [account.slice(at + 1), account.slice(0, at)] : ['', account];
  if (user === '') return 'the NTLM credentials line has an empty user name';
  if ((slash >= 0 || at >= 0) && domain === '') return 'the NTLM credentials line has an empty domain before \\ or after @';
  if (password === '') return 'the NTLM credentials line has an empty password';
  return { user, domain, password };
}

export function readCaFile(file: string): Parsed<string> {
  try {
    const pem = readFileSync(file, 'utf8');
    if (!pem.includes('-----BEGIN CERTIFICATE-----')) return { ok: false, message: 'caFile holds no PEM certificate' };
    return { ok: true, value: pem };
  } catch (error) {
    return { ok: false, message: `cannot read caFile (${(error as NodeJS.ErrnoException).code ?? 'error'})` };
  }
}

/** Parses `http://host:port` or `https://host:port` (no path); the only proxy URLs Sluice chains to. */
export function parseUpstream(url: string, settings: UpstreamSettings): Parsed<UpstreamProxy> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { ok: false, key: 'url', message: `"${redactUrl(url)}" is not a URL` };
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    return { ok: false, key: 'url', message: `proxy scheme ${parsed.protocol.replace(':', '')} is not supported (http or https)` };
  }
  if ((parsed.pathname !== '/' && parsed.pathname !== '') || parsed.search !== '' || parsed.hash !== '') {
    return { ok: false, key: 'url', message: 'a proxy URL has no path, query or fragment' };
  }
  const tls = parsed.protocol === 'https:';
  const host = parsed.hostname.replace(/^\[|\]$/g, '');
  if (host === '') return { ok: false, key: 'url', message: 'proxy URL has no host' };
  const port = parsed.port === '' ? (tls ? 443 : 80) : Number(parsed.port);
  let authorization: string | null = null;
  if (parsed.username !== '' || parsed.password !== '') {
    if (settings.allowUrlCredentials !== true) return { ok: false, key: 'url', message: 'put proxy credentials in credentialsFile, not in the URL' };
    authorization = `Basic ${Buffer.from(`${decodeURIComponent(parsed.username)}:${decodeURIComponent(parsed.password)}`).toString('base64')}`;
  }
  const mode = settings.auth;
  let ntlm: ProxyNtlmCredentials | null = null;
  if (settings.credentialsFile !== undefined) {
    if (mode === 'negotiate') return { ok: false, key: 'credentialsFile', message: 'Negotiate uses the service’s own Kerberos credentials (KRB5CCNAME or KRB5_CLIENT_KTNAME), not a credentials file' };
    const line = readCredentialsLine(settings.credentialsFile);
    if (!line.ok) return { ok: false, key: 'credentialsFile', message: line.message };
    if (mode === 'ntlm' || mode === 'auto') {
      const parsedNtlm = readNtlmCredentials(line.value);
      if (typeof parsedNtlm === 'string') return { ok: false, key: 'credentialsFile', message: parsedNtlm };
      ntlm = parsedNtlm;
    }
    // NTLM-only never sends Basic: the password would cross in the clear on an offer downgrade.
    authorization = mode === 'ntlm' ? null : `Basic ${Buffer.from(line.value, 'utf8').toString('base64')}`;
  } else if (mode === 'basic' && authorization === null) {
    return { ok: false, key: 'credentialsFile', message: 'auth basic needs a credentialsFile' };
  } else if (mode === 'ntlm') {
    return { ok: false, key: 'credentialsFile', message: 'auth ntlm needs a credentialsFile (DOMAIN\\user:password)' };
  }
  let ca: string | null = null;
  if (settings.caFile !== undefined) {
    const read = readCaFile(settings.caFile);
    if (!read.ok) return { ok: false, key: 'caFile', message: read.message };
    ca = read.value;
  }
  const hostText = net.isIPv6(host) ? `[${host}]` : host;
  return {
    ok: true,
    value: {
      label: `${tls ? 'https' : 'http'}://${hostText}:${port}`,
      tls,
      host,
      port,
      authorization,
      auth: mode ?? (authorization === null ? 'none' : 'basic'),
      ntlm,
      spn: settings.spn ?? null,
      ca,
      inspectsTls: settings.inspectsTls ?? false,
      sendResolvedAddress: settings.sendResolvedAddress ?? false,
    },
  };
}

/** A proxy URL as it may appear in an error: userinfo removed. */
export function redactUrl(url: string): string {
  return url.replace(/\/\/[^/@]*@/, '//***@');
}
