// POST /v1/generations/{generation}/revoke: revokes every grant issued with that label; never lists tokens.
import { controlFailureReply } from '../errors.js';
import type { RouteAction } from '../router.js';
import { publishGrantEvent } from './grants.js';

export const revokeGeneration: RouteAction = async (control, request) => {
  const generation = request.params['generation'] ?? '';
  const result = await control.revokeGeneration(generation);
  if (!result.ok) return controlFailureReply(result);
  // One event per grant, so a reader filtering by grant sees its revoke too.
  for (const grant of result.value.revoked) publishGrantEvent(request, 'revoke', grant, generation);
  return { status: 200, body: { revoked: result.value.revoked, endedConnections: result.value.endedConnections } };
};
