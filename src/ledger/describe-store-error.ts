// What went wrong with the shared ledger store, in Sluice's words (UX review 2026-12-04 finding 8): the
// operational log, `sluice start` and the admin API's 503 answers say `connection refused` or
// `authentication failed (WRONGPASS)`, never ioredis' own advice about its options. ioredis fails a
// command on a lost connection with a message about its queue ("Stream isn't writeable and
// enableOfflineQueue options is false", "Reached the max retries per request limit") and reports the
// cause, such as ECONNREFUSED, only as an 'error' event: the store keeps the last one
// (RedisLedgerStore.lastConnectionError) and it is described in place of the queue message.

/** A store that remembers why its connection last failed (redis-store.ts). */
export interface ConnectionErrorSource {
  lastConnectionError?(): unknown;
}

/** Socket and name-lookup codes (Node's `error.code`), as an operator reads them. */
const CODES: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'connection refused',
  ETIMEDOUT: 'connection timed out',
  ECONNRESET: 'connection reset by the server',
  EPIPE: 'connection closed by the server',
  ECONNABORTED: 'connection aborted',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  EHOSTDOWN: 'host down',
  ENOTFOUND: 'host name not found',
  EAI_AGAIN: 'host name lookup failed for now (EAI_AGAIN)',
  EADDRNOTAVAIL: 'address not available',
};

/** Redis error replies (the reply's first word), as an operator reads them. */
const REPLIES: Readonly<Record<string, string>> = {
  WRONGPASS: 'authentication failed: wrong user name or password (WRONGPASS)',
  NOAUTH: 'authentication failed: the server wants a password and none was given (NOAUTH)',
  NOPERM: 'permission denied by the server’s ACL (NOPERM)',
  READONLY: 'the server is a read-only replica, not the primary: a failover under way, or the URL names a replica (READONLY)',
  MASTERDOWN: 'the replica lost its primary (MASTERDOWN)',
  LOADING: 'the server is still loading its data (LOADING)',
  BUSY: 'the server is busy running a script (BUSY)',
  OOM: 'the server is out of memory (OOM)',
  MISCONF: 'the server refuses writes: it cannot save its data (MISCONF)',
  NOSCRIPT: 'the server lost a script (NOSCRIPT)',
  CLUSTERDOWN: 'the server is a Redis Cluster node, which is unsupported (CLUSTERDOWN)',
  MOVED: 'the server is a Redis Cluster node, which is unsupported (MOVED)',
};

/** ioredis' messages for a command that failed because the connection is down or went down. */
const CONNECTION_DOWN = [
  "Stream isn't writeable",
  'Reached the max retries per request limit',
  'Connection is closed.',
  'Command aborted due to connection close',
];

const TLS_CODE = /^(ERR_TLS_|ERR_SSL_|EPROTO$|CERT_|DEPTH_ZERO_SELF_SIGNED_CERT$|SELF_SIGNED_CERT_IN_CHAIN$|UNABLE_TO_|ERR_OSSL_)/;

function describeCode(code: string, message: string): string | null {
  const known = CODES[code];
  if (known !== undefined) return known;
  // Node's TLS messages are its own (not a library's options) and say what failed: kept with the code.
  if (TLS_CODE.test(code)) return `TLS failed: ${message.replace(/^(write|read) /, '')} (${code})`;
  return null;
}

/** The cause in `error`, or null when it only says that the connection is down (or is not recognised). */
function describeOwn(error: unknown): string | null {
  if (!(error instanceof Error)) return error === undefined || error === null ? null : String(error);
  const code = (error as NodeJS.ErrnoException).code;
  if (typeof code === 'string') {
    const described = describeCode(code, error.message);
    if (described !== null) return described;
  }
  const message = error.message;
  if (error.name === 'ReplyError' || /^[A-Z]{3,}( |$)/.test(message)) {
    const word = message.split(' ', 1)[0] ?? '';
    const known = REPLIES[word];
    if (known !== undefined) return known;
    // "ERR AUTH <password> called without any password configured" (Redis 6+) and older wordings.
    if (/^ERR (AUTH|Client sent AUTH)/.test(message)) return 'authentication failed: the server has no password set (ERR AUTH)';
    if (error.name === 'ReplyError') return `the server answered an error (${message.split('\n', 1)[0]?.slice(0, 200) ?? word})`;
  }
  if (CONNECTION_DOWN.some((m) => message.startsWith(m))) return null;
  if (message === 'Command timed out') return 'the server did not answer in time';
  // ioredis' own connect timeout carries no code.
  if (message === 'connect ETIMEDOUT') return CODES['ETIMEDOUT'] ?? null;
  // Sentinel: "All sentinels are unreachable … Last error: connect ECONNREFUSED 127.0.0.1:26379".
  const sentinels = /^All sentinels are unreachable.*?(?: Last error: (.*))?$/s.exec(message);
  if (sentinels !== null) {
    const last = sentinels[1];
    if (last === undefined) return 'no sentinel named the group’s primary';
    const lastCode = /\b(E[A-Z_]+|ERR_[A-Z_]+)\b/.exec(last)?.[1];
    const cause = (lastCode === undefined ? null : describeCode(lastCode, last)) ?? describeOwn(new Error(last));
    return `no sentinel answered${cause === null ? '' : ` (${cause})`}`;
  }
  return message;
}

/**
 * The cause of a failed store call as a short phrase for `ledger store … unreachable (<phrase>)`:
 * `connection refused`, `host name not found`, `authentication failed: … (WRONGPASS)`, `TLS failed: …`,
 * or `the connection is down` when nothing more is known. Sluice's own errors keep their message. Never
 * holds a password: the phrases are fixed, and Redis' and Node's messages never carry the URL's userinfo.
 */
export function describeStoreError(error: unknown, store?: ConnectionErrorSource): string {
  const own = describeOwn(error);
  if (own !== null) return own;
  const cause = describeOwn(store?.lastConnectionError?.());
  return cause ?? 'the connection is down';
}
