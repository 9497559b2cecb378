// Reads a listen address (`host:port`, `[v6]:port`, `unix:/path`) without touching the network: is it a
// Unix socket, and is a TCP one loopback-only? Pure; shared by the config checks and the admin API.
import net from 'node:net';
import path from 'node:path';

const LOOPBACK_V6 = new net.BlockList();
LOOPBACK_V6.addAddress('::1', 'ipv6');

export function isUnixListen(listen: string): boolean {
  return listen.startsWith('unix:');
}

/**
 * A `unix:` address with its path resolved against `cwd` (Sluice's working directory), any other as
 * given. A relative socket path is bound relative, and /proc/net/unix then lists it relative, where
 * `sluice run`'s socket mask never sees it (issue 23, review 2026-12-04 finding 3): every
 * unix: listen is resolved where it is accepted, config and admin API alike, and stored so.
 */
export function resolveListen(listen: string, cwd: string): string {
  return isUnixListen(listen) ? `unix:${path.resolve(cwd, listen.slice('unix:'.length))}` : listen;
}

/** The host part of `host:port` or `[v6]:port`, brackets removed. */
export function listenHost(listen: string): string {
  return listen.slice(0, listen.lastIndexOf(':')).replace(/^\[|\]$/g, '');
}

/**
 * True for a TCP address that only this host can reach: an IPv4 literal in 127.0.0.0/8 or the IPv6
 * literal ::1. Names (even `localhost`, which a hosts file may point anywhere), 0.0.0.0, :: and every
 * other address are not: a listener there is reachable from the network (review 2026-12, finding 12).
 */
export function isLoopbackTcpListen(listen: string): boolean {
  if (isUnixListen(listen)) return false;
  const host = listenHost(listen);
  if (net.isIPv4(host)) return host.split('.')[0] === '127';
  return net.isIPv6(host) && LOOPBACK_V6.check(host, 'ipv6');
}

export const NON_LOOPBACK_DEDICATED_MESSAGE =
  'a listener bound to a grant needs no token, so it must be unix:/path or a loopback IP literal (127.0.0.0/8 or [::1]); anyone who can reach another address acts for the grant';

/**
 * What is wrong with a listen address as written, or null: the checks that need no network, so that
 * `check-config` refuses what `listen()` would (issue 17, item 3). A port above 65535 used to pass
 * the file check and fail at bind with a RangeError; `unix:` alone resolved to the working directory.
 */
export function listenAddressProblem(listen: string): string | null {
  if (isUnixListen(listen)) {
    const file = listen.slice('unix:'.length);
    if (file.trim() === '') return 'unix: needs the socket file path, such as unix:./state/proxy.sock';
    if (file.includes('\0')) return 'a socket path cannot contain a NUL byte';
    if (file.endsWith('/') || file === '.' || file === '..' || file.endsWith('/.') || file.endsWith('/..')) return `${file} names a directory; give the socket file's path inside it`;
    return null;
  }
  if (!/^(\[[0-9a-fA-F:.]+\]|[^:\s[\]]+):\d{1,5}$/.test(listen)) return 'expected host:port, [v6]:port or unix:/path.sock';
  const port = Number(listen.slice(listen.lastIndexOf(':') + 1));
  if (port > 65535) return `port ${port} is out of range (0-65535; 0 picks a free port)`;
  const host = listenHost(listen);
  if (listen.startsWith('[') && !net.isIPv6(host)) return `[${host}] is not an IPv6 address`;
  return null;
}
