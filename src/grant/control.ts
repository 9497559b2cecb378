// The ProxyControl port the admin API drives: issue, list, revoke, rotate, generation revoke, reload,
// readiness. Every change goes to the ledger first (durable), then to the grants in force; a token is
// returned once, by issue or rotate, and is in no view, log line or state file. Each change is logged
// at info by grant id.
import { ProxyError, type ControlIssue, type ControlResult, type GrantView, type ProxyControl, type ReloadOutcome } from '../core/index.js';
import { formatKeyPath, grantSpecSchema, resolveListen, type GrantSpec } from '../config/index.js';
import type { GrantRecord, Ledger, StandingAnswer } from '../ledger/index.js';
import type { OperationalLog } from '../audit/index.js';
import type { AskRegistry } from './asks.js';
import type { DedicatedListeners } from './dedicated-listeners.js';
import type { GrantRegistry } from './grant-registry.js';

export interface ControlDeps {
  readonly ledger: Ledger;
  readonly registry: GrantRegistry;
  /** The asks of grants with `ask` (GET/POST /v1/asks); absent: none is ever pending. */
  readonly asks?: AskRegistry | undefined;
  readonly dedicated: DedicatedListeners;
  /** Sluice's working directory: a relative `"listen": "unix:…"` resolves against it, as config's do. */
  readonly cwd: string;
  readonly reload: () => Promise<ControlResult<ReloadOutcome>>;
  readonly readiness: () => { readonly ready: boolean; readonly detail: string };
  /** False while a shared ledger store is out of reach for longer than ledger.maxStaleMs. */
  readonly ledgerFresh: () => boolean;
  /** The operational log: grant changes at info by id (never a token), revoked config grants at warn. */
  readonly log?: OperationalLog;
}

const NO_LOG: OperationalLog = { info: () => undefined, warn: () => undefined, error: () => undefined };

/** Puts a rotated record's token hashes in force; returns the connections ended (their token no longer verifies). */
export function installRotation(registry: GrantRegistry, record: GrantRecord): number {
  if (record.tokenSha256 === null) return 0;
  const previous = record.previousToken === undefined ? null : { sha256: Buffer.from(record.previousToken.sha256, 'hex'), untilMs: Date.parse(record.previousToken.until) };
  return registry.rotateToken(record.id, Buffer.from(record.tokenSha256, 'hex'), previous);
}

function warnRevokedConfig(log: OperationalLog, ids: readonly string[]): void {
  for (const id of ids) {
    log.warn({ grant: id }, `config grant ${id} stays revoked: a revocation is permanent; to grant it again, give it a new id in the config file (docs/admin-api.md)`);
  }
}

const STALE: ControlIssue = { path: 'ledger', message: 'this instance has not reached the shared ledger store within ledger.maxStaleMs; nothing was changed' };

/** A change the shared store could not take: 503 ledger_unavailable with the store's reason (never a password). */
async function throughStore<T>(action: () => Promise<ControlResult<T>>): Promise<ControlResult<T>> {
  try {
    return await action();
  } catch (error) {
    if (error instanceof ProxyError && error.code === 'ERR_LEDGER_STORE_UNAVAILABLE') return fail(503, 'ledger_unavailable', [{ path: 'ledger', message: error.message }]);
    throw error;
  }
}

function fail<T>(status: 400 | 404 | 409 | 500 | 503, reason: string, issues: readonly ControlIssue[] = []): ControlResult<T> {
  return { ok: false, status, reason, issues };
}

