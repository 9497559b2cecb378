// The admin API's own error codes and their HTTP statuses, declared once; never carries a token or a body.
import type { ControlIssue } from '../core/index.js';

/** Errors the admin layer itself answers with; `ProxyControl` failures pass their own `reason` through. */
export const AdminErrors = {
  admin_token_invalid: { status: 401, message: 'missing or wrong admin bearer token' },
  not_found: { status: 404, message: 'no such admin route' },
  method_not_allowed: { status: 405, message: 'the route exists but not with this method' },
  body_too_large: { status: 413, message: 'request body is larger than 64 KiB' },
  body_invalid_json: { status: 400, message: 'request body is not valid JSON' },
  grant_invalid: { status: 400, message: 'the grant spec does not validate' },
  grant_id_invalid: { status: 400, message: 'the grant id in the path (or the grant filter of /v1/events) is malformed' },
  generation_invalid: { status: 400, message: 'the generation in the path (or the generation filter of /v1/events) is malformed' },
  kind_invalid: { status: 400, message: 'the kind filter of /v1/events names an unknown kind: use decision, ask, ask_answered, grant' },
  last_event_id_invalid: { status: 400, message: 'Last-Event-ID is not the integer id of an event' },
  grant_not_found: { status: 404, message: 'no grant with this id' },
  rotation_invalid: { status: 400, message: 'the rotate body does not validate: {} or {"graceMs": 0 to 86400000}' },
  grant_from_config: { status: 409, message: 'the grant comes from the config file, which holds its token: it cannot be forgotten or rotated through the API' },
  grant_revoked: { status: 409, message: 'the grant is revoked; a revoked grant gets no new token' },
  rotation_conflict: { status: 409, message: 'another rotation of this grant won; nothing was changed, rotate again' },
  ask_id_invalid: { status: 400, message: 'the ask id in the path is malformed' },
  ask_answer_invalid: { status: 400, message: 'the answer does not validate: {"decision":"allow"|"deny","scope":"once"|"grant"}' },
  ask_not_found: { status: 404, message: 'no pending or answered ask with this id' },
  ask_answered: { status: 409, message: 'the ask was already answered, or timed out; the first answer stands' },
  internal_error: { status: 500, message: 'the admin handler failed; see the sluice log' },
} as const satisfies Record<string, { readonly status: number; readonly message: string }>;
export type AdminErrorCode = keyof typeof AdminErrors;

/** The body of every error answer: a stable machine code plus key-path issues. */
export interface AdminErrorBody {
  readonly error: string;
  readonly issues?: readonly ControlIssue[];
}

export interface AdminReply {
  readonly status: number;
  readonly body: unknown;
  readonly headers?: Readonly<Record<string, string>>;
}

export function errorReply(code: AdminErrorCode, issues?: readonly ControlIssue[], headers?: Readonly<Record<string, string>>): AdminReply {
  const body: AdminErrorBody = issues === undefined ? { error: code } : { error: code, issues };
  return headers === undefined ? { status: AdminErrors[code].status, body } : { status: AdminErrors[code].status, body, headers };
}

/** A `ProxyControl` failure keeps its own status and reason code. */
export function controlFailureReply(failure: { readonly status: number; readonly reason: string; readonly issues: readonly ControlIssue[] }): AdminReply {
  return { status: failure.status, body: { error: failure.reason, issues: failure.issues } satisfies AdminErrorBody };
}
