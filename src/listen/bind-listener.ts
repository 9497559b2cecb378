// Binds one `listeners[]` section's server: TCP at once, a Unix socket with mode 0600, or 0660 and the
// group `socketGroup` names (bind-socket.ts, socket-file.ts).
import type net from 'node:net';
import type { ListenerSection } from '../config/index.js';
import { bindSocket, type BoundSocket } from './bind-socket.js';
import type { UnixSocketProbe } from './socket-file.js';
import { resolveSocketGroup } from './socket-group.js';

/** A socketGroup that names no group binds nothing: the socket never falls back to another mode. */
export async function bindListener(server: net.Server, section: ListenerSection, probe: UnixSocketProbe): Promise<BoundSocket> {
  const gid = section.socketGroup === undefined ? null : await resolveSocketGroup(section.socketGroup);
  if (gid === null && section.socketGroup !== undefined) throw new Error(`listener ${section.name}: no group named ${section.socketGroup}`);
  return bindSocket(server, section.listen, { gid, probe });
}
