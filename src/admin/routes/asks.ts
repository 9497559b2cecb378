// The asks of grants with `ask` (issue 27): list what is pending, answer one. The first answer wins;
// a later one is 409 ask_answered, an id never seen 404 ask_not_found.
import { controlFailureReply } from '../errors.js';
import type { RouteAction } from '../router.js';

/** GET /v1/asks: `{"asks":[{ask, grant, generation, destination, raisedAt, expiresAt, waiting}]}`. */
export const listAsks: RouteAction = async (control) => {
  try {
    return { status: 200, body: { asks: await control.listAsks() } };
  } catch (error) {
    return controlFailureReply({ status: 503, reason: 'ledger_unavailable', issues: [{ path: 'ledger', message: `the ledger store did not list the fleet's asks (${(error as Error).message})` }] });
  }
};

/** POST /v1/asks/{ask}: `{"decision":"allow"|"deny","scope":"once"|"grant"}` (scope defaults to once). */
export const answerAsk: RouteAction = async (control, request) => {
  const result = await control.answerAsk(request.params['ask'] ?? '', request.body);
  if (!result.ok) return controlFailureReply(result);
  return { status: 200, body: { answered: true, ...result.value } };
};
