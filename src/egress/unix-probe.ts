// Tells whether something answers on a Unix socket path (a live Sluice, or a stale file from a crash).
import net from 'node:net';

export function isUnixSocketAlive(file: string, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = net.connect(file);
    const timer = setTimeout(() => finish(false), timeoutMs);
    function finish(alive: boolean): void {
      clearTimeout(timer);
      probe.destroy();
      resolve(alive);
    }
    probe.once('connect', () => finish(true));
    probe.once('error', () => finish(false));
  });
}

/** Connects to a Unix socket (a grant's dedicated listener, for `sluice bridge`). */
export function connectUnix(file: string, timeoutMs = 5000): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ path: file, allowHalfOpen: true });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer on ${file} within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      resolve(socket);
    });
    socket.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
  });
}
