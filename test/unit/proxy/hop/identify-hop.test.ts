// The identify stage of a hop: who the request acts for, fixed once per connection (authority never
// bleeds between principals, principle A5 in docs/principles.md). What a hostile client tries: another
// grant's token on a connection already identified, guessing tokens past the auth throttle (CWE-307), a
// header-count flood, a token of a revoked, expired or vanished grant, and a connection past its grant's
// budgets. Everything here is the real thing (GrantRegistry, AuthThrottle, TokenStore, ConnectionContext,
// Hop) except the parts of ProxyRuntime the stage never reads.
import http from 'node:http';
import net from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { grantSpecSchema } from '../../../../src/config/index.js';
import { AuthThrottle, GrantRegistry, type RuntimeGrant } from '../../../../src/grant/index.js';
import { sha256 } from '../../../../src/identity/index.js';
import { SelfAddresses } from '../../../../src/resolve/index.js';
import { ConnectionContext } from '../../../../src/proxy/hop/connection-context.js';
import { Hop } from '../../../../src/proxy/hop/hop.js';
import { identifyHop, identifyPresented } from '../../../../src/proxy/hop/identify-hop.js';
import type { ProxyRuntime } from '../../../../src/proxy/hop/runtime.js';
import { waitFor } from '../../../support/wait.js';

const TOKEN_A = 'token-of-a-0123456789';
const TOKEN_B = 'token-of-b-9876543210';
const basic = (user: string, token: string): string => `Basic ${Buffer.from(`${user}:${token}`).toString('base64')}`;
const bearer = (token: string): string => `Bearer ${token}`;
const PER_GRANT_ID = 3;
const PER_SOURCE = 10;
const MAX_HEADERS = 50;

interface Fixture {
  readonly rt: ProxyRuntime;
  readonly registry: GrantRegistry;
  readonly throttle: AuthThrottle;
  /** The clock both the registry and the stage read (ms since the epoch). */
  now: number;
}

const registries: GrantRegistry[] = [];
const sockets: net.Socket[] = [];

afterEach(() => {
  for (const r of registries.splice(0)) r.close();
  for (const s of sockets.splice(0)) s.destroy();
  vi.restoreAllMocks();
});

/** Grants a (token TOKEN_A) and b (token TOKEN_B); `limits` and `expiresAt` go to grant a. */
function fixture(options: { limits?: Record<string, unknown>; maxHeaderCount?: number } = {}): Fixture {
  const f = { now: Date.parse('2030-01-01T00:00:00Z') } as Fixture & { rt: ProxyRuntime; registry: GrantRegistry; throttle: AuthThrottle };
  const registry = new GrantRegistry(new SelfAddresses([]), () => f.now);
  registries.push(registry);
  for (const [id, token, limits] of [['a', TOKEN_A, options.limits ?? {}], ['b', TOKEN_B, {}]] as const) {
    const compiled = registry.compile({ id, spec: grantSpecSchema.parse({ destinations: ['https://a.test'], limits }), revoked: false, tokenSha256: sha256(token) }, '');
    if (!compiled.ok) throw new Error(JSON.stringify(compiled.issues));
    registry.install([{ grant: compiled.value, tokenSha256: sha256(token) }]);
  }
  const throttle = new AuthThrottle({ perGrantId: PER_GRANT_ID, perSource: PER_SOURCE }, () => f.now);
  const rt = { registry, authThrottle: throttle, maxHeaderCount: options.maxHeaderCount ?? MAX_HEADERS, now: () => f.now, ledgerFresh: () => true };
  return Object.assign(f, { rt: rt as unknown as ProxyRuntime, registry, throttle });
}

/** A client connection on a token listener (boundGrant null) or on grant `bound`'s dedicated listener. */
function connection(bound: string | null = null): ConnectionContext {
  const socket = new net.Socket();
  sockets.push(socket);
  return new ConnectionContext(socket, bound === null ? 'proxy' : `grant-${bound}`, { boundGrant: bound });
}

/** One CONNECT hop on `ctx` presenting `header` with `headerCount` fields. */
function identifyOn(f: Fixture, ctx: ConnectionContext, header: string | undefined, headerCount = 3): { hop: Hop; grant: RuntimeGrant | null } {
  const hop = new Hop(ctx.nextHop(), 'connect', 'CONNECT', 'a.test:443');
  const grant = identifyPresented(f.rt, ctx, hop, header, headerCount);
  // Without a fleet's shared budgets, identification never waits.
  if (grant instanceof Promise) throw new Error('identifyPresented returned a promise without shared budgets');
  return { hop, grant };
}

