// Binds one proxy listener's net.Server: TCP at once, a Unix socket through socket-file.ts so that its
// file appears with Sluice's mode (and `socketGroup`) rather than the umask's.
import type net from 'node:net';
import type { ListenerSection } from '../config/index.js';
import { bindUnixSocket, type SocketFile } from './socket-file.js';
import { resolveSocketGroup } from './socket-group.js';

/** TCP: listen at once. Unix: the socket file appears with its final mode (socket-file.ts). */
export async function bindListener(server: net.Server, section: ListenerSection): Promise<{ address: string; socketFile: SocketFile | null }> {
  const listen = section.listen;
  if (listen.startsWith('unix:')) {
    const gid = section.socketGroup === undefined ? null : await resolveSocketGroup(section.socketGroup);
    if (gid === null && section.socketGroup !== undefined) throw new Error(`listener ${section.name}: no group named ${section.socketGroup}`);
    return { address: listen, socketFile: await bindUnixSocket(server, listen.slice(5), gid) };
  }
  const colon = listen.lastIndexOf(':');
  const host = listen.slice(0, colon).replace(/^\[|\]$/g, '');
  const port = Number(listen.slice(colon + 1));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host, port, exclusive: true }, () => {
      server.removeListener('error', reject);
      resolve();
    });
  });
  const address = server.address() as net.AddressInfo;
  return { address: address.family === 'IPv6' ? `[${address.address}]:${address.port}` : `${address.address}:${address.port}`, socketFile: null };
}
