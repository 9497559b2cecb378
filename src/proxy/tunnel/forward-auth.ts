// Forwards one plain-HTTP request through an upstream proxy whose authentication binds the TCP
// connection (Negotiate, NTLM, or `auto` before it has learned the proxy's offer): the handshake's legs
// and the request travel on one connection, which afterwards serves only this principal's later hops
// (relay/bound-upstreams.ts), so no other principal's hop ever rides a connection the proxy
// authenticated (issue 18).
// NTLM's first leg cannot carry a request body (it is answered 407 by design), so a request with a body
// sends that leg as an OPTIONS of the same URI, a safe method (RFC 9110 §9.2.1, §9.3.7), and the body
// goes once, with the final leg. Not HEAD: undici closes the connection after every HEAD.
import type http from 'node:http';
import { deny, ok, type UpstreamProxy, type Verdict } from '../../core/index.js';
import { authModeOf, defaultAuthContext, MAX_AUTH_LEGS, parseChallenges, ProxyAuthDialogue, type ProxyAuthContext } from '../../egress/index.js';
import { BoundUpstreams, forwardRequest, hasBody, type ForwardBudget, type ForwardResult, type ForwardTarget } from '../../relay/index.js';
import type { ProxyRuntime } from '../hop/runtime.js';

export type Responded = ForwardResult & { phase: 'responded' };

export function settled(result: ForwardResult): Verdict<Responded> {
  if (result.phase === 'responded') return ok(result);
  if (result.phase === 'failed') return deny(result.reason, result.detail);
  // Only an authenticating caller (forward-auth.ts) asks for these phases.
  return deny('internal_error', `unexpected ${result.phase} answer from the upstream relay`);
}

/** Whether a request through this proxy needs a connection of its own (basic and none share the pool). */
export function bindsConnection(proxy: UpstreamProxy, auth: ProxyAuthContext): boolean {
  const mode = authModeOf(proxy);
  if (mode === 'none' || mode === 'basic') return false;
  return mode !== 'auto' || auth.learned.get(proxy.label) !== 'basic';
}

export async function forwardWithProxyAuth(rt: ProxyRuntime, req: http.IncomingMessage, res: http.ServerResponse, target: ForwardTarget, proxy: UpstreamProxy, budget: ForwardBudget | null, grantId: string): Promise<Verdict<Responded>> {
  const verdict = await authenticatedForward(rt, req, res, target, proxy, budget, grantId);
  // An expired ticket or a changed password is an operator's problem: the operational log says so
  // (rate-limited per proxy and reason by upstreamFailureLogger), as it does for CONNECT.
  if (!verdict.ok && verdict.reason.startsWith('upstream_auth')) rt.upstream.onFailure?.({ upstream: proxy.label, reason: verdict.reason, detail: verdict.detail });
  return verdict;
}

async function authenticatedForward(rt: ProxyRuntime, req: http.IncomingMessage, res: http.ServerResponse, target: ForwardTarget, proxy: UpstreamProxy, budget: ForwardBudget | null, grantId: string): Promise<Verdict<Responded>> {
  const withBody = hasBody(req);
  const key = BoundUpstreams.key(grantId, target.origin);
  // A request with a body never starts on a reused connection: a 407 there would come after the body.
  const { client, reused } = rt.boundUpstreams.take(key, target.origin, !withBody);
  const dialogue = new ProxyAuthDialogue(proxy, rt.upstream.auth ?? defaultAuthContext());
  let keep = false;
  try {
    // The proxy authenticated this connection for this principal before: no header, unless it asks again.
    const first = reused ? ok({ authorization: null, sameConnection: false }) : await dialogue.first();
    if (!first.ok) return first;
    let authorization = first.value.authorization;
    for (let i = 0; i <= MAX_AUTH_LEGS; i++) {
      if (withBody && dialogue.awaitsChallenge) {
        const probe = await forwardRequest(client, req, res, { ...target, proxyAuthorization: authorization, takesChallenge: true, method: 'OPTIONS', withoutBody: true }, null);
        if (probe.phase === 'failed') return deny(probe.reason, probe.detail);
        if (probe.phase === 'challenged') {
          const next = await dialogue.answer(parseChallenges(probe.challenges));
          if (!next.ok) return next;
          authorization = next.value.authorization;
          continue;
        }
        // The proxy let the probe through without (more) authentication: the request goes as it is.
        authorization = null;
      }
      const sent = await forwardRequest(client, req, res, { ...target, proxyAuthorization: authorization, takesChallenge: true }, budget);
      if (sent.phase !== 'challenged') {
        keep = sent.phase === 'responded' && sent.closedBy === null;
        return settled(sent);
      }
      const next = await dialogue.answer(parseChallenges(sent.challenges));
      if (!next.ok) return next;
      // The body went with this leg and cannot be sent again.
      if (withBody) return deny('upstream_auth_failed', `${dialogue.chosen ?? 'auth'}: ${proxy.label} asked for another leg after the request body was sent (407)`);
      authorization = next.value.authorization;
    }
    return deny('upstream_auth_failed', `${dialogue.chosen ?? 'auth'}: ${proxy.label} still answered 407 after ${MAX_AUTH_LEGS} legs`);
  } finally {
    // Only after a complete exchange does the connection go back, to this principal's idle list.
    rt.boundUpstreams.give(key, client, keep);
  }
}
