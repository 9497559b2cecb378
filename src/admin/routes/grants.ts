// The grant routes: issue, list, show and revoke through ProxyControl; a token leaves only in the issue answer.
import { controlFailureReply, errorReply, type AdminReply } from '../errors.js';
import { parseGrantSpec } from '../grant-spec.js';
import type { RouteAction } from '../router.js';

/** POST /v1/grants: validate, issue, and show the token this once. */
export const issueGrant: RouteAction = async (control, request): Promise<AdminReply> => {
  const parsed = parseGrantSpec(request.body);
  if (!parsed.ok) return errorReply('grant_invalid', parsed.issues);
  const result = await control.issueGrant(parsed.spec);
  if (!result.ok) return controlFailureReply(result);
  const { id, token, grant } = result.value;
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
  return { status: 200, body: { revoked: result.value.grant, endedConnections: result.value.endedConnections } };
};

/** POST /v1/grants/{id}/forget: revoke a run-time grant and drop it from the ledger (`sluice run` does this when its command ends). */
export const forgetGrant: RouteAction = async (control, request) => {
  const result = await control.forgetGrant(request.params['id'] ?? '');
  if (!result.ok) return controlFailureReply(result);
  return { status: 200, body: { forgotten: result.value.grant, endedConnections: result.value.endedConnections } };
};
