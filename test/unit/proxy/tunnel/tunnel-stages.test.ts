// tunnelStages and answerTunnel (src/proxy/tunnel/tunnel-stages.ts), after decideDestination as decide-hop.ts runs it on a miss: decide → dial → answer → (SNI check) →
// relay → close record, for HTTP CONNECT and SOCKS5 alike. What a hostile client tries: to get a byte to
// the origin before it is refused (docs/scenarios.md scenario 1); to leave while the hop is dialed, so
// that an upstream connection is left open behind it (a socket leak a client can repeat); to name an
// allowed host in CONNECT and another in its ClientHello (domain fronting, grant tls.requireSniMatch); and
// to make a denial be written into a tunnel that is already established. The runtime is the one
// src/app.ts builds (buildRuntime), hops run under runHop as on-connect.ts runs them, over real loopback
// sockets; the origin records every byte it is sent.
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { stringify } from 'yaml';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { buildRuntime } from '../../../../src/app.js';
import type { AuditRecordV1, CloseRecordV1, DecisionRecordV1 } from '../../../../src/audit/index.js';
import { parseConnectTarget } from '../../../../src/authority/index.js';
import { parseConfigText } from '../../../../src/config/index.js';
import type { RuntimeGrant } from '../../../../src/grant/index.js';
import { ConnectionContext } from '../../../../src/proxy/hop/connection-context.js';
import type { Decision } from '../../../../src/proxy/hop/decision.js';
import { decideDestination } from '../../../../src/proxy/hop/decide.js';
import { Hop } from '../../../../src/proxy/hop/hop.js';
import { connectEstablished, writeSocketDenial } from '../../../../src/proxy/ingress/respond.js';
import { runHop } from '../../../../src/proxy/hop/run-hop.js';
import type { ProxyRuntime } from '../../../../src/proxy/hop/runtime.js';
import { answerTunnel, tunnelStages, type TunnelClient, type TunnelResponder } from '../../../../src/proxy/tunnel/tunnel-stages.js';
import { unusedPort } from '../../../support/ports.js';
import { parseResponseHead } from '../../../support/raw-client.js';
import { silentLog, tableLookup } from '../../../support/sluice.js';
import { waitFor, waitUntil, withTimeout } from '../../../support/wait.js';

const TIMEOUT_MS = 5_000;
const cleanups: (() => void | Promise<void>)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** An origin that echoes and keeps every byte it is sent, and whether each of its sockets closed. */
interface RecorderOrigin {
  readonly port: number;
  readonly accepted: net.Socket[];
  received(): string;
  allClosed(): boolean;
}