function expectRefused(result: { hop: Hop; grant: unknown }, reason: string): void {
  expect(result.grant).toBeNull();
  expect(result.hop.reason).toBe(reason);
  expect(result.hop.grant).toBeNull();
  expect(result.hop.identifyUs).toBeNull();
}

describe('identifyPresented: who the hop acts for', () => {
  it.each([
    ['Basic grant id and token', basic('a', TOKEN_A)],
    ['Bearer token', bearer(TOKEN_A)],
    ['Basic with an empty user (the token alone names the grant)', basic('', TOKEN_A)],
  ])('identifies grant a from %s and attaches the connection to it', (_label, header) => {
    const f = fixture();
    const ctx = connection();
    const { hop, grant } = identifyOn(f, ctx, header);
    expect(grant?.id).toBe('a');
    expect(hop.reason).toBe('granted');
    expect(hop.principal).toEqual({ grantId: 'a', via: 'token' });
    expect(hop.grant).toBe(grant);
    expect(hop.identifyUs).toEqual(expect.any(Number));
    expect(ctx.principal).toEqual({ grantId: 'a', via: 'token' });
    expect(ctx.verifiedAuthorization).toBe(header);
    expect(ctx.grantId).toBe('a');
    expect(f.registry.activeConnections('a')).toBe(1);
  });

  it.each([
    ['no Proxy-Authorization', undefined, 'token_missing'],
    ['an empty Proxy-Authorization', '', 'token_missing'],
    ['a wrong token for a real grant id', basic('a', 'guess'), 'token_invalid'],
    ['grant b’s token under grant a’s id', basic('a', TOKEN_B), 'token_invalid'],
    ['a grant id that does not exist', basic('nobody', TOKEN_A), 'token_invalid'],
    ['a Bearer token no grant has', bearer('guess'), 'token_invalid'],
    ['an unreadable Basic value', 'Basic %%%', 'token_invalid'],
    ['another scheme', `Digest ${TOKEN_A}`, 'token_invalid'],
  ])('refuses %s on a token listener, and attaches nothing', (_label, header, reason) => {
    const f = fixture();
    const ctx = connection();
    const result = identifyOn(f, ctx, header);
    expectRefused(result, reason);
    expect(result.hop.principal).toBeNull();
    expect(ctx.principal).toBeNull();
    expect(ctx.grantId).toBeNull();
    expect(f.registry.activeConnections('a') + f.registry.activeConnections('b')).toBe(0);
  });

  it('on a dedicated listener acts for its grant without a token, or with that grant’s own token', () => {
    const f = fixture();
    const none = identifyOn(f, connection('a'), undefined);
    expect(none.grant?.id).toBe('a');
    expect(none.hop.principal).toEqual({ grantId: 'a', via: 'listener' });
    const own = identifyOn(f, connection('a'), basic('a', TOKEN_A));
    expect(own.grant?.id).toBe('a');
  });

  it('on a dedicated listener refuses another grant’s valid token (token_grant_mismatch, answered as token_invalid)', () => {
    const f = fixture();
    const ctx = connection('a');
    expectRefused(identifyOn(f, ctx, basic('b', TOKEN_B)), 'token_grant_mismatch');
    expect(ctx.principal).toBeNull();
    expect(f.registry.activeConnections('b')).toBe(0);
  });

  it('answers grant_unknown on a dedicated listener whose grant is not in the table', () => {
    const f = fixture();
    const ctx = connection('ghost');
    const result = identifyOn(f, ctx, undefined);
    expect(result.grant).toBeNull();
    expect(result.hop.reason).toBe('grant_unknown');
    expect(ctx.grantId).toBeNull();
  });

  it('answers token_invalid, not grant_unknown, for a token whose grant has left the table: no oracle for grant ids', () => {
    const f = fixture();
    f.registry.tokens.set('ghost', sha256('ghost-token'));
    const result = identifyOn(f, connection(), basic('ghost', 'ghost-token'));
    expect(result.grant).toBeNull();
    expect(result.hop.reason).toBe('token_invalid');
  });
});

