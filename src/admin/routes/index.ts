// The admin route table: exact method and path names users script against; never matches or runs requests itself.
import type { AdminRoute } from '../router.js';
import { answerAsk, listAsks } from './asks.js';
import { revokeGeneration } from './generations.js';
import { forgetGrant, issueGrant, listGrants, revokeGrant, rotateGrant, showGrant } from './grants.js';
import { healthz, readyz, reload } from './health.js';

export const ADMIN_ROUTES: readonly AdminRoute[] = [
  { method: 'GET', template: '/healthz', hasBody: false, action: healthz },
  { method: 'GET', template: '/readyz', hasBody: false, action: readyz },
  { method: 'POST', template: '/v1/grants', hasBody: true, action: issueGrant },
  { method: 'GET', template: '/v1/grants', hasBody: false, action: listGrants },
  { method: 'GET', template: '/v1/grants/{id}', hasBody: false, action: showGrant },
  { method: 'DELETE', template: '/v1/grants/{id}', hasBody: false, action: revokeGrant },
  { method: 'POST', template: '/v1/grants/{id}/forget', hasBody: false, action: forgetGrant },
  { method: 'POST', template: '/v1/grants/{id}/rotate', hasBody: true, action: rotateGrant },
  { method: 'POST', template: '/v1/generations/{generation}/revoke', hasBody: false, action: revokeGeneration },
  { method: 'GET', template: '/v1/asks', hasBody: false, action: listAsks },
  { method: 'POST', template: '/v1/asks/{ask}', hasBody: true, action: answerAsk },
  { method: 'POST', template: '/v1/reload', hasBody: false, action: reload },
];
