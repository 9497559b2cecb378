// Builds UpstreamProxy values from config: the proxy URL, its Basic credentials (a file holding one line
// `user:password`) and its extra trusted CA. Credentials go only into this proxy's Proxy-Authorization.
import { readFileSync } from 'node:fs';
import net from 'node:net';
import type { UpstreamProxy } from '../core/index.js';

export interface UpstreamSettings {
  readonly credentialsFile?: string | undefined;
  readonly caFile?: string | undefined;
  readonly inspectsTls?: boolean | undefined;
  readonly sendResolvedAddress?: boolean | undefined;
  /** Credentials found in the URL itself (system mode's HTTP_PROXY=http://user:pass@host). */
  readonly allowUrlCredentials?: boolean;
}

/** A failure names the settings key at fault when it is one (`url`, `credentialsFile`, `caFile`). */
export type Parsed<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly message: string; readonly key?: 'url' | 'credentialsFile' | 'caFile' };

export function readCredentialsFile(file: string): Parsed<string> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    return { ok: false, message: `cannot read credentials file (${(error as NodeJS.ErrnoException).code ?? 'error'})` };
  }
  const line = text.split(/\r?\n/).find((l) => l.trim() !== '')?.trim() ?? '';
  if (!line.includes(':') || line.startsWith(':')) return { ok: false, message: 'credentials file must hold one line user:password' };
  return { ok: true, value: `Basic ${Buffer.from(line, 'utf8').toString('base64')}` };
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
  if (settings.credentialsFile !== undefined) {
    const creds = readCredentialsFile(settings.credentialsFile);
    if (!creds.ok) return { ok: false, key: 'credentialsFile', message: creds.message };
    authorization = creds.value;
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
