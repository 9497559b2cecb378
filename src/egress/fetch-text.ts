// Fetches a small text resource (a PAC file) over the direct route, bounded in time and size. Route
// infrastructure configured by the operator, never a destination chosen by a principal.
import http from 'node:http';
import https from 'node:https';
import tls from 'node:tls';

const MAX_BYTES = 1024 * 1024;

/**
 * GETs `url` (200 only, at most 1 MiB). `ca`: an extra trusted root (PEM) for an `https://` URL, such as
 * the enterprise CA of route.pac.caFile; added to the system roots, as for an HTTPS upstream proxy.
 */
export function fetchText(url: string, timeoutMs: number, ca: string | null = null): Promise<string> {
  return new Promise((resolve, reject) => {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      reject(new Error('not a URL'));
      return;
    }
    const client = parsed.protocol === 'https:' ? https : parsed.protocol === 'http:' ? http : null;
    if (client === null) {
      reject(new Error(`unsupported scheme ${parsed.protocol}`));
      return;
    }
    const trust = ca !== null && client === https ? { ca: [...tls.rootCertificates, ca] } : {};
    const req = client.get(parsed, { timeout: timeoutMs, agent: false, ...trust }, (res) => {
      if (res.statusCode !== 200) {
        res.resume();
        reject(new Error(`HTTP ${res.statusCode ?? 0}`));
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_BYTES) req.destroy(new Error('PAC larger than 1 MiB'));
        else chunks.push(chunk);
      });
      res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' })));
    req.on('error', reject);
  });
}
