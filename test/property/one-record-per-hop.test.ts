// Threat: a hostile client (or a fault it provokes) that leaves a hop out of the audit log (to hide what
// it did), gives one hop two decision records (to confuse attribution), or takes the proxy down. Generated
// runs against one real in-process Sluice, every listener kind: the CONNECT fast path (a CONNECT as the
// first bytes), a CONNECT parsed by node:http (pipelined behind keep-alive requests on one connection),
// absolute-form GET and POST, and SOCKS5 (RFC 1928, credentials RFC 1929); valid and hostile heads
// (wrong, missing or unreadable tokens, another grant's token mid-connection, destinations outside the
// grant, malformed targets, bad versions, header floods, Expect other than 100-continue, Upgrade, garbage,
// a client that resets or half-closes mid-head); and a fault injected at one stage per run (identify,
// route, resolve, dial, forward, and after the decision, the relay). After each run, once the client is
// finished and Sluice has let go of every connection of the run, the audit records say (docs/audit-log.md):
// every hop Sluice started on a connection (ConnectionContext.hops) has exactly one decision record, and
// nothing else has one; an allowed hop has exactly one close record, after its decision, a denied hop none;
// every answer the client saw is its hop's decision (same status, or the SOCKS5 reply of its reason); each
// fault that fired is one hop denied internal_error (500), or, when it was already allowed, one close
// record relay_failed; no record holds a token or a query; and Sluice still serves a granted request.
// The seed is printed; rerun one with SLUICE_PROPERTY_SEED=<seed> (runs: SLUICE_PROPERTY_RUNS). A failing
// run waits out its bounds, so the counterexample is printed as found; SLUICE_PROPERTY_SHRINK=1 shrinks it.
import net from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditRecordV1, CloseRecordV1, DecisionRecordV1 } from '../../src/audit/index.js';
import type { ConnectionContext } from '../../src/proxy/hop/connection-context.js';
import type { ProxyRuntime } from '../../src/proxy/hop/runtime.js';
import { socksReplyCode } from '../../src/core/index.js';
import { startHttpOrigin, type Origin } from '../support/origins.js';
import { parseResponseHead, rawRequest } from '../support/raw-client.js';
import { startSluice, tableLookup, tokenHash, type TestSluice } from '../support/sluice.js';
import { waitUntil } from '../support/wait.js';

const SEED = Number(process.env['SLUICE_PROPERTY_SEED'] ?? 20261214);
const RUNS = Number(process.env['SLUICE_PROPERTY_RUNS'] ?? 80);
console.log(`[property/one-record-per-hop] seed=${SEED} numRuns=${RUNS} (rerun with SLUICE_PROPERTY_SEED=${SEED})`);

const TOKEN_A = 'tok-a-one-record-0123456789';
const TOKEN_B = 'tok-b-one-record-9876543210';
/** In every target's query: it must never reach a record. */
const SECRET = 'qsecret-5f1e';
const CLIENT_TIMEOUT_MS = 4000;

// ── the generated model ───────────────────────────────────────────────────────────────────────────

const AUTHS = ['bearerA', 'basicA', 'emptyUserA', 'bearerB', 'wrong', 'missing', 'unreadable', 'userMismatch'] as const;
type Auth = (typeof AUTHS)[number];
/** Symbolic destinations, rendered with the origin's port inside each run. */
const DESTS = ['loop', 'loop', 'literal', 'literal6', 'other', 'nx', 'port', 'noport', 'zeroport', 'bigport', 'bracket', 'userinfo', 'space'] as const;
type Dest = (typeof DESTS)[number];
const HOSTILES = ['none', 'none', 'expect', 'fragment', 'upgrade', 'headerCount', 'headerBytes', 'badVersion', 'noVersion', 'hostMismatch', 'dupHost', 'smuggle', 'garbage'] as const;
type Hostile = (typeof HOSTILES)[number];
const FAULTS = ['resolveThrow', 'resolveReject', 'selectThrow', 'selectReject', 'tokensThrow', 'dispatchThrow', 'dialOptionsThrow', 'tunnelOpenedThrow', 'addBytesThrow'] as const;
type Fault = (typeof FAULTS)[number] | 'none';

