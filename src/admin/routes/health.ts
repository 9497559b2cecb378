// Liveness, readiness and config reload; answers from ProxyControl only and never touches a listener.
// The admin socket and the metrics listener (metrics-server.ts) answer /healthz and /readyz with these
// same replies: a balancer probing either reads one documented shape (UX review 2026-12-04 finding 9).
import type { ProxyControl } from '../../core/index.js';
import { controlFailureReply, type AdminReply } from '../errors.js';
import type { RouteAction } from '../router.js';

/** GET /healthz: Sluice answers, so it is alive. */
export function healthReply(): AdminReply {
  return { status: 200, body: { status: 'ok' } };
}

/** GET /readyz: 200 `{"status":"ready",…}` when the proxy accepts traffic, else 503 `{"status":"not_ready","detail":…}`. */
export function readinessReply(control: Pick<ProxyControl, 'readiness'>): AdminReply {
  const { ready, detail } = control.readiness();
  return { status: ready ? 200 : 503, body: { status: ready ? 'ready' : 'not_ready', detail } };
}

/** GET /healthz on the admin socket. */
export const healthz: RouteAction = () => healthReply();

/** GET /readyz on the admin socket. */
export const readyz: RouteAction = (control) => readinessReply(control);

/** POST /v1/reload: re-read the config file and apply it atomically, or keep the running one. */
export const reload: RouteAction = async (control) => {
  const result = await control.reload();
  if (!result.ok) return controlFailureReply(result);
  const { endedConnections, changed, needsRestart, listeners } = result.value;
  return { status: 200, body: { reloaded: true, endedConnections, changed, needsRestart, listeners } };
};
