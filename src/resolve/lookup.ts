// LookupAll implementations: the system resolver (getaddrinfo, honours /etc/hosts) or explicit DNS
// servers (with TTLs). Both are bounded by the caller's signal. Only this file talks to node:dns.
import dns from 'node:dns';
import { ProxyError, type LookupAll, type LookupAnswer } from '../core/index.js';

function abortable<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(new ProxyError('ERR_DNS_TIMEOUT', 'lookup timed out'));
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(new ProxyError('ERR_DNS_TIMEOUT', 'lookup timed out'));
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(toDnsError(error));
      },
    );
  });
}

export function toDnsError(error: unknown): ProxyError {
  if (error instanceof ProxyError) return error;
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'ENOTFOUND' || code === 'ENODATA' || code === dns.NOTFOUND || code === dns.NODATA) {
    return new ProxyError('ERR_DNS_NO_ADDRESS', 'name has no address', { cause: error });
  }
  if (code === 'ETIMEOUT' || code === dns.TIMEOUT) return new ProxyError('ERR_DNS_TIMEOUT', 'lookup timed out', { cause: error });
  return new ProxyError('ERR_DNS_FAILED', `lookup failed (${code ?? 'unknown'})`, { cause: error });
}

export function createSystemLookup(ttlSeconds: number): LookupAll {
  return async function systemLookup(host, signal) {
    const answers = await abortable(dns.promises.lookup(host, { all: true, verbatim: true }), signal);
    return answers.map((a): LookupAnswer => ({ address: a.address, family: a.family === 6 ? 6 : 4, ttlSeconds }));
  };
}

export function createServersLookup(servers: readonly string[], timeoutMs: number): LookupAll {
  const resolver = new dns.promises.Resolver({ timeout: timeoutMs, tries: 1 });
  resolver.setServers([...servers]);
  return async function serversLookup(host, signal) {
    const [v4, v6] = await abortable(Promise.allSettled([resolver.resolve4(host, { ttl: true }), resolver.resolve6(host, { ttl: true })]), signal);
    const answers: LookupAnswer[] = [];
    if (v4.status === 'fulfilled') for (const a of v4.value) answers.push({ address: a.address, family: 4, ttlSeconds: a.ttl });
    if (v6.status === 'fulfilled') for (const a of v6.value) answers.push({ address: a.address, family: 6, ttlSeconds: a.ttl });
    if (answers.length === 0) {
      const failure = v4.status === 'rejected' ? v4.reason : v6.status === 'rejected' ? v6.reason : undefined;
      throw toDnsError(failure ?? Object.assign(new Error('no address'), { code: 'ENODATA' }));
    }
    return answers;
  };
}