async function recorderOrigin(onConnection: (socket: net.Socket) => void = (s) => void s.pipe(s)): Promise<RecorderOrigin> {
  const accepted: net.Socket[] = [];
  const closed = new Set<net.Socket>();
  const chunks: Buffer[] = [];
  const server = net.createServer({ allowHalfOpen: true }, (socket) => {
    accepted.push(socket);
    socket.on('error', () => undefined);
    socket.once('close', () => closed.add(socket));
    socket.on('data', (c: Buffer) => chunks.push(c));
    onConnection(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise<void>((resolve) => {
    for (const s of accepted) s.destroy();
    server.close(() => resolve());
  }));
  return {
    port: (server.address() as net.AddressInfo).port,
    accepted,
    received: () => Buffer.concat(chunks).toString('latin1'),
    allClosed: () => accepted.every((s) => closed.has(s)),
  };
}

/** The client's connection to the proxy: `accepted` is what the tunnel stages own, `client` the test's end. */
async function clientPair(): Promise<{ accepted: net.Socket; client: net.Socket; received: () => Buffer; closed: Promise<unknown> }> {
  const server = net.createServer({ allowHalfOpen: true });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const acceptedP = waitFor<net.Socket>(server, 'connection');
  const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  client.on('error', () => undefined);
  const accepted = await acceptedP;
  accepted.on('error', () => undefined);
  accepted.pause();
  const chunks: Buffer[] = [];
  client.on('data', (c: Buffer) => chunks.push(c));
  const closed = waitFor(client, 'close', TIMEOUT_MS * 2);
  closed.catch(() => undefined);
  cleanups.push(() => new Promise<void>((resolve) => {
    client.destroy();
    accepted.destroy();
    server.close(() => resolve());
  }));
  return { accepted, client, received: () => Buffer.concat(chunks), closed };
}

interface Fixture {
  readonly rt: ProxyRuntime;
  readonly grant: RuntimeGrant;
  readonly records: AuditRecordV1[];
  decisions(): DecisionRecordV1[];
  closes(): CloseRecordV1[];
}

async function fixture(grantExtra: Record<string, unknown>, config: Record<string, unknown> = {}): Promise<Fixture> {
  const records: AuditRecordV1[] = [];
  const text = stringify({
    listeners: [{ name: 'shared', listen: '127.0.0.1:0', identify: 'token' }],
    state: os.tmpdir(),
    grants: [{ id: 'g', tokenSha256: '0'.repeat(64), allowAddressClasses: ['loopback'], ...grantExtra }],
    ...config,
  });
  const parsed = parseConfigText(text, path.join(os.tmpdir(), 'tunnel-stages-test.yaml'), os.tmpdir());
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
  const built = await buildRuntime(parsed.config, {
    env: {},
    lookup: tableLookup({ 'a.test': ['127.0.0.1'], 'b.test': ['127.0.0.1'] }),
    audit: { write: (r) => void records.push(r), flush: () => Promise.resolve() },
    log: silentLog,
    hostInterfaces: () => ({}),
  });
  if (!built.ok) throw new Error(JSON.stringify(built.issues));
  const rt = built.value.runtime;
  cleanups.push(async () => {
    rt.registry.close();
    rt.routes.close();
    await rt.forwardAgent.close();
    await rt.upstreamAgent.close();
  });
  const grant = rt.registry.grants.get('g');
  if (grant === undefined) throw new Error('no grant');
  return {
    rt,
    grant,
    records,
    decisions: () => records.filter((r): r is DecisionRecordV1 => r.kind === 'decision'),
    closes: () => records.filter((r): r is CloseRecordV1 => r.kind === 'close'),
  };
}

/** What on-connect.ts answers a CONNECT with, with a count of each. */
function httpResponder(): TunnelResponder & { established: ReturnType<typeof vi.fn>; deny: ReturnType<typeof vi.fn> } {
  return {
    established: vi.fn((socket: net.Socket) => void socket.write(connectEstablished())),
    deny: vi.fn((socket: net.Socket, decision: Decision) => writeSocketDenial(socket, decision)),
  };
}

/** Runs one CONNECT hop to `target` through the tunnel stages, as on-connect.ts does after identify. */
function runTunnel(f: Fixture, socket: net.Socket, target: string, responder: TunnelResponder = httpResponder()): { hop: Hop; client: TunnelClient; done: Promise<void> } {
  const ctx = new ConnectionContext(socket, 'shared', { boundGrant: null });
  const hop = new Hop(ctx.nextHop(), 'connect', 'CONNECT', target);
  hop.principal = { grantId: 'g', via: 'token' };
  const dest = parseConnectTarget(target);
  if (!dest.ok) throw new Error(`bad target ${target}`);
  hop.canonical = dest.value;
  const client: TunnelClient = { socket, head: Buffer.alloc(0), responder, established: false };
  const done = withTimeout(
    runHop(f.rt, ctx, hop, async (run) => {
      if (await decideDestination(f.rt, hop, f.grant)) await tunnelStages(f.rt, ctx, run, f.grant, client);
    }, (decision) => answerTunnel(client, decision)),
    TIMEOUT_MS * 2,
    `the hop to ${target}`,
  );
  return { hop, client, done };
}

describe('tunnelStages: a denial is answered before any byte goes upstream', () => {
  it('answers a destination outside the grant with its denial; the origin never sees a connection', async () => {
    const origin = await recorderOrigin();
    const f = await fixture({ destinations: [`https://a.test:${origin.port}`] });
    const { accepted, received, closed } = await clientPair();
    const { done } = runTunnel(f, accepted, `b.test:${origin.port}`);
    await done;
    await closed;
    const head = parseResponseHead(received());
    expect(head?.status).toBe(403);
    expect(head?.headers['proxy-status']).toContain('details="destination_not_granted"');
    expect(origin.accepted).toHaveLength(0);
    expect(f.decisions()).toMatchObject([{ decision: 'deny', reason: 'destination_not_granted', canonical: `b.test:${origin.port}` }]);
    expect(f.closes()).toHaveLength(0);
  });

  it('answers a failed dial (nothing listening) with dial_refused and records no close', async () => {
    const port = await unusedPort();
    const f = await fixture({ destinations: [`https://a.test:${port}`] });
    const { accepted, received, closed } = await clientPair();
    await runTunnel(f, accepted, `a.test:${port}`).done;
    await closed;
    expect(parseResponseHead(received())?.status).toBe(502);
    expect(f.decisions()).toMatchObject([{ reason: 'dial_refused' }]);
    expect(f.closes()).toHaveLength(0);
  });
});

describe('tunnelStages: a client that leaves mid-hop leaves nothing open upstream', () => {
  it('client gone before the dial: client_gone, and the origin is never dialed', async () => {
    const origin = await recorderOrigin();
    const f = await fixture({ destinations: [`https://a.test:${origin.port}`] });
    const { accepted, client } = await clientPair();
    const responder = httpResponder();
    accepted.destroy();
    client.destroy();
    const { hop, done } = runTunnel(f, accepted, `a.test:${origin.port}`, responder);
    await done;
    expect(hop.reason).toBe('client_gone');
    expect(hop.detail).toContain('before the tunnel was dialed');
    expect(origin.accepted).toHaveLength(0);
    expect(f.decisions()).toMatchObject([{ reason: 'client_gone' }]);
    expect(responder.established).not.toHaveBeenCalled();
  });

  it('client gone while the upstream proxy answers: client_gone, and the upstream connection is closed', async () => {
    const origin = await recorderOrigin();
    let clientSide: net.Socket | null = null;
    // An upstream proxy that, on CONNECT, first lets the client leave, then says 200.
    const proxy = await recorderOrigin((socket) => {
      // Sluice's side closing is seen as its FIN (or reset): then this side closes too.
      socket.once('end', () => socket.end());
      socket.once('data', () => {
        clientSide?.destroy();
        setImmediate(() => socket.write('HTTP/1.1 200 Connection Established\r\n\r\n'));
      });
    });
    const f = await fixture({ destinations: [`https://a.test:${origin.port}`] }, { route: { mode: 'proxy', proxy: { url: `http://127.0.0.1:${proxy.port}` } } });
    const { accepted } = await clientPair();
    clientSide = accepted;
    const responder = httpResponder();
    const { hop, done } = runTunnel(f, accepted, `a.test:${origin.port}`, responder);
    await done;
    expect(hop.reason).toBe('client_gone');
    expect(hop.detail).toContain('before the tunnel was established');
    expect(proxy.accepted).toHaveLength(1);
    await waitUntil(() => proxy.allClosed(), { timeoutMs: TIMEOUT_MS, label: 'the upstream connection to close' });
    expect(responder.established).not.toHaveBeenCalled();
    expect(f.decisions()).toMatchObject([{ reason: 'client_gone' }]);
    expect(f.closes()).toHaveLength(0);
  });
});

describe('tunnelStages with tls.requireSniMatch: the ClientHello must name the authorized host', () => {
  async function sendHello(client: net.Socket, servername: string): Promise<void> {
    const hello = tls.connect({ socket: client, servername, rejectUnauthorized: false });
    hello.on('error', () => undefined);
    cleanups.push(() => void hello.destroy());
  }

  it('answers 200 first, then refuses a ClientHello for another name: sni_mismatch, both sockets closed, nothing relayed', async () => {
    const origin = await recorderOrigin();
    const f = await fixture({ destinations: [`https://a.test:${origin.port}`], tls: { requireSniMatch: true } });
    const { accepted, client, received, closed } = await clientPair();
    const { hop, client: tunnelClient, done } = runTunnel(f, accepted, `a.test:${origin.port}`);
    await waitUntil(() => received().includes('\r\n\r\n'), { timeoutMs: TIMEOUT_MS, label: 'the 200' });
    expect(parseResponseHead(received())?.status).toBe(200);
    await sendHello(client, 'fronted.example');
    await done;
    await closed;
    expect(hop.reason).toBe('sni_mismatch');
    expect(tunnelClient.established).toBe(true);
    expect(accepted.destroyed).toBe(true);
    // The origin was dialed (the 200 needs it) but is closed again, and was sent not one byte.
    expect(origin.accepted).toHaveLength(1);
    await waitUntil(() => origin.allClosed(), { timeoutMs: TIMEOUT_MS, label: 'the origin connection to close' });
    expect(origin.received()).toBe('');
    // Only the 200 reached the client: no denial was written into the tunnel.
    expect(received().toString('latin1')).toBe(connectEstablished().toString('latin1'));
    expect(f.decisions()).toMatchObject([{ decision: 'deny', reason: 'sni_mismatch' }]);
    expect(f.closes()).toHaveLength(0);
  });

  it('passes a ClientHello for the authorized name on to the origin, unchanged (the control case)', async () => {
    const origin = await recorderOrigin();
    const f = await fixture({ destinations: [`https://a.test:${origin.port}`], tls: { requireSniMatch: true } });
    const { accepted, client, received } = await clientPair();
    const { hop } = runTunnel(f, accepted, `a.test:${origin.port}`);
    await waitUntil(() => received().includes('\r\n\r\n'), { timeoutMs: TIMEOUT_MS, label: 'the 200' });
    await sendHello(client, 'a.test');
    await waitUntil(() => origin.received().length > 5, { timeoutMs: TIMEOUT_MS, label: 'the ClientHello at the origin' });
    expect(origin.received().charCodeAt(0)).toBe(22); // a TLS handshake record
    expect(hop.reason).toBe('granted');
    expect(f.decisions()).toMatchObject([{ decision: 'allow', reason: 'granted' }]);
  });
});

describe('tunnelStages: relay', () => {
  it('relays both ways and records one decision, then one close with the bytes', async () => {
    const origin = await recorderOrigin();
    const f = await fixture({ destinations: [`https://a.test:${origin.port}`] });
    const { accepted, client, received, closed } = await clientPair();
    const { done } = runTunnel(f, accepted, `a.test:${origin.port}`);
    await waitUntil(() => received().includes('\r\n\r\n'), { timeoutMs: TIMEOUT_MS, label: 'the 200' });
    const headLength = received().length;
    client.write('ping-1234');
    await waitUntil(() => received().length === headLength + 9, { timeoutMs: TIMEOUT_MS, label: 'the echo' });
    expect(received().subarray(headLength).toString()).toBe('ping-1234');
    client.end();
    await done;
    await closed;
    expect(origin.received()).toBe('ping-1234');
    expect(f.decisions()).toHaveLength(1);
    expect(f.closes()).toHaveLength(1);
    expect(f.closes()[0]).toMatchObject({ bytesUp: 9, bytesDown: 9, status: 200, closedBy: 'client_closed', pinned: '127.0.0.1' });
    expect(f.records.indexOf(f.decisions()[0] as AuditRecordV1)).toBeLessThan(f.records.indexOf(f.closes()[0] as AuditRecordV1));
  });
});

describe('answerTunnel: what a denied tunnel hop writes', () => {
  const decision = { reason: 'sni_mismatch', canonical: 'a.test:443', principal: 'g' } as Decision;

  it('before the 200, hands the decision to the responder', async () => {
    const { accepted } = await clientPair();
    const responder = httpResponder();
    answerTunnel({ socket: accepted, head: Buffer.alloc(0), responder, established: false }, decision);
    expect(responder.deny).toHaveBeenCalledWith(accepted, decision);
  });

  it('after `established`, only destroys the socket: no denial is written into the tunnel', async () => {
    const { accepted, received, closed } = await clientPair();
    const responder = httpResponder();
    answerTunnel({ socket: accepted, head: Buffer.alloc(0), responder, established: true }, decision);
    expect(responder.deny).not.toHaveBeenCalled();
    expect(accepted.destroyed).toBe(true);
    await closed;
    expect(received().length).toBe(0);
  });
});
