// An address the host would not let Sluice listen on, worded for an operator (`127.0.0.1:22080 is in
// use …`) rather than as libuv's `listen EADDRINUSE: address already in use`. The caller that knows the
// config key prefixes it (app.ts: `listeners[0].listen: …`); nothing here knows keys.

export class ListenError extends Error {
  constructor(
    /** The address as the caller asked for it: `host:port`, `[v6]:port` or `unix:/path`. */
    readonly listen: string,
    /** The errno code of the refusal (`EADDRINUSE`, `EACCES`, …), when the kernel gave one. */
    readonly code: string | undefined,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** The wording of an in-use refusal, TCP port or Unix socket alike, so start and reload say the same. */
export function inUseMessage(listen: string): string {
  return `${listen} is in use (is another sluice running?)`;
}

/** Below 1024 a port is privileged (ip(7)): without CAP_NET_BIND_SERVICE, bind() answers EACCES. */
const FIRST_UNPRIVILEGED_PORT = 1024;

/** listen()'s error on TCP `listen` as a ListenError, or as it came for a refusal without a better word. */
export function tcpListenError(listen: string, port: number, error: NodeJS.ErrnoException): Error {
  switch (error.code) {
    case 'EADDRINUSE':
      return new ListenError(listen, error.code, inUseMessage(listen), { cause: error });
    case 'EACCES':
      return new ListenError(
        listen,
        error.code,
        port > 0 && port < FIRST_UNPRIVILEGED_PORT
          ? `${listen}: permission denied: a port below ${FIRST_UNPRIVILEGED_PORT} needs root or CAP_NET_BIND_SERVICE; choose a port from ${FIRST_UNPRIVILEGED_PORT} up`
          : `${listen}: permission denied`,
        { cause: error },
      );
    case 'EADDRNOTAVAIL':
      return new ListenError(listen, error.code, `${listen}: no interface of this host has that address`, { cause: error });
    default:
      return error;
  }
}
