// POST /v1/generations/{generation}/revoke: revokes every grant issued with that label; never lists tokens.
import { controlFailureReply } from '../errors.js';
import type { RouteAction } from '../router.js';

export const revokeGeneration: RouteAction = async (control, request) => {
  const result = await control.revokeGeneration(request.params['generation'] ?? '');
  if (!result.ok) return controlFailureReply(result);
  return { status: 200, body: { revoked: result.value.revoked, endedConnections: result.value.endedConnections } };
};