interface HttpMsg {
  readonly method: 'CONNECT' | 'GET' | 'POST';
  readonly dest: Dest;
  readonly auth: Auth;
  readonly hostile: Hostile;
  readonly garbage: Uint8Array;
  readonly bodyLength: number;
}
interface Cut {
  /** Where the script is cut, as a fraction of its bytes. */
  readonly at: number;
  /** reset: RST mid-head; end: FIN mid-head (HTTP only: a SOCKS5 handshake waits for its timeout). */
  readonly how: 'reset' | 'end';
}
interface HttpScript {
  readonly listener: 'http';
  readonly msgs: readonly HttpMsg[];
  readonly cut: Cut | null;
  /** After a 200 to CONNECT: one request through the tunnel (the origin closes it), or close at once. */
  readonly tunnel: 'request' | 'close';
}
interface SocksScript {
  readonly listener: 'socks';
  readonly greeting: 'userPass' | 'both' | 'noAuth' | 'badVersion';
  readonly authVersion: 1 | 2;
  readonly auth: Auth;
  readonly cmd: 1 | 2 | 3;
  readonly atyp: 'v4' | 'v6' | 'name' | 'bad';
  readonly dest: Dest;
  readonly cut: Cut | null;
  readonly tunnel: 'request' | 'close';
}
type Script = HttpScript | SocksScript;
interface Run {
  readonly script: Script;
  readonly fault: Fault;
}

const pick = <T,>(values: readonly T[]): fc.Arbitrary<T> => fc.constantFrom(...values);
const garbageArb = fc.uint8Array({ minLength: 1, maxLength: 40 });
const GOOD_AUTHS = ['bearerA', 'basicA', 'emptyUserA'] as const;
const GOOD_DESTS = ['loop', 'literal'] as const;
/** Granted requests most of the time (so hops are allowed, dialed and relayed), anything at all otherwise. */
const msgArb = (method: fc.Arbitrary<HttpMsg['method']>): fc.Arbitrary<HttpMsg> =>
  fc.oneof(
    { weight: 3, arbitrary: fc.record({ method, dest: pick(GOOD_DESTS), auth: pick(GOOD_AUTHS), hostile: fc.constant<Hostile>('none'), garbage: garbageArb, bodyLength: fc.integer({ min: 1, max: 64 }) }) },
    { weight: 2, arbitrary: fc.record({ method, dest: pick(DESTS), auth: pick(AUTHS), hostile: pick(HOSTILES), garbage: garbageArb, bodyLength: fc.integer({ min: 1, max: 64 }) }) },
  );
const cutAt = fc.integer({ min: 0, max: 999 }).map((n) => n / 1000);
/** One run in five is cut short. */
const sometimes = <T,>(arb: fc.Arbitrary<T>): fc.Arbitrary<T | null> => fc.oneof({ weight: 4, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: arb });
const cutArb: fc.Arbitrary<Cut | null> = sometimes(fc.record({ at: cutAt, how: pick(['reset', 'end'] as const) }));
const tunnelArb = pick(['request', 'close'] as const);

