// Matches a method and path against the admin route table and decodes path params; never runs a handler.
import type { ProxyControl } from '../core/index.js';
import type { EventRing } from '../telemetry/index.js';
import type { AdminErrorCode, AdminReply } from './errors.js';

export interface AdminRequest {
  readonly params: Readonly<Record<string, string>>;
  /** The parsed JSON body, or undefined when the route takes none. */
  readonly body: unknown;
  /** Where a route publishes what it changed (GET /v1/events); absent: nobody can watch. */
  readonly events?: EventRing | undefined;
}

export type RouteAction = (control: ProxyControl, request: AdminRequest) => AdminReply | Promise<AdminReply>;

export interface AdminRoute {
  readonly method: 'GET' | 'POST' | 'DELETE';
  /** e.g. `/v1/grants/{id}`: also the name logged for the request. */
  readonly template: string;
  readonly hasBody: boolean;
  readonly action: RouteAction;
}

/** What matching needs of a route: the JSON routes and the server's streaming route both have it. */
export interface RouteShape {
  readonly method: string;
  readonly template: string;
}

export type RouteMatch<R extends RouteShape = AdminRoute> =
  | { readonly kind: 'found'; readonly template: string; readonly route: R; readonly params: Readonly<Record<string, string>> }
  | { readonly kind: 'method_not_allowed'; readonly template: string; readonly allow: readonly string[] }
  | { readonly kind: 'param_invalid'; readonly template: string; readonly param: string; readonly error: AdminErrorCode }
  | { readonly kind: 'not_found' };

/** Grant ids and generation labels: the same alphabet the ledger and config use. */
export const PARAM_PATTERN = /^[A-Za-z0-9_.:-]{1,128}$/;
export const PARAM_MESSAGE = 'expected letters, digits, _ . : - (1-128 characters)';

const PARAM_ERRORS: Readonly<Record<string, AdminErrorCode>> = { id: 'grant_id_invalid', generation: 'generation_invalid', ask: 'ask_id_invalid' };

export function matchRoute<R extends RouteShape>(routes: readonly R[], method: string, pathname: string): RouteMatch<R> {
  const segments = pathname.split('/');
  let template: string | null = null;
  const allow: string[] = [];
  for (const route of routes) {
    const raw = matchTemplate(route.template, segments);
    if (raw === null) continue;
    template = route.template;
    if (route.method !== method) {
      allow.push(route.method);
      continue;
    }
    const params: Record<string, string> = {};
    for (const [name, value] of Object.entries(raw)) {
      const decoded = decodeParam(value);
      if (decoded === null || !PARAM_PATTERN.test(decoded)) {
        return { kind: 'param_invalid', template, param: name, error: PARAM_ERRORS[name] ?? 'not_found' };
      }
      params[name] = decoded;
    }
    return { kind: 'found', template, route, params };
  }
  return template === null ? { kind: 'not_found' } : { kind: 'method_not_allowed', template, allow };
}

function matchTemplate(template: string, segments: readonly string[]): Record<string, string> | null {
  const parts = template.split('/');
  if (parts.length !== segments.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i] ?? '';
    const segment = segments[i] ?? '';
    if (part.startsWith('{') && part.endsWith('}')) {
      if (segment === '') return null;
      params[part.slice(1, -1)] = segment;
    } else if (part !== segment) {
      return null;
    }
  }
  return params;
}

function decodeParam(value: string): string | null {
  try {
    return decodeURIComponent(value);
  } catch {
    return null;
  }
}
