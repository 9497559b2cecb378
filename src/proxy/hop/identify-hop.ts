// The identify stage of a hop: who this request acts for. A principal is fixed per connection; a later
// request that presents another principal's token is refused (authority never bleeds, principle A5 in docs/principles.md).
import type http from 'node:http';
import { sentReason, type Principal, type Verdict } from '../../core/index.js';
import { identify } from '../../identity/index.js';
import type { ConnectionContext } from './connection-context.js';
import { checkGrantLive } from './decide.js';
import type { Hop } from './hop.js';
import type { ProxyRuntime } from './runtime.js';
import type { RuntimeGrant } from '../../grant/index.js';

export function identifyHop(rt: ProxyRuntime, ctx: ConnectionContext, hop: Hop, req: http.IncomingMessage, known: Principal | null = null): RuntimeGrant | null | Promise<RuntimeGrant | null> {
  return identifyPresented(rt, ctx, hop, req.headers['proxy-authorization'], req.rawHeaders.length / 2, known);
}

/**
 * `header` is a Proxy-Authorization value (SOCKS5 credentials arrive converted to Basic). `known` is the
 * principal the hop cache remembers for exactly these credentials on this listener at the current grant
 * table revision: the token is not hashed again, and everything else is checked as for any hop.
 * Returns the grant, or null with the denial on the hop; a promise only for a fleet-budgeted grant's first hop.
 */
export function identifyPresented(rt: ProxyRuntime, ctx: ConnectionContext, hop: Hop, header: string | undefined, headerCount: number, known: Principal | null = null): RuntimeGrant | null | Promise<RuntimeGrant | null> {
  // A fleet instance cut off from the shared ledger cannot know what was revoked meanwhile: fail closed.
  if (!rt.ledgerFresh()) {
    hop.fail('ledger_unavailable', 'the shared ledger store has not answered within ledger.maxStaleMs');
    return null;
  }
  if (rt.maxHeaderCount > 0 && headerCount > rt.maxHeaderCount) {
    hop.fail('headers_too_large', `more than ${rt.maxHeaderCount} header fields`);
    return null;
  }
  // Identified once per connection: the same credentials on a later keep-alive request are not re-hashed.
  if (ctx.principal !== null && (header === undefined || header === ctx.verifiedAuthorization)) {
    hop.principal = ctx.principal;
  } else {
    if (header !== undefined && rt.authThrottle.isBlocked(header, () => ctx.source)) {
      hop.fail('auth_rate_limited');
      return null;
    }
    let principal = known;
    if (principal === null) {
      const verdict = identify(ctx.identity, rt.registry.tokens, header);
      if (!verdict.ok) {
        // Counted alike, so the throttle is no oracle either: a mismatch is answered as token_invalid.
        if (sentReason(verdict.reason) === 'token_invalid') rt.authThrottle.recordFailure(header, ctx.source);
        hop.fail(verdict.reason, verdict.detail);
        return null;
      }
      principal = verdict.value;
    }
    if (ctx.principal !== null && ctx.principal.grantId !== principal.grantId) {
      // Attributed to the connection's principal, whose connection it is: the record and the body name it.
      hop.principal = ctx.principal;
      hop.fail('principal_changed');
      return null;
    }
    hop.principal = principal;
    ctx.principal = principal;
    ctx.verifiedAuthorization = header ?? null;
  }
  hop.identifyUs = hop.elapsedUs();
  const grant = rt.registry.grants.get(hop.principal.grantId);
  if (!checkGrantLive(hop, grant, rt.now())) return null;
  if (ctx.grantId === null) {
    // The first hop that names the principal attaches the connection to its grant's budgets: at once,
    // or, for a budgeted grant in a fleet, once the shared store has answered.
    const attached = rt.registry.admit(ctx, grant);
    if (attached instanceof Promise) return attached.then((verdict) => admitted(hop, grant, verdict));
    return admitted(hop, grant, attached);
  }
  return grant;
}

function admitted(hop: Hop, grant: RuntimeGrant, verdict: Verdict<void>): RuntimeGrant | null {
  if (verdict.ok) return grant;
  hop.fail(verdict.reason, verdict.detail);
  return null;
}