const httpScript: fc.Arbitrary<HttpScript> = fc.oneof(
  // The CONNECT fast path: a CONNECT as the connection's first bytes.
  fc.record({ listener: fc.constant('http' as const), msgs: msgArb(fc.constant('CONNECT')).map((m) => [m]), cut: cutArb, tunnel: tunnelArb }),
  // Keep-alive absolute-form requests, optionally with a CONNECT pipelined behind them (node:http parses it).
  fc.record({
    listener: fc.constant('http' as const),
    msgs: fc
      .tuple(fc.array(msgArb(pick(['GET', 'POST'] as const)), { minLength: 1, maxLength: 3 }), fc.option(msgArb(fc.constant('CONNECT')), { freq: 2 }))
      .map(([forwards, connect]) => (connect === null ? forwards : [...forwards, connect])),
    cut: cutArb,
    tunnel: tunnelArb,
  }),
);
const socksCut: fc.Arbitrary<Cut | null> = sometimes(fc.record({ at: cutAt, how: fc.constant('reset' as const) }));
const socksScript: fc.Arbitrary<SocksScript> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      listener: fc.constant('socks' as const),
      greeting: pick(['userPass', 'both'] as const),
      authVersion: fc.constant<1 | 2>(1),
      auth: pick(GOOD_AUTHS),
      cmd: fc.constant<1 | 2 | 3>(1),
      atyp: pick(['name', 'v4'] as const),
      dest: pick(GOOD_DESTS),
      cut: socksCut,
      tunnel: tunnelArb,
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      listener: fc.constant('socks' as const),
      greeting: pick(['userPass', 'userPass', 'both', 'noAuth', 'badVersion'] as const),
      authVersion: fc.constantFrom<1 | 2>(1, 1, 1, 2),
      auth: pick(AUTHS),
      cmd: fc.constantFrom<1 | 2 | 3>(1, 1, 1, 2, 3),
      atyp: pick(['name', 'name', 'v4', 'v6', 'bad'] as const),
      dest: pick(DESTS),
      cut: socksCut,
      tunnel: tunnelArb,
    }),
  },
);
const runArb: fc.Arbitrary<Run> = fc.record({
  script: fc.oneof({ arbitrary: httpScript, weight: 3 }, { arbitrary: socksScript, weight: 2 }),
  fault: fc.oneof({ weight: 2, arbitrary: fc.constant<Fault>('none') }, { weight: 3, arbitrary: pick(FAULTS) }),
});

// ── rendering ─────────────────────────────────────────────────────────────────────────────────────

const basic = (user: string, token: string): string => `Basic ${Buffer.from(`${user}:${token}`).toString('base64')}`;

function authLine(auth: Auth): string {
  const value: Record<Auth, string | null> = {
    bearerA: `Bearer ${TOKEN_A}`,
    basicA: basic('a', TOKEN_A),
    emptyUserA: basic('', TOKEN_A),
    bearerB: `Bearer ${TOKEN_B}`,
    wrong: basic('a', 'not-the-token'),
    missing: null,
    unreadable: 'Basic !!!not-base64',
    userMismatch: basic('b', TOKEN_A),
  };
  const v = value[auth];
  return v === null ? '' : `Proxy-Authorization: ${v}\r\n`;
}

/** SOCKS5 credentials (RFC 1929: UNAME = grant id, PASSWD = token) for each symbolic auth. */
function socksCredentials(auth: Auth): [string, string] {
  switch (auth) {
    case 'bearerA':
    case 'basicA':
      return ['a', TOKEN_A];
    case 'emptyUserA':
      return ['', TOKEN_A];
    case 'bearerB':
      return ['b', TOKEN_B];
    case 'wrong':
      return ['a', 'not-the-token'];
    case 'missing':
      return ['', ''];
    case 'unreadable':
      return ['a:b', TOKEN_A];
    case 'userMismatch':
      return ['b', TOKEN_A];
  }
}

function authority(dest: Dest, port: number): string {
  switch (dest) {
    case 'loop': return `loop.test:${port}`;
    case 'literal': return `127.0.0.1:${port}`;
    case 'literal6': return `[::1]:${port}`;
    case 'other': return `other.test:${port}`;
    case 'nx': return `nx.test:${port}`;
    case 'port': return 'loop.test:1';
    case 'noport': return 'loop.test';
    case 'zeroport': return 'loop.test:0';
    case 'bigport': return 'loop.test:70000';
    case 'bracket': return `[::1:${port}`;
    case 'userinfo': return `a:${TOKEN_A}@loop.test:${port}`;
    case 'space': return `loop .test:${port}`;
  }
}

