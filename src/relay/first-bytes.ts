// Waits for the first bytes a client sends into a tunnel until `decide` can tell what they are: the
// domain-fronting guard's ClientHello (proxy/tunnel/sni-guard.ts) and a mediated tunnel's request line
// (proxy/tunnel/tunnel-start.ts). Never forwards or alters a byte; leaves the socket paused with what it read.

/** What the reader needs of a socket (a net.Socket). */
export interface FirstBytesSocket {
  readonly destroyed: boolean;
  on(event: 'data', listener: (chunk: Buffer) => void): unknown;
  once(event: 'end' | 'close', listener: () => void): unknown;
  removeListener(event: 'data' | 'end' | 'close', listener: (...args: never[]) => void): unknown;
  pause(): unknown;
  resume(): unknown;
}

export interface FirstBytesEnds<T> {
  /** The answer when nothing decidable came within the timeout. */
  readonly timedOut: T;
  /** The answer when the client ended or reset the connection first ('close' without 'end' too). */
  readonly closed: T;
}

/**
 * Resolves with `decide(bytes)` once it is not null, with everything read so far (starting with
 * `first`, what came with the request head); or with `ends.timedOut` after `timeoutMs`, or `ends.closed`.
 */
export function readFirstBytes<T>(socket: FirstBytesSocket, first: Buffer, timeoutMs: number, decide: (bytes: Buffer) => T | null, ends: FirstBytesEnds<T>): Promise<T> {
  return new Promise((resolve) => {
    let bytes = first;
    let timer: NodeJS.Timeout | null = null;
    const done = (result: T): void => {
      if (timer !== null) clearTimeout(timer);
      socket.removeListener('data', onData);
      socket.removeListener('end', onEnd);
      socket.removeListener('close', onEnd);
      socket.pause();
      resolve(result);
    };
    const check = (): boolean => {
      const decided = decide(bytes);
      if (decided === null) return false;
      done(decided);
      return true;
    };
    function onData(chunk: Buffer): void {
      bytes = bytes.length === 0 ? chunk : Buffer.concat([bytes, chunk]);
      check();
    }
    function onEnd(): void {
      done(ends.closed);
    }
    if (bytes.length > 0 && check()) return;
    if (socket.destroyed) return done(ends.closed);
    timer = setTimeout(() => done(ends.timedOut), timeoutMs);
    socket.on('data', onData);
    // A reset ends the wait at once ('close' without 'end'): nothing dialed is held for the timeout.
    socket.once('end', onEnd);
    socket.once('close', onEnd);
    socket.resume();
  });
}
