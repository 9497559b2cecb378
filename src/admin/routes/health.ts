// Liveness, readiness and config reload; answers from ProxyControl only and never touches a listener.
import { controlFailureReply } from '../errors.js';
import type { RouteAction } from '../router.js';

/** GET /healthz: the admin server answers, so sluice is alive. */
export const healthz: RouteAction = () => ({ status: 200, body: { status: 'ok' } });

/** GET /readyz: 200 when the proxy accepts traffic, else 503 with the reason. */
export const readyz: RouteAction = (control) => {
  const { ready, detail } = control.readiness();
  return { status: ready ? 200 : 503, body: { status: ready ? 'ready' : 'not_ready', detail } };
};

/** POST /v1/reload: re-read the config file and apply it atomically, or keep the running one. */
export const reload: RouteAction = async (control) => {
  const result = await control.reload();
  if (!result.ok) return controlFailureReply(result);
  const { endedConnections, changed, needsRestart, listeners } = result.value;
  return { status: 200, body: { reloaded: true, endedConnections, changed, needsRestart, listeners } };
};
