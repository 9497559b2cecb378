// Reads the PROXY protocol header off an accepted socket (listeners[].proxyProtocol), before anything
// else reads it: only from a trusted peer (anyone else could forge the client address), at most
// MAX_PROXY_HEADER_BYTES, within a deadline. The bytes after the header go back in front of the socket.
import net from 'node:net';
import { parseProxyHeader } from './proxy-protocol.js';

/** `source`: the client address the header carried, or null to keep the peer's (a health check, UNKNOWN). */
export type ProxyHeaderOutcome = { readonly ok: true; readonly source: string | null } | { readonly ok: false; readonly reason: string };

export interface ProxyProtocolGate {
  /** Calls `done` once. On success the socket is paused with the client's first bytes unread. */
  read(socket: net.Socket, done: (outcome: ProxyHeaderOutcome) => void): void;
}

/** `a.b.c.d/n`, `v6/n`, or one address. Checked by the config schema first; throws on anything else. */
export function trustedSourceList(cidrs: readonly string[]): net.BlockList {
  const list = new net.BlockList();
  for (const cidr of cidrs) {
    const [address = '', prefix] = cidr.split('/');
    const family = net.isIPv6(address) ? 'ipv6' : 'ipv4';
    list.addSubnet(address, prefix === undefined ? (family === 'ipv6' ? 128 : 32) : Number(prefix), family);
  }
  return list;
}

export function proxyProtocolGate(trustedSources: readonly string[], timeoutMs: number): ProxyProtocolGate {
  const trusted = trustedSourceList(trustedSources);
  return {
    read(socket, done) {
      const peer = socket.remoteAddress;
      if (peer === undefined || !trusted.check(peer, net.isIPv6(peer) ? 'ipv6' : 'ipv4')) {
        return done({ ok: false, reason: `untrusted source ${peer ?? '(gone)'}: not in proxyProtocol.trustedSources` });
      }
      let buffered: Buffer = Buffer.alloc(0);
      let settled = false;
      const finish = (outcome: ProxyHeaderOutcome): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        socket.removeListener('data', onData);
        socket.removeListener('end', onEnd);
        socket.removeListener('error', onEnd);
        done(outcome);
      };
      // A slowloris header (or none at all) is cut off like a slow request head.
      const timer = setTimeout(() => finish({ ok: false, reason: `no valid PROXY header: none complete within ${timeoutMs} ms` }), timeoutMs);
      timer.unref();
      const onEnd = (): void => finish({ ok: false, reason: 'no valid PROXY header: the connection ended before one was complete' });
      const onData = (chunk: Buffer): void => {
        // Bounded: past MAX_PROXY_HEADER_BYTES the verdict is never `incomplete`.
        buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
        const result = parseProxyHeader(buffered);
        if (result.state === 'incomplete') return;
        if (result.state === 'invalid') return finish({ ok: false, reason: `no valid PROXY header: ${result.reason}` });
        socket.pause();
        const rest = buffered.subarray(result.header.length);
        if (rest.length > 0) socket.unshift(rest);
        finish({ ok: true, source: result.header.source?.address ?? null });
      };
      socket.on('data', onData);
      socket.once('end', onEnd);
      socket.once('error', onEnd);
    },
  };
}
