// Keeps the answers on one client connection in request order when node:http hands the socket over (a
// CONNECT or Upgrade) or gives up on a head (a parse error) while responses to earlier pipelined
// requests are still being written. Never reads from the socket and never writes to it itself.
import type http from 'node:http';
import type net from 'node:net';

/** The response to the latest request node:http parsed on the connection. */
const LAST_RESPONSE = Symbol('sluice.lastResponse');
type TrackedSocket = net.Socket & { [LAST_RESPONSE]?: http.ServerResponse | null };
/** node:http's own field: the response being written on a socket (queued ones follow it, in order). */
type HttpSocket = net.Socket & { _httpMessage?: http.ServerResponse | null };

/** Notes the response to the latest request on `socket` (null at accept). */
export function noteResponse(socket: net.Socket, res: http.ServerResponse | null): void {
  (socket as TrackedSocket)[LAST_RESPONSE] = res;
}

/**
 * The response to the latest earlier request on this connection while it is not fully written, if any.
 * node:http writes responses in request order, so once the latest one is written, all are.
 */
export function pendingResponse(socket: net.Socket): http.ServerResponse | null {
  const last = (socket as TrackedSocket)[LAST_RESPONSE] ?? null;
  return last === null || last.writableFinished ? null : last;
}

/**
 * Answers a CONNECT, an Upgrade or a malformed head that was pipelined behind requests whose responses
 * are still pending (review 2026-12 finding 14: the GET's 200 was lost behind the CONNECT's 403).
 *
 * RFC 9112 §9.3.2: a server MUST send the responses to pipelined requests in the order it received the
 * requests, and may work on them in parallel only if all have safe methods; CONNECT is not safe. So the
 * CONNECT is answered in order rather than refused: it is identified, authorized and dialed only once
 * every response ahead of it is written, then handled as if it had come alone, and nothing the client
 * pipelined is lost. A refusal would have had to wait for the same responses anyway, since they go first.
 *
 * Until then nothing after the CONNECT head is read: node:http has detached from the socket and left it
 * paused, and the bytes that came with the head wait in the caller's `head` buffer. So no tunnel byte is
 * parsed as a request or relayed, and no response can be written into a tunnel. If a response ahead of
 * it does not finish (the client left, the origin failed mid-body, or it ended the connection with
 * `Connection: close`), the connection is closed and `answer` finds the socket destroyed.
 */
export function answerInOrder(socket: net.Socket, last: http.ServerResponse, answer: () => void): void {
  if (last.destroyed) {
    // Failed before it was written (its 'close' may be past): the connection is going anyway.
    socket.destroy();
    return answer();
  }
  // On handing the socket over, node:http removed its 'drain' listener, which is what tells a response
  // under backpressure to go on (ResponseRelay waits for it): pass 'drain' on meanwhile. (After a parse
  // error node:http still listens, and this finds nothing left to do.)
  socket.on('drain', resumeResponse);
  last.once('close', () => {
    socket.removeListener('drain', resumeResponse);
    // node:http re-armed its keep-alive timeout when the response finished: not for what comes next.
    socket.setTimeout(0);
    if (!last.writableFinished || socket.writableEnded) socket.destroy();
    answer();
  });
}

function resumeResponse(this: HttpSocket): void {
  const current = this._httpMessage;
  if (current !== undefined && current !== null && current.writableNeedDrain) current.emit('drain');
}

/**
 * Runs `go` once the response ahead of a pipelined request is fully written on a connection that stays
 * open, else `gone`: a response that failed, or ended the connection (`Connection: close`), ends what
 * was pipelined behind it too.
 */
export function afterResponse(last: http.ServerResponse, socket: net.Socket, go: () => void, gone: () => void): void {
  if (last.destroyed) return gone();
  last.once('close', () => (last.writableFinished && !socket.destroyed && !socket.writableEnded ? go() : gone()));
}
