// Reads a listen address (`host:port`, `[v6]:port`, `unix:/path`) without touching the network: is it a
// Unix socket, and is a TCP one loopback-only? Pure; shared by the config checks and the admin API.
import net from 'node:net';

const LOOPBACK_V6 = new net.BlockList();
LOOPBACK_V6.addAddress('::1', 'ipv6');

export function isUnixListen(listen: string): boolean {
  return listen.startsWith('unix:');
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
