// What is the admin socket's own in binding it: its path resolved, refusals worded for `admin.listen`,
// and the `secure` gate. The binding itself (0700 parent created, 0600 file bound in a private directory
// and linked into place, stale file removed, TCP) is listen/'s, shared with the proxy's listeners (ADR 0014).
import type http from 'node:http';
import path from 'node:path';
import { isUnixListen } from '../config/index.js';
import { ListenError, SocketFileError, bindSocket, type BoundSocket, type UnixSocketProbe } from '../listen/index.js';

/**
 * Listens on `listen`. For a Unix socket, `secure` flips to true only once the file is at its path with
 * mode 0600; the server drops any connection accepted before.
 */
export async function bindAdminServer(server: http.Server, listen: string, probe: UnixSocketProbe, secure: { value: boolean }): Promise<BoundSocket> {
  const target = isUnixListen(listen) ? `unix:${path.resolve(listen.slice('unix:'.length))}` : listen;
  const bound = await bindSocket(server, target, { gid: null, probe }).catch((error: unknown) => {
    throw adminRefusal(error);
  });
  secure.value = true;
  return bound;
}

/**
 * listen/ words a refusal for a listener (`unix:<path>: …`); the admin socket's says "admin socket". Each
 * stays a ListenError, which app.ts names by its key (`admin.listen: …`), as a TCP port in use is.
 */
function adminRefusal(error: unknown): unknown {
  if (!(error instanceof SocketFileError)) return error;
  const reworded = (message: string): ListenError => new ListenError(error.listen, error.code, message, { cause: error });
  switch (error.refusal) {
    case 'not-a-socket':
      return reworded(`admin socket path ${error.file} exists and is not a socket; remove it or choose another admin.listen`);
    case 'in-use':
      return reworded(`admin socket ${error.file} is in use (is another sluice running?)`);
    case 'too-long':
      return reworded(`admin socket path ${error.file} is too long to bind privately first; choose a shorter admin.listen`);
    default:
      // A path that appeared since the stale check: link()'s own error, as before.
      return error.cause ?? error;
  }
}
