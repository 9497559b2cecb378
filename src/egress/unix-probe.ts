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
