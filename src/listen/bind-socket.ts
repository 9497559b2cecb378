// Binds a net.Server (or an http.Server) to a listen address: TCP `host:port` at once, reporting the
// address actually bound, or a Unix socket `unix:/path` through socket-file.ts, so that its file appears
// with the mode Sluice chose rather than the umask's. The only place in src/ that calls listen(), with
// socket-file.ts (docs/architecture.md, rule 3); sandbox-init.ts, which imports only builtins, aside.
import type net from 'node:net';
import { isUnixListen, listenHost } from '../config/index.js';
import { tcpListenError } from './listen-error.js';
import { bindUnixSocket, type SocketFile, type UnixSocketProbe } from './socket-file.js';

export interface BoundSocket {
  /** `host:port` with the real port (`[v6]:port` for IPv6), or `unix:/path` as given. */
  readonly address: string;
  /** The Unix socket file and its inode, for removeSocketFile on close; null for TCP. */
  readonly socketFile: SocketFile | null;
}

export interface UnixSocketOptions {
  /** null: mode 0600, Sluice's user only; a gid: mode 0660, owned by that group. */
  readonly gid: number | null;
  /** Tells a live socket at the path from one left by a crash, which alone is removed. */
  readonly probe: UnixSocketProbe;
}

/** Binds `server` to `listen` (`host:port`, `[v6]:port` or `unix:/path`); `unix` applies to a Unix socket only. */
export async function bindSocket(server: net.Server, listen: string, unix: UnixSocketOptions): Promise<BoundSocket> {
  if (isUnixListen(listen)) {
    return { address: listen, socketFile: await bindUnixSocket(server, listen.slice('unix:'.length), unix.gid, unix.probe) };
  }
  const port = Number(listen.slice(listen.lastIndexOf(':') + 1));
  return { address: await bindTcp(server, listenHost(listen), port, listen), socketFile: null };
}

/**
 * Listens on TCP `host`:`port` (exclusive: never a handle shared with cluster workers) and returns the
 * address bound, `host:port` or `[v6]:port`, with the real port when `port` is 0. A port that is taken,
 * privileged or on no interface of this host rejects with a ListenError naming the address (its `code`
 * is the errno code) that names it as `listen` (as the config wrote it), and leaves no 'error' listener behind.
 */
export async function bindTcp(server: net.Server, host: string, port: number, listen = `${host.includes(':') ? `[${host}]` : host}:${port}`): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    const refuse = (error: NodeJS.ErrnoException): void => reject(tcpListenError(listen, port, error));
    server.once('error', refuse);
    server.listen({ host, port, exclusive: true }, () => {
      server.removeListener('error', refuse);
      resolve();
    });
  });
  const bound = server.address() as net.AddressInfo;
  return bound.family === 'IPv6' ? `[${bound.address}]:${bound.port}` : `${bound.address}:${bound.port}`;
}