describe('identifyPresented: a principal is fixed per connection', () => {
  it('refuses another grant’s valid token on a connection identified as a (principal_changed), and a stays', () => {
    const f = fixture();
    const ctx = connection();
    identifyOn(f, ctx, basic('a', TOKEN_A));
    const changed = identifyOn(f, ctx, basic('b', TOKEN_B));
    expectRefused(changed, 'principal_changed');
    // The refused hop is attributed to the connection's principal (a), never to the presented grant (b).
    expect(changed.hop.principal).toEqual({ grantId: 'a', via: 'token' });
    expect(ctx.principal).toEqual({ grantId: 'a', via: 'token' });
    expect(ctx.verifiedAuthorization).toBe(basic('a', TOKEN_A));
    expect(f.registry.activeConnections('b')).toBe(0);
    // Bearer is refused alike, and the next request without credentials still acts for a, not b.
    expectRefused(identifyOn(f, ctx, bearer(TOKEN_B)), 'principal_changed');
    expect(identifyOn(f, ctx, undefined).hop.principal).toEqual({ grantId: 'a', via: 'token' });
  });

  it('does not let a wrong token on an identified connection pass as its principal', () => {
    const f = fixture();
    const ctx = connection();
    identifyOn(f, ctx, basic('a', TOKEN_A));
    expectRefused(identifyOn(f, ctx, basic('a', 'guess')), 'token_invalid');
    expect(ctx.verifiedAuthorization).toBe(basic('a', TOKEN_A));
  });

  it('does not re-verify the credentials that identified the connection, nor a request without any', () => {
    const f = fixture();
    const verify = vi.spyOn(f.registry.tokens, 'verify');
    const ctx = connection();
    for (const header of [basic('a', TOKEN_A), basic('a', TOKEN_A), undefined, basic('a', TOKEN_A)]) {
      const { grant, hop } = identifyOn(f, ctx, header);
      expect(grant?.id).toBe('a');
      expect(hop.principal).toEqual({ grantId: 'a', via: 'token' });
    }
    expect(verify).toHaveBeenCalledTimes(1);
  });

  it('verifies the same token presented another way, and keeps the principal when it is the same grant', () => {
    const f = fixture();
    const find = vi.spyOn(f.registry.tokens, 'findByToken');
    const ctx = connection();
    identifyOn(f, ctx, basic('a', TOKEN_A));
    expect(identifyOn(f, ctx, bearer(TOKEN_A)).grant?.id).toBe('a');
    expect(find).toHaveBeenCalledTimes(1);
    expect(ctx.verifiedAuthorization).toBe(bearer(TOKEN_A));
  });

  it('attaches the connection to its grant’s budgets once, however many hops it carries', () => {
    const f = fixture();
    const ctx = connection();
    for (let i = 0; i < 5; i += 1) identifyOn(f, ctx, basic('a', TOKEN_A));
    expect(f.registry.activeConnections('a')).toBe(1);
    expect(f.registry.usageOf('a').connections).toBe(1);
    expect(ctx.hops).toBe(5);
  });
});