function renderHttpMsg(m: HttpMsg, port: number): Buffer {
  if (m.hostile === 'garbage') return Buffer.concat([Buffer.from(m.garbage), Buffer.from('\r\n\r\n')]);
  const auth = authority(m.dest, port);
  const target = m.method === 'CONNECT' ? auth : `http://${auth}/p?${SECRET}=1`;
  const version = m.hostile === 'badVersion' ? ' HTTP/2.0' : m.hostile === 'noVersion' ? '' : ' HTTP/1.1';
  let head = `${m.method} ${target}${m.hostile === 'fragment' ? '#frag' : ''}${version}\r\n`;
  head += m.hostile === 'hostMismatch' ? 'Host: other.test\r\n' : `Host: ${auth}\r\n`;
  if (m.hostile === 'dupHost') head += `Host: ${auth}\r\n`;
  head += authLine(m.auth);
  if (m.hostile === 'expect') head += 'Expect: fancy-continue\r\n';
  if (m.hostile === 'upgrade') head += 'Connection: Upgrade\r\nUpgrade: websocket\r\n';
  if (m.hostile === 'headerCount') for (let i = 0; i < 120; i++) head += `X-Flood-${i}: ${i}\r\n`;
  if (m.hostile === 'headerBytes') head += `X-Big: ${'b'.repeat(20_000)}\r\n`;
  if (m.hostile === 'smuggle') head += 'Transfer-Encoding: chunked\r\nContent-Length: 3\r\n';
  let body = '';
  if (m.method === 'POST' && m.hostile !== 'smuggle') {
    body = 'x'.repeat(m.bodyLength);
    head += `Content-Type: text/plain\r\nContent-Length: ${m.bodyLength}\r\n`;
  } else if (m.hostile === 'smuggle') {
    body = '0\r\n\r\n';
  }
  return Buffer.from(`${head}\r\n${body}`, 'latin1');
}

function renderSocks(s: SocksScript, port: number): Buffer {
  const greeting = { userPass: [5, 1, 2], both: [5, 2, 0, 2], noAuth: [5, 1, 0], badVersion: [4, 1, 0] }[s.greeting];
  const [user, pass] = socksCredentials(s.auth);
  const u = Buffer.from(user, 'latin1');
  const p = Buffer.from(pass, 'latin1');
  const authMsg = Buffer.concat([Buffer.from([s.authVersion, u.length]), u, Buffer.from([p.length]), p]);
  let address: Buffer;
  let destPort = port;
  if (s.atyp === 'v4') address = Buffer.from([1, 127, 0, 0, 1]);
  else if (s.atyp === 'v6') address = Buffer.concat([Buffer.from([4]), Buffer.alloc(15), Buffer.from([1])]);
  else if (s.atyp === 'bad') address = Buffer.from([9]);
  else {
    const a = authority(s.dest, port);
    const colon = a.lastIndexOf(':');
    const host = colon > 0 && !a.endsWith(']') ? a.slice(0, colon) : a;
    destPort = colon > 0 ? Number(a.slice(colon + 1)) & 0xffff : 0;
    const name = Buffer.from(host.replace(/^\[|\]$/g, ''), 'latin1');
    address = Buffer.concat([Buffer.from([3, name.length]), name]);
  }
  const portBytes = Buffer.alloc(2);
  portBytes.writeUInt16BE(Number.isFinite(destPort) ? destPort : 0);
  const request = Buffer.concat([Buffer.from([5, s.cmd, 0]), address, s.atyp === 'bad' ? Buffer.alloc(0) : portBytes]);
  return Buffer.concat([Buffer.from(greeting), authMsg, request]);
}

// ── the client ────────────────────────────────────────────────────────────────────────────────────

interface ClientResult {
  /** Final HTTP response statuses in the order received (1xx skipped); only Sluice's answers and the origin's. */
  readonly statuses: number[];
  /** SOCKS5: the method chosen, the RFC 1929 status, the reply code, as far as they came. */
  readonly socks: { method: number | null; authStatus: number | null; reply: number | null };
  readonly timedOut: boolean;
}

const TUNNEL_REQUEST = 'GET /through-the-tunnel HTTP/1.1\r\nHost: loop.test\r\nConnection: close\r\n\r\n';

/**
 * Plays one script on one connection and resolves once the socket is closed: the server closed it, the
 * client had every answer it waited for, or the bound passed (then it is destroyed, and noted).
 */
