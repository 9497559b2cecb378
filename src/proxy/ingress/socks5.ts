// A SOCKS5 listener (RFC 1928) on the same pipeline as HTTP CONNECT: username/password authentication
// (RFC 1929) carries grant id and token, or a dedicated listener names the grant; CONNECT only (BIND and
// UDP ASSOCIATE are refused, 0x07); domain and IP address types are canonicalized and authorized
// exactly like CONNECT targets; reply codes come from the reason codes.
import type net from 'node:net';
import { canonicalize } from '../../authority/index.js';
import { socksReplyCode } from '../../core/index.js';
import { HandshakeReader, negotiateSocks5, readSocks5Request, socks5Reply } from '../../listen/index.js';
import type { ConnectionContext } from '../hop/connection-context.js';
import { decideHop, lookupHop } from '../hop/decide-hop.js';
import type { Decision } from '../hop/decision.js';
import { Hop } from '../hop/hop.js';
import { identifyPresented } from '../hop/identify-hop.js';
import { mediateTunnel, mediatingRule } from '../tunnel/mediated-tunnel.js';
import { runHop } from '../hop/run-hop.js';
import type { ProxyRuntime } from '../hop/runtime.js';
import { answerTunnel, tunnelStages, type TunnelClient, type TunnelResponder } from '../tunnel/tunnel-stages.js';

const SOCKS_RESPONDER: TunnelResponder = {
  established: (socket) => void socket.write(socks5Reply(0x00)),
  deny: (socket, decision) => {
    if (!socket.destroyed) socket.end(socks5Reply(socksReplyCode(decision.reason)));
  },
};

export async function onSocksConnection(rt: ProxyRuntime, ctx: ConnectionContext, socket: net.Socket): Promise<void> {
  socket.on('error', () => socket.destroy());
  const timer = setTimeout(() => socket.destroy(), rt.handshakeTimeoutMs);
  const r = new HandshakeReader(socket);
  const auth = await negotiateSocks5(ctx.identity.boundGrant !== null, socket, r);
  if (auth === null) {
    // No request was made: the connection ends without a hop.
    clearTimeout(timer);
    socket.destroy();
    return;
  }
  const hop = new Hop(ctx.nextHop(), 'connect', 'SOCKS5', '');
  const client: TunnelClient = { socket, head: Buffer.alloc(0), responder: SOCKS_RESPONDER, established: false };
  // Until the request is read, a denial has no reply of its own (the authentication reply said it).
  let answer = (decision: Decision): void => {
    if (!socket.destroyed) socket.end();
    void decision;
  };
  // As of before identification: a grant changed while the request is read is never remembered as current.
  const stamp = rt.hopCache.stamp();
  await runHop(rt, ctx, hop, async (run) => {
    let grant = identifyPresented(rt, ctx, hop, auth, 0);
    if (grant instanceof Promise) grant = await grant;
    if (auth !== undefined) socket.write(Buffer.from([0x01, grant === null ? 0x01 : 0x00]));
    if (grant === null) return clearTimeout(timer);
    const target = await readSocks5Request(r);
    clearTimeout(timer);
    if (target === null) {
      answer = () => socket.destroy();
      return void hop.fail('request_malformed', 'incomplete SOCKS5 request');
    }
    hop.target = target.authority;
    answer = (decision) => answerTunnel(client, decision);
    if (target.cmd !== 0x01) {
      answer = () => void socket.end(socks5Reply(0x07));
      return void hop.fail('request_malformed', `SOCKS5 command ${target.cmd} is not supported (CONNECT only)`);
    }
    // Looked up once the target is known; the principal was identified above, as for every SOCKS5 hop.
    let mediating: string | null = null;
    let decided = decideHop(rt, hop, grant, lookupHop(rt, ctx, hop, auth, target.authority, stamp), () => {
      const dest = canonicalize(target.authority);
      if (!dest.ok) return hop.fail(dest.reason, dest.detail);
      hop.canonical = dest.value;
      // SOCKS5 carries no scheme: a target only http:// rules grant is mediated as plain HTTP requests.
      mediating = mediatingRule(ctx, hop, grant);
      return mediating === null;
    });
    if (decided instanceof Promise) decided = await decided;
    if (!decided && mediating === null) return;
    // The client as the tunnel stages see it, so a denial after the success reply (SNI, tunnel_not_http)
    // only closes the tunnel instead of writing a SOCKS5 reply into it.
    const tunnelClient: TunnelClient = { ...client, head: r.release() };
    answer = (decision) => answerTunnel(tunnelClient, decision);
    if (decided) await tunnelStages(rt, ctx, run, grant, tunnelClient);
    else if (mediating !== null) await mediateTunnel(rt, ctx, run, mediating, tunnelClient);
  }, (decision) => answer(decision));
}