describe('identifyPresented: the auth throttle', () => {
  it('counts each token_invalid and, past the limit, refuses even the right token before checking it', () => {
    const f = fixture();
    for (let i = 0; i < PER_GRANT_ID; i += 1) {
      expect(f.throttle.isBlocked(basic('a', TOKEN_A), () => 'unix:proxy')).toBe(false);
      expectRefused(identifyOn(f, connection(), basic('a', `guess-${i}`)), 'token_invalid');
    }
    const verify = vi.spyOn(f.registry.tokens, 'verify');
    const ctx = connection();
    expectRefused(identifyOn(f, ctx, basic('a', TOKEN_A)), 'auth_rate_limited');
    expect(verify).not.toHaveBeenCalled();
    expect(ctx.principal).toBeNull();
    // Only the guessed grant id is locked out: b presents its own token from the same address.
    expect(identifyOn(f, connection(), basic('b', TOKEN_B)).grant?.id).toBe('b');
    // A minute later the window has passed.
    f.now += 60_000;
    expect(identifyOn(f, connection(), basic('a', TOKEN_A)).grant?.id).toBe('a');
  });

  it('counts Bearer guesses against the source address, which then cannot present a Bearer token', () => {
    const f = fixture();
    for (let i = 0; i < PER_GRANT_ID; i += 1) expectRefused(identifyOn(f, connection(), bearer(`guess-${i}`)), 'token_invalid');
    const find = vi.spyOn(f.registry.tokens, 'findByToken');
    expectRefused(identifyOn(f, connection(), bearer(TOKEN_A)), 'auth_rate_limited');
    expect(find).not.toHaveBeenCalled();
  });

  it('blocks every grant id from a source past perSource failures', () => {
    const f = fixture();
    for (let i = 0; i < PER_SOURCE; i += 1) identifyOn(f, connection(), basic(`id-${i}`, 'guess'));
    expectRefused(identifyOn(f, connection(), basic('b', TOKEN_B)), 'auth_rate_limited');
  });

  it('counts a token_grant_mismatch like a token_invalid, so the throttle is no oracle either', () => {
    const f = fixture();
    for (let i = 0; i < PER_GRANT_ID; i += 1) expectRefused(identifyOn(f, connection('a'), basic('b', TOKEN_B)), 'token_grant_mismatch');
    expectRefused(identifyOn(f, connection(), basic('b', TOKEN_B)), 'auth_rate_limited');
  });

  it('does not count a missing token, or a refusal the throttle itself made', () => {
    const f = fixture();
    for (let i = 0; i < PER_SOURCE * 2; i += 1) expectRefused(identifyOn(f, connection(), undefined), 'token_missing');
    expect(identifyOn(f, connection(), basic('a', TOKEN_A)).grant?.id).toBe('a');
    for (let i = 0; i < PER_GRANT_ID; i += 1) identifyOn(f, connection(), basic('a', 'guess'));
    // Blocked attempts for a add nothing to the source's count: b still gets through afterwards.
    for (let i = 0; i < PER_SOURCE; i += 1) expectRefused(identifyOn(f, connection(), basic('a', 'guess')), 'auth_rate_limited');
    expect(identifyOn(f, connection(), basic('b', TOKEN_B)).grant?.id).toBe('b');
  });

  it('does not lock out a connection already identified when someone else guesses its grant id', () => {
    const f = fixture();
    const established = connection();
    identifyOn(f, established, basic('a', TOKEN_A));
    for (let i = 0; i < PER_GRANT_ID; i += 1) identifyOn(f, connection(), basic('a', 'guess'));
    expectRefused(identifyOn(f, connection(), basic('a', TOKEN_A)), 'auth_rate_limited');
    expect(identifyOn(f, established, basic('a', TOKEN_A)).grant?.id).toBe('a');
  });
});