/** `usage` is what the grant used; by default read now (forget passes what it read before dropping it). */
export function toGrantView(
  record: GrantRecord,
  registry: GrantRegistry,
  listen: string | null,
  usage = registry.usageView(record.id),
  active = registry.activeConnections(record.id),
  answers: readonly StandingAnswer[] = [],
): GrantView {
  const spec = record.spec;
  const expires = spec.limits.expiresAt;
  const limits: Record<string, number | string> = {};
  for (const [key, value] of Object.entries(spec.limits)) if (value !== undefined) limits[key] = value instanceof Date ? value.toISOString() : value;
  return {
    id: record.id,
    source: record.source,
    generation: spec.generation ?? null,
    destinations: spec.destinations,
    unrestricted: spec.unrestricted,
    allowAddressClasses: spec.allowAddressClasses,
    allowAddresses: spec.allowAddresses,
    requireAttestedAddress: spec.requireAttestedAddress,
    ask: spec.ask === undefined ? null : { timeoutMs: spec.ask.timeoutMs },
    answers: answers.map(({ destination, decision, at }) => ({ destination, decision, at })),
    clientCertificate: spec.clientCertificate ?? null,
    limits,
    issuedAt: record.issuedAt,
    expiresAt: expires === undefined ? null : expires instanceof Date ? expires.toISOString() : expires,
    revokedAt: record.revokedAt,
    listen,
    usage: { activeConnections: active, connections: usage.connections, bytes: usage.bytes },
  };
}

/** POST /v1/asks/{id}: `{"decision":"allow"|"deny","scope":"once"|"grant"}`; the first answer wins. */
async function answerAsk(asks: AskRegistry | undefined, log: OperationalLog, id: string, body: unknown): Promise<ControlResult<{ readonly ask: string; readonly decision: string; readonly scope: string; readonly kept?: boolean }>> {
  const issues: ControlIssue[] = [];
  const fields = typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>) : null;
  if (fields === null) return fail(400, 'ask_answer_invalid', [{ path: '', message: 'expected {"decision":"allow"|"deny","scope":"once"|"grant"}' }]);
  for (const key of Object.keys(fields)) if (key !== 'decision' && key !== 'scope') issues.push({ path: key, message: 'unknown field' });
  const decision = fields['decision'];
  const scope = fields['scope'] ?? 'once';
  if (decision !== 'allow' && decision !== 'deny') issues.push({ path: 'decision', message: 'expected "allow" or "deny"' });
  if (scope !== 'once' && scope !== 'grant') issues.push({ path: 'scope', message: 'expected "once" or "grant"' });
  if (issues.length > 0) return fail(400, 'ask_answer_invalid', issues);
  if (asks === undefined) return fail(404, 'ask_not_found');
  let report: Awaited<ReturnType<AskRegistry['answer']>>;
  try {
    report = await asks.answer(id, { decision: decision as 'allow' | 'deny', scope: scope as 'once' | 'grant' });
  } catch (error) {
    // The fleet's store is away: nobody can tell whether another instance answered first.
    return fail(503, 'ledger_unavailable', [{ path: 'ledger', message: `the ledger store did not take the answer (${(error as Error).message}); nothing was answered` }]);
  }
  if (report.result === 'not_found') return fail(404, 'ask_not_found');
  if (report.result === 'already_answered') return fail(409, 'ask_answered', [{ path: 'id', message: `${id} was already answered (or timed out); the first answer stands` }]);
  // Who allowed what is an operator's question later: every answer is logged, a standing one with whether the ledger kept it.
  log.info({ ask: id, grant: report.grant ?? null, destination: report.destination ?? null, decision, scope, kept: report.kept ?? null }, scope === 'grant' ? `ask answered for the grant's life: ${String(decision)}` : `ask answered once: ${String(decision)}`);
  const value = { ask: id, decision: decision as string, scope: scope as string };
  return { ok: true, value: report.kept === undefined ? value : { ...value, kept: report.kept } };
}

