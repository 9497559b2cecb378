// Where `sluice explain` takes the grant from: the running instance, asked through its admin API
// (GET /v1/grants/{id}), when one answers, so run-time grants and revocations count; else the config
// file's grants. Reads only the grant view, which never holds a token or its hash; never changes anything.
import { grantSpecSchema, type GrantSpec } from '../config/index.js';

export interface AdminAnswer {
  readonly status: number;
  readonly body: unknown;
}

/** One GET on the admin API; rejects when nothing answers (cli's callAdmin, wired in by main.ts). */
export type AskAdmin = (path: string) => Promise<AdminAnswer>;

/** The grant `explain` decides against. */
export interface GrantChoice {
  /** Where the grant was looked up, in words: the `source:` line, and the message when it is unknown. */
  readonly from: string;
  /**
   * The running instance's answer: its grant (`revoked` from `revokedAt`), or null when it does not
   * know the id. Absent: no instance answered, and the config's grants decide.
   */
  readonly instance?: { readonly spec: GrantSpec; readonly revoked: boolean } | null;
  /** Why an instance that is there could not be asked (said on stderr); null when nothing is amiss. */
  readonly warning: string | null;
}

export interface GrantLookup {
  readonly grantId: string;
  readonly configFile: string;
  /** The config's admin.listen as `unix:/abs/path` or `http://host:port`; undefined: no admin API to ask. */
  readonly admin: string | undefined;
  readonly ask: AskAdmin;
}

// callAdmin says "is sluice running? (CODE)": these codes mean nobody listens, not that someone refused.
const NOT_RUNNING = /\((ENOENT|ECONNREFUSED)\)$/;

/** Asks the running instance for the grant, if there is one; never rejects. */
export async function chooseGrant(lookup: GrantLookup): Promise<GrantChoice> {
  const { grantId, configFile, admin } = lookup;
  if (admin === undefined) return { from: `the config file ${configFile} (it has no admin.listen, so no running instance was asked)`, warning: null };
  const fallback = (why: string, warning: string | null): GrantChoice => ({ from: `the config file ${configFile} (${why})`, warning });
  let answer: AdminAnswer;
  try {
    answer = await lookup.ask(`/v1/grants/${encodeURIComponent(grantId)}`);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    if (NOT_RUNNING.test(message)) return fallback(`no running instance answered at ${admin}`, null);
    return fallback(`the running instance at ${admin} could not be asked`, `${message}; explaining against the config file's grants`);
  }
  const instance = `the running instance at ${admin}`;
  if (answer.status === 404) return { from: instance, instance: null, warning: null };
  if (answer.status !== 200) {
    const error = errorOf(answer.body);
    const hint = answer.status === 401 || answer.status === 403 ? ' (set SLUICE_ADMIN_TOKEN to its admin token)' : '';
    return fallback(`${instance} refused to show the grant`, `${instance} answered ${answer.status} ${error}${hint}; explaining against the config file's grants`);
  }
  const view = specOfView(answer.body);
  if (view === null) return fallback(`${instance} sent no grant view`, `${instance} answered with something that is not a grant view; explaining against the config file's grants`);
  return { from: `${instance} (a ${view.source === 'runtime' ? 'run-time' : 'config file'} grant)`, instance: { spec: view.spec, revoked: view.revoked }, warning: null };
}

/**
 * The grant spec inside a GET /v1/grants/{id} view, validated as a run-time grant body is: the view's
 * other fields (usage, issuedAt, listen) do not decide a hop and are left out.
 */
export function specOfView(body: unknown): { readonly spec: GrantSpec; readonly revoked: boolean; readonly source: string } | null {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return null;
  const view = body as Record<string, unknown>;
  if (!Array.isArray(view['destinations'])) return null;
  const fields: Record<string, unknown> = {
    destinations: view['destinations'],
    unrestricted: view['unrestricted'],
    allowAddressClasses: view['allowAddressClasses'],
    allowAddresses: view['allowAddresses'],
    requireAttestedAddress: view['requireAttestedAddress'],
    limits: view['limits'],
  };
  if (typeof view['generation'] === 'string') fields['generation'] = view['generation'];
  const parsed = grantSpecSchema.safeParse(fields);
  if (!parsed.success) return null;
  const revokedAt = view['revokedAt'];
  if (revokedAt !== null && typeof revokedAt !== 'string') return null;
  return { spec: parsed.data, revoked: revokedAt !== null, source: typeof view['source'] === 'string' ? view['source'] : 'runtime' };
}

function errorOf(body: unknown): string {
  const error = typeof body === 'object' && body !== null ? (body as { error?: unknown }).error : undefined;
  return typeof error === 'string' ? error.slice(0, 200) : 'error';
}