describe('identifyPresented: a header-count flood', () => {
  it('refuses more than maxHeaderCount fields before any token is checked or any failure counted', () => {
    const f = fixture();
    const verify = vi.spyOn(f.registry.tokens, 'verify');
    const ctx = connection();
    for (let i = 0; i < PER_GRANT_ID + 1; i += 1) {
      const result = identifyOn(f, ctx, basic('a', 'guess'), MAX_HEADERS + 1);
      expectRefused(result, 'headers_too_large');
      expect(result.hop.detail).toBe(`more than ${MAX_HEADERS} header fields`);
    }
    expect(verify).not.toHaveBeenCalled();
    expect(ctx.principal).toBeNull();
    expect(identifyOn(f, ctx, basic('a', TOKEN_A), MAX_HEADERS).grant?.id).toBe('a');
  });

  it('refuses a flood on a connection already identified, too', () => {
    const f = fixture();
    const ctx = connection();
    identifyOn(f, ctx, basic('a', TOKEN_A));
    expectRefused(identifyOn(f, ctx, undefined, MAX_HEADERS + 1), 'headers_too_large');
  });

  it('has no header-count limit when maxHeaderCount is 0', () => {
    const f = fixture({ maxHeaderCount: 0 });
    expect(identifyOn(f, connection(), basic('a', TOKEN_A), 100_000).grant?.id).toBe('a');
  });

  it('identifyHop counts the fields node:http parsed, and reads Proxy-Authorization from them', async () => {
    const f = fixture();
    const reasons: string[] = [];
    const server = http.createServer((req, res) => {
      const hop = new Hop(1, 'forward', req.method ?? 'GET', req.url ?? '');
      identifyHop(f.rt, connection(), hop, req);
      reasons.push(hop.reason);
      res.end();
    });
    server.maxHeadersCount = 0; // node:http keeps every field; the stage counts them
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const port = (server.address() as net.AddressInfo).port;
      const send = async (fields: number): Promise<void> => {
        const headers: Record<string, string> = { 'Proxy-Authorization': basic('a', TOKEN_A) };
        // Host and Connection are the client's; the rest fill up to `fields`.
        for (let i = 0; i < fields - 3; i += 1) headers[`x-filler-${i}`] = 'x';
        const req = http.request({ port, host: '127.0.0.1', path: 'http://a.test/', headers, agent: false });
        const res = waitFor<http.IncomingMessage>(req, 'response');
        req.end();
        (await res).resume();
      };
      await send(MAX_HEADERS);
      await send(MAX_HEADERS + 1);
      expect(reasons).toEqual(['granted', 'headers_too_large']);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});

describe('identifyPresented: the grant must be live', () => {
  it('refuses a revoked grant’s token, naming the principal for the audit record', () => {
    const f = fixture();
    f.registry.revoke('a');
    const result = identifyOn(f, connection(), basic('a', TOKEN_A));
    expect(result.grant).toBeNull();
    expect(result.hop.reason).toBe('grant_revoked');
    expect(result.hop.principal).toEqual({ grantId: 'a', via: 'token' });
  });

  it('refuses the next hop of a connection identified before the grant was revoked', () => {
    const f = fixture();
    const ctx = connection();
    identifyOn(f, ctx, basic('a', TOKEN_A));
    f.registry.revoke('a');
    expect(ctx.endedBy).toBe('revoked');
    expect(identifyOn(f, ctx, basic('a', TOKEN_A)).hop.reason).toBe('grant_revoked');
    expect(identifyOn(f, ctx, undefined).hop.reason).toBe('grant_revoked');
  });

  it('refuses a grant from its expiresAt on, on a new connection and on one identified before', () => {
    const f = fixture({ limits: { expiresAt: '2030-01-01T00:00:01Z' } });
    const ctx = connection();
    f.now = Date.parse('2030-01-01T00:00:00.999Z');
    expect(identifyOn(f, ctx, basic('a', TOKEN_A)).grant?.id).toBe('a');
    f.now += 1;
    expect(identifyOn(f, ctx, undefined).hop.reason).toBe('grant_expired');
    expect(identifyOn(f, connection(), basic('a', TOKEN_A)).hop.reason).toBe('grant_expired');
  });

  it('answers token_invalid for the token of a grant a reload removed', () => {
    const f = fixture();
    f.registry.remove(['a'], 'grant_changed');
    expectRefused(identifyOn(f, connection(), basic('a', TOKEN_A)), 'token_invalid');
  });
});

describe('identifyPresented: budgets are enforced when the connection attaches', () => {
  it('refuses a connection past maxConcurrent, and admits one again once a live one closes', async () => {
    const f = fixture({ limits: { maxConcurrent: 1 } });
    const first = connection();
    expect(identifyOn(f, first, basic('a', TOKEN_A)).grant?.id).toBe('a');
    const second = connection();
    const refused = identifyOn(f, second, basic('a', TOKEN_A));
    expect(refused.grant).toBeNull();
    expect(refused.hop.reason).toBe('connection_limit_reached');
    expect(second.grantId).toBeNull();
    // Another grant is not affected.
    expect(identifyOn(f, connection(), basic('b', TOKEN_B)).grant?.id).toBe('b');
    const closed = waitFor(first.socket, 'close');
    first.socket.destroy();
    await closed;
    expect(identifyOn(f, connection(), basic('a', TOKEN_A)).grant?.id).toBe('a');
  });

  it('refuses a connection past maxConnections, even after the earlier ones closed', async () => {
    const f = fixture({ limits: { maxConnections: 1 } });
    const first = connection();
    identifyOn(f, first, basic('a', TOKEN_A));
    const closed = waitFor(first.socket, 'close');
    first.socket.destroy();
    await closed;
    expect(identifyOn(f, connection(), basic('a', TOKEN_A)).hop.reason).toBe('connection_quota_exhausted');
  });

  it('refuses a new connection once the grant’s maxBytes is spent', () => {
    const f = fixture({ limits: { maxBytes: 100 } });
    f.registry.addBytes('a', 100);
    const result = identifyOn(f, connection(), basic('a', TOKEN_A));
    expect(result.grant).toBeNull();
    expect(result.hop.reason).toBe('byte_limit_reached');
  });
});