function play(port: number, bytes: Buffer, script: Script): Promise<ClientResult> {
  return new Promise((resolve) => {
    const statuses: number[] = [];
    const socks: ClientResult['socks'] = { method: null, authStatus: null, reply: null };
    let buf = Buffer.alloc(0);
    let tunnel = false;
    let timedOut = false;
    const socket = net.connect({ port, host: '127.0.0.1' });
    const timer = setTimeout(() => {
      timedOut = true;
      socket.destroy();
    }, CLIENT_TIMEOUT_MS);
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ statuses, socks, timedOut });
    });
    const enterTunnel = (): void => {
      tunnel = true;
      if (script.tunnel === 'close') socket.destroy();
      else socket.write(TUNNEL_REQUEST);
    };
    const msgs = script.listener === 'http' ? script.msgs : [];
    const onHttpData = (): void => {
      for (;;) {
        const head = parseResponseHead(buf);
        if (head === null) return;
        if (head.status >= 100 && head.status < 200) {
          buf = buf.subarray(head.headLength);
          continue;
        }
        if (msgs[statuses.length]?.method === 'CONNECT' && head.status === 200) {
          statuses.push(200);
          buf = Buffer.alloc(0);
          return enterTunnel();
        }
        const length = Number(head.headers['content-length'] ?? NaN);
        if (!Number.isFinite(length)) {
          statuses.push(head.status);
          tunnel = true; // unframed: read to the close
          return;
        }
        if (buf.length < head.headLength + length) return;
        statuses.push(head.status);
        buf = buf.subarray(head.headLength + length);
        if (script.cut === null && statuses.length >= msgs.length) return void socket.destroy();
      }
    };
    const onSocksData = (): void => {
      if (socks.method === null) {
        if (buf.length < 2) return;
        socks.method = buf[1] ?? null;
        buf = buf.subarray(2);
      }
      if (socks.method === 2 && socks.authStatus === null) {
        if (buf.length < 2) return;
        socks.authStatus = buf[1] ?? null;
        buf = buf.subarray(2);
      }
      if (socks.reply === null && buf.length >= 10) {
        socks.reply = buf[1] ?? null;
        buf = buf.subarray(10);
        if (socks.reply === 0) enterTunnel();
      }
    };
    socket.on('data', (chunk: Buffer) => {
      if (tunnel) return;
      buf = Buffer.concat([buf, chunk]);
      if (script.listener === 'http') onHttpData();
      else onSocksData();
    });
    socket.on('connect', () => {
      const cut = script.cut;
      if (cut === null) return void socket.write(bytes);
      const prefix = bytes.subarray(0, Math.floor(bytes.length * cut.at));
      if (cut.how === 'end') return void socket.end(prefix);
      if (prefix.length === 0) return void socket.resetAndDestroy();
      socket.write(prefix, () => socket.resetAndDestroy());
    });
  });
}

// ── faults ────────────────────────────────────────────────────────────────────────────────────────

interface Injected {
  fired: number;
  restore(): void;
}

/** Replaces one method of `target` with a throwing (or rejecting) one for this run. */
function replace<T extends object>(target: T, key: keyof T & string, injected: { fired: number }, reject: boolean): () => void {
  const own = Object.prototype.hasOwnProperty.call(target, key);
  const original = (target as Record<string, unknown>)[key];
  (target as Record<string, unknown>)[key] = (): unknown => {
    injected.fired += 1;
    const error = new Error(`injected fault in ${key}`);
    if (reject) return Promise.reject(error);
    throw error;
  };
  return () => {
    if (own) (target as Record<string, unknown>)[key] = original;
    else delete (target as Record<string, unknown>)[key];
  };
}

