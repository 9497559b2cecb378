// The admin module's face: the admin server, its error table and token helpers; never imports proxy/.
export { startAdminServer, type AdminServer, type AdminServerOptions } from './server.js';
export { AdminErrors, type AdminErrorCode, type AdminErrorBody } from './errors.js';
export { resolveAdminTokenSha256, sha256 as adminTokenSha256 } from './auth.js';
export { MAX_BODY_BYTES } from './http-io.js';
export { ADMIN_ROUTES } from './routes/index.js';
export type { UnixSocketProbe } from '../listen/index.js';
export { startMetricsServer, type MetricsServer } from './metrics-server.js';
export { checkAdminSection } from './check-config.js';
