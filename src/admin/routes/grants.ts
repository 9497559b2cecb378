// The grant routes: issue, list, show and revoke through ProxyControl; a token leaves only in the issue
// (and rotate) answer, never in the `grant` event each change publishes.
import type { ControlIssue } from '../../core/index.js';
import { MAX_ROTATION_GRACE_MS } from '../../ledger/index.js';
import { controlFailureReply, errorReply, type AdminReply } from '../errors.js';
import { parseGrantSpec } from '../grant-spec.js';
import type { AdminRequest, RouteAction } from '../router.js';

export type GrantAction = 'issue' | 'revoke' | 'forget' | 'rotate';

/** A `grant` event for GET /v1/events, after the change took effect: ids and labels only, never a token. */
export function publishGrantEvent(request: AdminRequest, action: GrantAction, grant: string, generation: string | null): void {
  request.events?.publish('grant', { grant, generation }, { ts: new Date().toISOString(), action, grant, generation });
}

/** POST /v1/grants: validate, issue, and show the token this once. */
export const issueGrant: RouteAction = async (control, request): Promise<AdminReply> => {
  const parsed = parseGrantSpec(request.body);
  if (!parsed.ok) return errorReply('grant_invalid', parsed.issues);
  const result = await control.issueGrant(parsed.spec);
  if (!result.ok) return controlFailureReply(result);
  const { id, token, grant } = result.value;
  publishGrantEvent(request, 'issue', id, grant.generation);
  return { status: 201, body: { id, token, grant } };
};

/**
 * A fleet instance cut off from its store would show a table it cannot vouch for (a grant revoked
 * elsewhere meanwhile would still look live): it answers 503 instead of pretending (docs/fleet.md).
 */
function stale(control: Parameters<RouteAction>[0]): AdminReply | null {
  if (control.ledgerFresh?.() !== false) return null;
  return controlFailureReply({ status: 503, reason: 'ledger_unavailable', issues: [{ path: 'ledger', message: 'this instance has not reached the shared ledger store within ledger.maxStaleMs' }] });
}

/** GET /v1/grants */
export const listGrants: RouteAction = (control) => stale(control) ?? { status: 200, body: { grants: control.listGrants() } };

/** GET /v1/grants/{id} */
export const showGrant: RouteAction = (control, request) => {
  const refused = stale(control);
  if (refused !== null) return refused;
  const grant = control.getGrant(request.params['id'] ?? '');
  return grant === undefined ? errorReply('grant_not_found') : { status: 200, body: grant };
};

/** DELETE /v1/grants/{id}: the grant's live connections end. */
export const revokeGrant: RouteAction = async (control, request) => {
  const id = request.params['id'] ?? '';
  if (control.getGrant(id) === undefined) return errorReply('grant_not_found');
  const result = await control.revokeGrant(id);
  if (!result.ok) return controlFailureReply(result);
  publishGrantEvent(request, 'revoke', result.value.grant.id, result.value.grant.generation);
  return { status: 200, body: { revoked: result.value.grant, endedConnections: result.value.endedConnections } };
};

/** POST /v1/grants/{id}/forget: revoke a run-time grant and drop it from the ledger (`sluice run` does this when its command ends). */
export const forgetGrant: RouteAction = async (control, request) => {
  const result = await control.forgetGrant(request.params['id'] ?? '');
  if (!result.ok) return controlFailureReply(result);
  publishGrantEvent(request, 'forget', result.value.grant.id, result.value.grant.generation);
  return { status: 200, body: { forgotten: result.value.grant, endedConnections: result.value.endedConnections } };
};

/** The rotate body: `{}` or `{"graceMs": N}`, N an integer from 0 to 24 h; anything else is named. */
export function parseRotateBody(body: unknown): { ok: true; graceMs: number } | { ok: false; issues: ControlIssue[] } {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return { ok: false, issues: [{ path: '(root)', message: 'expected a JSON object: {} or {"graceMs": N}' }] };
  const issues: ControlIssue[] = [];
  for (const key of Object.keys(body)) if (key !== 'graceMs') issues.push({ path: key, message: 'unknown key; the only key is graceMs' });
  const grace = (body as { graceMs?: unknown }).graceMs;
  if (grace !== undefined && (typeof grace !== 'number' || !Number.isInteger(grace) || grace < 0 || grace > MAX_ROTATION_GRACE_MS)) {
    issues.push({ path: 'graceMs', message: `expected an integer from 0 to ${MAX_ROTATION_GRACE_MS} (24 h) milliseconds` });
  }
  return issues.length > 0 ? { ok: false, issues } : { ok: true, graceMs: typeof grace === 'number' ? grace : 0 };
}

/** POST /v1/grants/{id}/rotate: a new token, shown this once; the previous one stops now or after graceMs. */
export const rotateGrant: RouteAction = async (control, request) => {
  const parsed = parseRotateBody(request.body);
  if (!parsed.ok) return errorReply('rotation_invalid', parsed.issues);
  const result = await control.rotateGrant(request.params['id'] ?? '', parsed.graceMs);
  if (!result.ok) return controlFailureReply(result);
  const { id, token, grant, previousTokenUntil, endedConnections } = result.value;
  publishGrantEvent(request, 'rotate', id, grant.generation);
  return { status: 200, body: { id, token, grant, previousTokenUntil, endedConnections } };
};
