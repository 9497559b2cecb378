// The domain-fronting guard (grant `tls.requireSniMatch`): after 200 to CONNECT, read the client's
// ClientHello from the tunnel's first bytes and refuse the tunnel if its server name is not the
// authorized host (or is absent for a name destination). Nothing is decrypted, altered or forwarded
// before the check; the bytes read are handed on unchanged once it passes.
import type net from 'node:net';
import { MAX_CLIENT_HELLO_BYTES, parseClientHello } from '../relay/index.js';
import type { CanonicalDestination } from '../core/index.js';

export type SniCheck = { readonly ok: true; readonly head: Buffer } | { readonly ok: false; readonly detail: string };

export function readClientHello(socket: net.Socket, first: Buffer, timeoutMs: number): Promise<{ buffer: Buffer; serverName: string | null } | string> {
  return new Promise((resolve) => {
    let buffer = first;
    const timer = setTimeout(() => done('no ClientHello within the handshake timeout'), timeoutMs);
    function done(result: { buffer: Buffer; serverName: string | null } | string): void {
      clearTimeout(timer);
      socket.removeListener('data', onData);
      socket.removeListener('end', onEnd);
      socket.removeListener('close', onEnd);
      socket.pause();
      resolve(result);
    }
    function check(): boolean {
      const parsed = parseClientHello(buffer);
      if (parsed.kind === 'hello') done({ buffer, serverName: parsed.serverName });
      else if (parsed.kind === 'not_tls') done('the first bytes are not a TLS ClientHello');
      else if (buffer.length >= MAX_CLIENT_HELLO_BYTES) done('ClientHello too large');
      else return false;
      return true;
    }
    function onData(chunk: Buffer): void {
      buffer = Buffer.concat([buffer, chunk]);
      check();
    }
    function onEnd(): void {
      done('the client closed before sending a ClientHello');
    }
    if (buffer.length > 0 && check()) return;
    socket.on('data', onData);
    // A reset ends the wait at once ('close' without 'end'): the dialed upstream is not held for the timeout.
    socket.once('end', onEnd);
    socket.once('close', onEnd);
    if (socket.destroyed) return done('the client closed before sending a ClientHello');
    socket.resume();
  });
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
