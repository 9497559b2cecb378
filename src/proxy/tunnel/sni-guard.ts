// The domain-fronting guard (grant `tls.requireSniMatch`): after 200 to CONNECT, read the client's
// ClientHello from the tunnel's first bytes and refuse the tunnel if its server name is not the
// authorized host (or is absent for a name destination). Nothing is decrypted, altered or forwarded
// before the check; the bytes read are handed on unchanged once it passes.
import type net from 'node:net';
import { MAX_CLIENT_HELLO_BYTES, parseClientHello, readFirstBytes } from '../../relay/index.js';
import type { CanonicalDestination } from '../../core/index.js';

export type SniCheck = { readonly ok: true; readonly head: Buffer } | { readonly ok: false; readonly detail: string };

type ClientHelloRead = { buffer: Buffer; serverName: string | null } | string;

export function readClientHello(socket: net.Socket, first: Buffer, timeoutMs: number): Promise<ClientHelloRead> {
  return readFirstBytes<ClientHelloRead>(socket, first, timeoutMs, (buffer) => {
    const parsed = parseClientHello(buffer);
    if (parsed.kind === 'hello') return { buffer, serverName: parsed.serverName };
    if (parsed.kind === 'not_tls') return 'the first bytes are not a TLS ClientHello';
    return buffer.length >= MAX_CLIENT_HELLO_BYTES ? 'ClientHello too large' : null;
  }, { timedOut: 'no ClientHello within the handshake timeout', closed: 'the client closed before sending a ClientHello' });
}

export async function checkSni(socket: net.Socket, first: Buffer, dest: CanonicalDestination, timeoutMs: number): Promise<SniCheck> {
  const hello = await readClientHello(socket, first, timeoutMs);
  if (typeof hello === 'string') return { ok: false, detail: hello };
  const name = hello.serverName?.toLowerCase().replace(/\.$/, '') ?? null;
  if (dest.hostKind !== 'name') {
    // RFC 6066 §3: IP literals are not sent as server names; any name here is fronting.
    return name === null ? { ok: true, head: hello.buffer } : { ok: false, detail: `server name ${name} on an address destination` };
  }
  if (name === null) return { ok: false, detail: 'no server name for a name destination' };
  if (name !== dest.host) return { ok: false, detail: `server name ${name.slice(0, 253)} is not ${dest.host}` };
  return { ok: true, head: hello.buffer };
}