function inject(rt: ProxyRuntime, fault: Fault): Injected {
  const injected: Injected = { fired: 0, restore: () => undefined };
  const restores: (() => void)[] = [];
  switch (fault) {
    case 'none':
      break;
    case 'resolveThrow':
    case 'resolveReject':
      restores.push(replace(rt.resolver, 'resolve', injected, fault === 'resolveReject'));
      break;
    case 'selectThrow':
    case 'selectReject':
      restores.push(replace(rt.routes, 'select', injected, fault === 'selectReject'));
      break;
    case 'tokensThrow':
      restores.push(replace(rt.registry.tokens, 'findByToken', injected, false), replace(rt.registry.tokens, 'verify', injected, false));
      break;
    case 'dispatchThrow': {
      // Every principal's dispatcher (relay/principal-pools.ts) throws in dispatch, as undici can.
      const pools = rt.forwardAgent;
      const original = pools.for;
      const patched: (() => void)[] = [];
      pools.for = (principal: string) => {
        const dispatcher = original.call(pools, principal);
        patched.push(replace(dispatcher, 'dispatch', injected, false));
        return dispatcher;
      };
      restores.push(() => {
        pools.for = original;
        for (const undo of patched) undo();
      });
      break;
    }
    case 'dialOptionsThrow': {
      const original = rt.dial;
      Object.defineProperty(rt, 'dial', {
        configurable: true,
        enumerable: true,
        get: () => {
          injected.fired += 1;
          throw new Error('injected fault reading the dial options');
        },
      });
      restores.push(() => Object.defineProperty(rt, 'dial', { configurable: true, enumerable: true, writable: true, value: original }));
      break;
    }
    case 'tunnelOpenedThrow':
      // After the decision: the tunnel was allowed and answered 200, then the relay fails.
      restores.push(replace(rt.metrics, 'tunnelOpened', injected, false));
      break;
    case 'addBytesThrow':
      // Before the decision for a forward (its usage is added before it is decided), after it for a tunnel.
      restores.push(replace(rt.registry, 'addBytes', injected, false));
      break;
  }
  injected.restore = () => {
    for (const r of restores.reverse()) r();
  };
  return injected;
}

// ── the property ──────────────────────────────────────────────────────────────────────────────────

const CONTEXT_KEY = 'sluice.connection';
function contextOf(socket: net.Socket): ConnectionContext | undefined {
  const key = Object.getOwnPropertySymbols(socket).find((s) => s.description === CONTEXT_KEY);
  return key === undefined ? undefined : ((socket as unknown as Record<symbol, unknown>)[key] as ConnectionContext | undefined);
}

interface Accepted {
  readonly socket: net.Socket;
  readonly ctx: ConnectionContext;
  closed: boolean;
}

