// The route module: route selection (direct, proxy, system, PAC), upstream proxy settings, NO_PROXY.
export * from './select-route.js';
export * from './upstream.js';
export * from './upstream-health.js';
export * from './no-proxy.js';
export * from './system-proxy.js';
export * from './pac-source.js';
export * from './pac-evaluator.js';
export * from './pac-answer.js';
export * from './build-routes.js';