export function createControl(deps: ControlDeps): ProxyControl {
  const { ledger, registry, dedicated } = deps;
  const log = deps.log ?? NO_LOG;
  // A rotation's grace outlives a restart (the record holds the previous hash and its end); another
  // instance's rotation reaches this one's grants in force.
  for (const record of ledger.list()) if (record.previousToken !== undefined && record.revokedAt === null) installRotation(registry, record);
  ledger.onRotated((record) => {
    const ended = installRotation(registry, record);
    log.info({ grant: record.id, previousTokenUntil: record.previousToken?.until ?? null, endedConnections: ended }, 'grant token rotated on another instance');
  });
  warnRevokedConfig(log, ledger.list().filter((r) => r.source === 'config' && r.revokedAt !== null).map((r) => r.id));
  ledger.subscribe((event) => {
    if (event.kind === 'config_loaded') warnRevokedConfig(log, event.revoked);
  });
  const view = (record: GrantRecord): GrantView => toGrantView(record, registry, dedicated.addressOf(record.id) ?? record.spec.listen ?? null, undefined, undefined, ledger.answersOf(record.id));

  async function issueGrant(body: unknown): Promise<ControlResult<{ id: string; token: string; grant: GrantView }>> {
    const parsed = grantSpecSchema.safeParse(body);
    if (!parsed.success) return fail(400, 'grant_invalid', parsed.error.issues.map((i) => ({ path: formatKeyPath(i.path), message: i.message })));
    // Resolved before the in-use check, the bind and the ledger: a relative socket is never bound
    // (issue 23, review 2026-12-04 finding 3).
    const spec: GrantSpec = parsed.data.listen === undefined ? parsed.data : { ...parsed.data, listen: resolveListen(parsed.data.listen, deps.cwd) };
    const probe = registry.compile({ id: 'probe', spec, revoked: false, tokenSha256: null }, '');
    if (!probe.ok) return fail(400, 'grant_invalid', probe.issues);
    if (spec.listen !== undefined && dedicated.isInUse(spec.listen)) return fail(409, 'listen_in_use', [{ path: 'listen', message: `${spec.listen} is already a dedicated listener` }]);
    const holder = spec.clientCertificate === undefined ? undefined : registry.certificateHolder(spec.clientCertificate);
    if (holder !== undefined) return fail(409, 'client_certificate_in_use', [{ path: 'clientCertificate', message: `grant ${holder} already names this certificate: one certificate, one principal` }]);
    const { record, token } = await ledger.issue(spec);
    const compiled = registry.compile({ id: record.id, spec, revoked: false, tokenSha256: null }, '');
    if (!compiled.ok) return fail(500, 'grant_invalid', compiled.issues);
    registry.install([{ grant: compiled.value, tokenSha256: Buffer.from(record.tokenSha256 ?? '', 'hex') }]);
    if (spec.listen !== undefined) {
      try {
        await dedicated.open(record.id, spec.listen);
      } catch (error) {
        // A grant whose listener cannot open is not half-issued: revoke it and say why.
        await ledger.revoke(record.id);
        registry.revoke(record.id);
        return fail(409, 'listen_failed', [{ path: 'listen', message: (error as Error).message }]);
      }
    }
    log.info({ grant: record.id, generation: spec.generation ?? null, listen: spec.listen ?? null }, 'grant issued');
    return { ok: true, value: { id: record.id, token, grant: view(record) } };
  }

  async function rotateGrant(id: string, graceMs: number): Promise<ControlResult<{ id: string; token: string; grant: GrantView; previousTokenUntil: string | null; endedConnections: number }>> {
    const outcome = await ledger.rotate(id, graceMs);
    if (!outcome.ok) {
      if (outcome.why === 'unknown') return fail(404, 'grant_not_found');
      if (outcome.why === 'from_config') return fail(409, 'grant_from_config', [{ path: 'id', message: `${id} comes from the config file, which holds its token: change tokenSha256 or tokenEnv there and reload` }]);
      if (outcome.why === 'revoked') return fail(409, 'grant_revoked', [{ path: 'id', message: `${id} is revoked; a revoked grant gets no new token` }]);
      return fail(409, 'rotation_conflict', [{ path: 'id', message: `${id} was rotated elsewhere at the same time; nothing was changed here, rotate again` }]);
    }
    const { record, token } = outcome;
    const ended = installRotation(registry, record);
    const previousTokenUntil = record.previousToken?.until ?? null;
    log.info({ grant: id, previousTokenUntil, endedConnections: ended }, 'grant token rotated');
    return { ok: true, value: { id, token, grant: view(record), previousTokenUntil, endedConnections: ended } };
  }

  async function revokeGrant(id: string): Promise<ControlResult<{ grant: GrantView; endedConnections: number }>> {
    if (ledger.get(id) === undefined) return fail(404, 'grant_not_found');
    const ended = registry.revoke(id);
    const record = await ledger.revoke(id).finally(() => dedicated.close(id));
    if (record === undefined) return fail(404, 'grant_not_found');
    log.info({ grant: id, endedConnections: ended }, 'grant revoked');
    return { ok: true, value: { grant: view(record), endedConnections: ended } };
  }

  async function forgetGrant(id: string): Promise<ControlResult<{ grant: GrantView; endedConnections: number }>> {
    const record = ledger.get(id);
    if (record === undefined) return fail(404, 'grant_not_found');
    if (record.source !== 'runtime') return fail(409, 'grant_from_config', [{ path: 'id', message: `${id} comes from the config file: revoke it (DELETE); forgetting it would let the file bring it back` }]);
    // Read before the registry drops the grant's usage, so the answer reports what the grant used.
    const used = { ...registry.usageView(id) };
    const active = registry.activeConnections(id);
    const listen = dedicated.addressOf(id) ?? record.spec.listen ?? null;
    const ended = registry.forget(id);
    const forgotten = await ledger.forget(id).finally(() => dedicated.close(id));
    log.info({ grant: id, endedConnections: ended }, 'grant forgotten');
    return { ok: true, value: { grant: toGrantView(forgotten ?? record, registry, listen, used, active), endedConnections: ended } };
  }

  async function revokeGeneration(generation: string): Promise<ControlResult<{ revoked: string[]; endedConnections: number }>> {
    let ended = 0;
    const ids = ledger.list().filter((r) => r.spec.generation === generation && r.revokedAt === null).map((r) => r.id);
    for (const id of ids) ended += registry.revoke(id);
    await ledger.revokeGeneration(generation).finally(async () => {
      for (const id of ids) await dedicated.close(id);
    });
    log.info({ generation, grants: ids, endedConnections: ended }, 'generation revoked');
    return { ok: true, value: { revoked: ids, endedConnections: ended } };
  }

  // Stale, an instance issues nothing: it could not tell the fleet, nor knows what the fleet did meanwhile.
  // A revocation only narrows authority, so it always takes effect here at once; if the store cannot take
  // it, the answer is 503 and the ledger retries until the store does.
  const guarded = <A extends unknown[], T>(action: (...args: A) => Promise<ControlResult<T>>) =>
    (...args: A): Promise<ControlResult<T>> => (deps.ledgerFresh() ? throughStore(() => action(...args)) : Promise.resolve(fail(503, 'ledger_unavailable', [STALE])));
  const narrowing = <A extends unknown[], T>(action: (...args: A) => Promise<ControlResult<T>>) =>
    (...args: A): Promise<ControlResult<T>> => throughStore(() => action(...args));

  return {
    issueGrant: guarded(issueGrant),
    listGrants: () => ledger.list().map(view),
    getGrant: (id) => {
      const record = ledger.get(id);
      return record === undefined ? undefined : view(record);
    },
    revokeGrant: narrowing(revokeGrant),
    forgetGrant: narrowing(forgetGrant),
    revokeGeneration: narrowing(revokeGeneration),
    rotateGrant: guarded(rotateGrant),
    listAsks: async () => (await deps.asks?.listAll()) ?? [],
    answerAsk: (id, body) => answerAsk(deps.asks, log, id, body),
    reload: deps.reload,
    readiness: deps.readiness,
    ledgerFresh: deps.ledgerFresh,
  };
}