describe('one decision record per hop, at most one close record after it (fast-check, real Sluice)', () => {
  let origin: Origin;
  let sluice: TestSluice;
  let httpPort = 0;
  let socksPort = 0;
  let accepted: Accepted[] = [];
  const clientTimeouts: string[] = [];
  /** What the runs reached, printed at the end: reason codes, close reasons, faults fired, listener paths. */
  const tally = new Map<string, number>();
  const count = (key: string): void => void tally.set(key, (tally.get(key) ?? 0) + 1);

  beforeAll(async () => {
    origin = await startHttpOrigin();
    const p = origin.port;
    sluice = await startSluice(
      {
        listeners: [
          { name: 'shared', listen: '127.0.0.1:0', identify: 'token' },
          { name: 'socks', listen: '127.0.0.1:0', identify: 'token', protocol: 'socks5' },
        ],
        grants: [
          {
            id: 'a',
            tokenSha256: tokenHash(TOKEN_A),
            destinations: [`http://loop.test:${p}`, `tcp://loop.test:${p}`, `http://127.0.0.1:${p}`, `tcp://127.0.0.1:${p}`, `http://nx.test:${p}`, `tcp://nx.test:${p}`],
            allowAddressClasses: ['loopback'],
          },
          { id: 'b', tokenSha256: tokenHash(TOKEN_B), destinations: [`http://loop.test:${p}`, `tcp://loop.test:${p}`], allowAddressClasses: ['loopback'] },
        ],
        // Many wrong tokens from one source on purpose: the auth throttle is not what is tested here.
        limits: { authFailuresPerMinute: 1_000_000, authFailuresPerMinutePerSource: 1_000_000 },
        timeouts: { headersMs: 2000 },
      },
      { lookup: tableLookup({ 'loop.test': ['127.0.0.1'], 'other.test': ['127.0.0.1'] }) },
    );
    const port = (name: string): number => Number(sluice.app.listeners.find((l) => l.name === name)?.address.split(':').at(-1));
    httpPort = port('shared');
    socksPort = port('socks');
    for (const l of sluice.app.listeners) {
      // Runs after Sluice's own connection listener, which tags the socket with its ConnectionContext.
      l.server.on('connection', (socket: net.Socket) => {
        const ctx = contextOf(socket);
        if (ctx === undefined) return;
        const entry: Accepted = { socket, ctx, closed: socket.destroyed };
        socket.once('close', () => (entry.closed = true));
        accepted.push(entry);
      });
    }
  });

  afterAll(async () => {
    await sluice?.close();
    await origin?.close();
    if (clientTimeouts.length > 0) console.log(`[property/one-record-per-hop] client bound reached in ${clientTimeouts.length} run(s): ${clientTimeouts.join(' | ')}`);
  });

  const decisionsOf = (id: string): DecisionRecordV1[] => sluice.records.filter((r): r is DecisionRecordV1 => r.kind === 'decision' && r.connection === id);
  const closesOf = (id: string): CloseRecordV1[] => sluice.records.filter((r): r is CloseRecordV1 => r.kind === 'close' && r.connection === id);

  /** Every connection of the run is closed, every hop it started is decided, every allowed hop closed. */
  function settled(): boolean {
    return accepted.every(({ ctx, closed }) => {
      if (!closed) return false;
      const decisions = decisionsOf(ctx.id);
      if (decisions.length < ctx.hops) return false;
      const closes = closesOf(ctx.id);
      return decisions.every((d) => d.decision !== 'allow' || closes.some((c) => c.hop === d.hop));
    });
  }

  function describeRun(): string {
    return accepted
      .map(({ ctx, closed }) => `${ctx.id} (closed ${closed}, hops ${ctx.hops}): ${JSON.stringify(sluice.records.filter((r) => r.connection === ctx.id).map((r) => (r.kind === 'decision' ? `D${r.hop}:${r.reason}` : `C${r.hop}:${r.closedBy}`)))}`)
      .join('; ');
  }

  async function check(run: Run): Promise<void> {
    accepted = [];
    const rt = sluice.app.runtime;
    const injected = inject(rt, run.fault);
    let result: ClientResult;
    try {
      const { script } = run;
      const bytes = script.listener === 'http' ? Buffer.concat(script.msgs.map((m) => renderHttpMsg(m, origin.port))) : renderSocks(script, origin.port);
      result = await play(script.listener === 'http' ? httpPort : socksPort, bytes, script);
      if (result.timedOut) clientTimeouts.push(JSON.stringify(run));
      await waitUntil(settled, { timeoutMs: 4000, label: `every hop of the run decided and closed: ${describeRun()}` }).catch((error: Error) => {
        throw new Error(`${error.message}\nrun: ${JSON.stringify(run)}`);
      });
    } finally {
      injected.restore();
    }

    let internalErrors = 0;
    let relayFailed = 0;
    for (const { ctx } of accepted) {
      const records = sluice.records.map((r, i) => [r, i] as const).filter(([r]) => r.connection === ctx.id);
      const decisions = records.filter((e): e is readonly [DecisionRecordV1, number] => e[0].kind === 'decision');
      const closes = records.filter((e): e is readonly [CloseRecordV1, number] => e[0].kind === 'close');
      // Exactly one decision for each hop Sluice started on the connection, and for nothing else.
      expect(decisions.map(([d]) => d.hop).sort((x, y) => x - y), `decision hops of ${ctx.id}`).toEqual(Array.from({ length: ctx.hops }, (_, i) => i + 1));
      for (const [d] of decisions) {
        count(`${d.request}:${d.reason}`);
        expect(d.status, `status of ${d.reason}`).toBeTypeOf('number');
        if (d.reason === 'internal_error') {
          internalErrors += 1;
          expect(d.status).toBe(500);
          expect(d.decision).toBe('deny');
        }
      }
      // A close record only for an allowed hop (exactly one), always after its decision.
      const hopsClosed = closes.map(([c]) => c.hop);
      expect(new Set(hopsClosed).size, `close records of ${ctx.id}`).toBe(hopsClosed.length);
      for (const [c, at] of closes) {
        const decided = decisions.find(([d]) => d.hop === c.hop);
        expect(decided?.[0].decision, `decision of closed hop ${c.hop}`).toBe('allow');
        expect(at, 'close record after its decision').toBeGreaterThan(decided?.[1] ?? Infinity);
        count(`close:${c.closedBy}`);
        if (c.closedBy === 'relay_failed') relayFailed += 1;
      }
      for (const [d] of decisions) if (d.decision === 'allow') expect(hopsClosed, `close record of allowed hop ${d.hop}`).toContain(d.hop);
      // No token and no query string in any record (docs/audit-log.md, Redaction).
      for (const [r] of records) {
        const text = JSON.stringify(r);
        expect(text).not.toContain(TOKEN_A);
        expect(text).not.toContain(TOKEN_B);
        expect(text).not.toContain(SECRET);
      }
    }

    // Every answer the client saw is its hop's decision: no answer without a record.
    const [first] = accepted;
    const ordered = first === undefined ? [] : decisionsOf(first.ctx.id).sort((x, y) => x.hop - y.hop);
    if (run.script.listener === 'http') {
      expect(accepted.length, 'one connection').toBeLessThanOrEqual(1);
      expect(result.statuses.length).toBeLessThanOrEqual(ordered.length);
      expect(result.statuses, 'answers the client saw vs decision statuses').toEqual(ordered.slice(0, result.statuses.length).map((d) => d.status));
    } else {
      if (result.socks.authStatus !== null) expect(ordered.length).toBe(1);
      if (result.socks.authStatus === 1) expect(ordered[0]?.decision).toBe('deny');
      const reason = ordered[0]?.reason ?? 'granted';
      // BIND and UDP ASSOCIATE are answered "command not supported" (RFC 1928 §6, 0x07), the rest by reason.
      const expected = run.script.cmd !== 1 && reason === 'request_malformed' ? 0x07 : socksReplyCode(reason);
      if (result.socks.reply !== null) expect(result.socks.reply, `SOCKS5 reply for ${reason}`).toBe(expected);
    }

    // Each fault that fired ended exactly one hop: denied internal_error, or, if allowed already, relay_failed.
    expect(internalErrors + relayFailed, `fault ${run.fault} fired ${injected.fired} time(s); internal_error ${internalErrors}, relay_failed ${relayFailed}`).toBe(injected.fired);

    if (injected.fired > 0) count(`fault:${run.fault}`);
    count(`script:${run.script.listener}${run.script.listener === 'http' ? `:${run.script.msgs.map((m) => m.method[0]).join('')}` : ''}`);

    // The process still serves: a granted request succeeds.
    const health = await rawRequest(httpPort, `GET http://loop.test:${origin.port}/health HTTP/1.1\r\nHost: loop.test:${origin.port}\r\nProxy-Authorization: Bearer ${TOKEN_A}\r\nConnection: close\r\n\r\n`);
    expect(health.text).toMatch(/^HTTP\/1\.1 200 /);
    expect(health.text).toContain('origin:GET:/health');
  }

  it(
    'holds for every listener kind, valid and hostile heads, and a fault at each stage',
    async () => {
      const started = performance.now();
      await fc.assert(fc.asyncProperty(runArb, check), { seed: SEED, numRuns: RUNS, endOnFailure: process.env['SLUICE_PROPERTY_SHRINK'] === undefined });
      console.log(`[property/one-record-per-hop] ${RUNS} runs in ${Math.round(performance.now() - started)} ms; reached: ${[...tally].sort().map(([k, n]) => `${k}=${n}`).join(' ')}`);
    },
    180_000,
  );
});
