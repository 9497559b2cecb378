// Loads the config file: read → parse YAML → validate → cross-check → resolve paths → deep-freeze.
// Every error names its full key path, and every error of a file is reported in one pass: sections
// (and list items) that parse are cross-checked even when another fails, and the draft of what
// parsed goes to the host checks (app.ts checkConfigDraft). Nothing here touches process (the caller
// passes cwd).
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parseDocument } from '../yaml-text/index.js';
import type { z } from 'zod';
import { isLoopbackTcpListen, isUnixListen, NON_LOOPBACK_DEDICATED_MESSAGE, resolveListen } from './listen-address.js';
import { knownKeysAt, unknownKeyMessage } from './unknown-key.js';
import { passedExpiry } from './passed-expiry.js';
import { configSchema, grantSchema, listenerSchema, type ConfigFile, type GrantSection, type ListenerSection, type ProxyRouteEntry } from './schema.js';

export interface ConfigIssue {
  readonly path: string;
  readonly message: string;
}

export type Config = Readonly<ConfigFile> & { readonly sourcePath: string };

/**
 * What parsed of a config file, paths resolved: each section that parsed, and each list item that
 * parsed at its own index (undefined where it did not). The host checks run on it, so a file with one
 * schema error still has its other errors named in the same pass.
 */
export interface ConfigDraft {
  readonly listeners: readonly (ListenerSection | undefined)[];
  readonly grants: readonly (GrantSection | undefined)[];
  readonly admin: ConfigFile['admin'] | undefined;
  readonly dns: ConfigFile['dns'] | undefined;
  readonly route: ConfigFile['route'] | undefined;
  readonly ledger: ConfigFile['ledger'] | undefined;
  readonly audit: ConfigFile['audit'] | undefined;
  readonly state: string | undefined;
}

export type ConfigResult =
  | { readonly ok: true; readonly config: Config }
  /** `draft` is null when the file could not be read or is not YAML. */
  | { readonly ok: false; readonly issues: readonly ConfigIssue[]; readonly draft?: ConfigDraft | null };

export interface LoadOptions {
  /** The clock a grant's expiresAt is compared with; Date.now() unless given. */
  readonly nowMs?: number;
}

export function formatKeyPath(parts: readonly PropertyKey[]): string {
  let out = '';
  for (const part of parts) {
    if (typeof part === 'number') out += `[${part}]`;
    else out += out === '' ? String(part) : `.${String(part)}`;
  }
  return out === '' ? '(root)' : out;
}

export async function loadConfig(file: string, cwd: string, options: LoadOptions = {}): Promise<ConfigResult> {
  const sourcePath = path.resolve(cwd, file);
  let text: string;
  try {
    text = await readFile(sourcePath, 'utf8');
  } catch (error) {
    return { ok: false, issues: [{ path: '(file)', message: `cannot read ${sourcePath}: ${(error as NodeJS.ErrnoException).code ?? String(error)}` }], draft: null };
  }
  return parseConfigText(text, sourcePath, cwd, options);
}

export function parseConfigText(text: string, sourcePath: string, cwd: string, options: LoadOptions = {}): ConfigResult {
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length > 0) {
    return { ok: false, issues: doc.errors.map((e) => ({ path: '(yaml)', message: e.message.split('\n')[0] ?? e.message })), draft: null };
  }
  const raw: unknown = doc.toJS() ?? {};
  const nowMs = options.nowMs ?? Date.now();
  const parsed = configSchema.safeParse(raw);
  if (!parsed.success) {
    // Cross-check what did parse, so one typo does not hide the file's other errors.
    const draft = resolveDraft(draftOf(raw), cwd);
    return { ok: false, issues: dedupeIssues([...zodIssues(parsed.error), ...crossCheck(draft, nowMs, rawGrantIds(raw))]), draft };
  }
  const config = { ...resolvePaths(parsed.data, cwd), sourcePath };
  const draft = configDraft(config);
  const issues = crossCheck(draft, nowMs, new Set());
  if (issues.length > 0) return { ok: false, issues, draft };
  return { ok: true, config: deepFreeze(config) };
}

/** The draft of a config that parsed whole: every section and item present. */
export function configDraft(config: ConfigFile): ConfigDraft {
  const { listeners, grants, admin, dns, route, ledger, audit, state } = config;
  return { listeners, grants, admin, dns, route, ledger, audit, state };
}

/** Each section parsed on its own, and each listener and grant on its own, keeping its index. */
function draftOf(raw: unknown): ConfigDraft {
  const top = isRecord(raw) ? raw : {};
  const shape = configSchema.shape;
  const one = <T>(schema: { safeParse(v: unknown): { success: true; data: T } | { success: false } }, value: unknown): T | undefined => {
    const r = schema.safeParse(value);
    return r.success ? r.data : undefined;
  };
  const items = <T>(schema: { safeParse(v: unknown): { success: true; data: T } | { success: false } }, value: unknown): (T | undefined)[] =>
    Array.isArray(value) ? value.map((item) => one(schema, item)) : [];
  return {
    listeners: items(listenerSchema, top['listeners']),
    grants: items(grantSchema, top['grants']),
    admin: one(shape.admin, top['admin']),
    dns: one(shape.dns, top['dns']),
    route: one(shape.route, top['route']),
    ledger: one(shape.ledger, top['ledger']),
    audit: one(shape.audit, top['audit']),
    state: one(shape.state, top['state']),
  };
}

/** Grant ids as written, so a listener naming a grant that failed to parse is not also "no grant". */
function rawGrantIds(raw: unknown): Set<string> {
  const grants = isRecord(raw) ? raw['grants'] : undefined;
  const ids = new Set<string>();
  if (Array.isArray(grants)) for (const g of grants) if (isRecord(g) && typeof g['id'] === 'string') ids.add(g['id']);
  return ids;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** Each issue once: a check that runs on the draft and on the whole config may name the same one. */
export function dedupeIssues(issues: readonly ConfigIssue[]): ConfigIssue[] {
  const seen = new Set<string>();
  return issues.filter((i) => {
    const key = `${i.path}\0${i.message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/** zod names the object for an unknown key; the operator needs the key itself: `dns.timeoutMz`. */
function zodIssues(error: z.ZodError): ConfigIssue[] {
  return issuesAt([], error.issues);
}

type ZodIssue = z.ZodError['issues'][number];

function issuesAt(prefix: readonly PropertyKey[], issues: readonly ZodIssue[]): ConfigIssue[] {
  return issues.flatMap((issue) => {
    const at = [...prefix, ...issue.path];
    if (issue.code === 'invalid_union' && issue.errors.length > 0) {
      // A value that may be one of several shapes (route.proxy: an object or a list): the errors of the
      // shape it has, by their own paths (route.proxy.auth), not one line for the whole value.
      const branch = issue.errors.find((errors) => !errors.some((e) => e.code === 'invalid_type' && e.path.length === 0));
      if (branch !== undefined) return issuesAt(at, branch);
    }
    if (issue.code !== 'unrecognized_keys') return [{ path: formatKeyPath(at), message: issue.message }];
    const known = knownKeysAt(at);
    return issue.keys.map((key) => ({ path: formatKeyPath([...at, key]), message: unknownKeyMessage(key, known) }));
  });
}

function crossCheck(draft: ConfigDraft, nowMs: number, unparsedGrantIds: ReadonlySet<string>): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  const grantIds = new Set<string>(unparsedGrantIds);
  const seenIds = new Set<string>();
  const certificates = new Map<string, string>();
  draft.grants.forEach((grant, i) => {
    if (grant === undefined) return;
    if (seenIds.has(grant.id)) issues.push({ path: `grants[${i}].id`, message: `duplicate grant id "${grant.id}"` });
    // One certificate, one principal: a certificate two grants name would act for whichever matched first.
    const certificate = grant.clientCertificate === undefined ? null : 'sha256' in grant.clientCertificate ? `sha256 ${grant.clientCertificate.sha256}` : `uriSan ${grant.clientCertificate.uriSan}`;
    if (certificate !== null) {
      const other = certificates.get(certificate);
      if (other !== undefined) issues.push({ path: `grants[${i}].clientCertificate`, message: `grant "${other}" already names this certificate` });
      certificates.set(certificate, grant.id);
    }
    seenIds.add(grant.id);
    grantIds.add(grant.id);
    issues.push(...grantExpiry(grant, i, nowMs));
  });
  const names = new Set<string>();
  const addresses = new Set<string>();
  draft.listeners.forEach((listener, i) => {
    if (listener === undefined) return;
    if (names.has(listener.name)) issues.push({ path: `listeners[${i}].name`, message: `duplicate listener name "${listener.name}"` });
    names.add(listener.name);
    // Port 0 asks the kernel for a fresh port each time, so it can repeat.
    if (!listener.listen.endsWith(':0') && addresses.has(listener.listen)) issues.push({ path: `listeners[${i}].listen`, message: `address ${listener.listen} is used twice` });
    addresses.add(listener.listen);
    if (listener.grant !== undefined && !grantIds.has(listener.grant)) {
      issues.push({ path: `listeners[${i}].grant`, message: `no grant with id "${listener.grant}"` });
    }
    issues.push(...listenerExposure(listener, i));
  });
  if (draft.admin !== undefined) issues.push(...adminExposure(draft.admin));
  if (draft.ledger !== undefined) issues.push(...ledgerStore(draft.ledger));
  const route = draft.route;
  if (route?.mode === 'proxy' && route.proxy === undefined) {
    issues.push({ path: 'route.proxy', message: 'route.mode is proxy but route.proxy is missing' });
  }
  if (route?.mode === 'pac' && route.pac === undefined) {
    issues.push({ path: 'route.pac', message: 'route.mode is pac but route.pac is missing' });
  }
  return issues;
}

/**
 * A config grant that has already expired could never serve a hop: a stale file, named here rather
 * than started with a grant that refuses everything with grant_expired (issue 17, item 3).
 */
function grantExpiry(grant: GrantSection, i: number, nowMs: number): ConfigIssue[] {
  const at = passedExpiry(grant.limits.expiresAt, nowMs);
  if (at === null) return [];
  return [{ path: `grants[${i}].limits.expiresAt`, message: `${at} has passed: grant "${grant.id}" expired; remove it or set a later expiresAt` }];
}

/** Review 2026-12, finding 12: a token-less listener must not be reachable from the network. */
function listenerExposure(listener: ConfigFile['listeners'][number], i: number): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  const isUnix = isUnixListen(listener.listen);
  if (listener.grant !== undefined && !isUnix && !isLoopbackTcpListen(listener.listen)) {
    issues.push({ path: `listeners[${i}].listen`, message: `${listener.listen}: ${NON_LOOPBACK_DEDICATED_MESSAGE}` });
  }
  if (listener.socketGroup !== undefined && !isUnix) {
    issues.push({ path: `listeners[${i}].socketGroup`, message: 'only a unix:/path listener has a socket file to give to a group' });
  }
  if (listener.proxyProtocol !== undefined && isUnix) {
    issues.push({ path: `listeners[${i}].proxyProtocol`, message: 'a unix:/path listener has no peer address to trust: PROXY protocol needs a TCP listener' });
  }
  return issues;
}

/** Review 2026-12, finding 10: checked here, so check-config and start both refuse it (exit 2). */
function adminExposure(admin: ConfigFile['admin']): ConfigIssue[] {
  if (admin.listen === undefined || isUnixListen(admin.listen) || admin.tokenSha256 !== undefined || admin.tokenEnv !== undefined) return [];
  return [
    {
      path: 'admin.listen',
      message: `${admin.listen} is TCP: set admin.tokenSha256 or admin.tokenEnv (a TCP admin listener requires a bearer token), or use unix:/path`,
    },
  ];
}

const resolveFile = (p: string | undefined, cwd: string): string | undefined => (p === undefined ? undefined : path.resolve(cwd, p));

function resolveAdmin(admin: ConfigFile['admin'], cwd: string): ConfigFile['admin'] {
  return admin.listen === undefined ? admin : { ...admin, listen: resolveListen(admin.listen, cwd) };
}

function resolveRoute(config: ConfigFile['route'], cwd: string): ConfigFile['route'] {
  const route = { ...config };
  const file = (p: string | undefined): string | undefined => resolveFile(p, cwd);
  const proxyEntry = (p: ProxyRouteEntry): ProxyRouteEntry => ({ ...p, credentialsFile: file(p.credentialsFile), caFile: file(p.caFile) });
  // route.proxy is one proxy or a list of them (failover): each entry's files resolve the same way.
  if (route.proxy !== undefined) route.proxy = Array.isArray(route.proxy) ? route.proxy.map(proxyEntry) : proxyEntry(route.proxy as ProxyRouteEntry);
  if (route.pac !== undefined) route.pac = { ...route.pac, file: file(route.pac.file), credentialsFile: file(route.pac.credentialsFile), caFile: file(route.pac.caFile) };
  if (route.system !== undefined) route.system = { ...route.system, caFile: file(route.system.caFile) };
  return route;
}

function resolveAudit(audit: ConfigFile['audit'], cwd: string): ConfigFile['audit'] {
  return { file: audit.file === 'stdout' || audit.file === 'stderr' ? audit.file : path.resolve(cwd, audit.file) };
}

function resolveListener<L extends ListenerSection | undefined>(l: L, cwd: string): L {
  if (l === undefined) return l;
  const tls = l.tls === undefined ? undefined : { ...l.tls, certFile: path.resolve(cwd, l.tls.certFile), keyFile: path.resolve(cwd, l.tls.keyFile), clientCaFile: resolveFile(l.tls.clientCaFile, cwd), crlFile: resolveFile(l.tls.crlFile, cwd) };
  return { ...l, listen: resolveListen(l.listen, cwd), ...(tls === undefined ? {} : { tls }) } as L;
}

/** ledger.redis.tls.caFile, like every path of the config, against the working directory (ADR 0006). */
function resolveLedger(ledger: ConfigFile['ledger'], cwd: string): ConfigFile['ledger'] {
  const tls = ledger.redis?.tls;
  if (ledger.redis === undefined || typeof tls !== 'object' || tls.caFile === undefined) return ledger;
  return { ...ledger, redis: { ...ledger.redis, tls: { ...tls, caFile: path.resolve(cwd, tls.caFile) } } };
}

function resolvePaths(config: ConfigFile, cwd: string): ConfigFile {
  return {
    ...config,
    listeners: config.listeners.map((l) => resolveListener(l, cwd)),
    admin: resolveAdmin(config.admin, cwd),
    audit: resolveAudit(config.audit, cwd),
    route: resolveRoute(config.route, cwd),
    ledger: resolveLedger(config.ledger, cwd),
    state: path.resolve(cwd, config.state),
  };
}

function resolveDraft(draft: ConfigDraft, cwd: string): ConfigDraft {
  return {
    ...draft,
    listeners: draft.listeners.map((l) => resolveListener(l, cwd)),
    admin: draft.admin === undefined ? undefined : resolveAdmin(draft.admin, cwd),
    audit: draft.audit === undefined ? undefined : resolveAudit(draft.audit, cwd),
    route: draft.route === undefined ? undefined : resolveRoute(draft.route, cwd),
    ledger: draft.ledger === undefined ? undefined : resolveLedger(draft.ledger, cwd),
    state: draft.state === undefined ? undefined : path.resolve(cwd, draft.state),
  };
}

export function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const inner of Object.values(value as Record<string, unknown>)) deepFreeze(inner);
  }
  return value;
}

/**
 * The Redis store is one server (exactly one of url and urlEnv) or a Sentinel group (sentinels with
 * name); the file store takes no redis section. The Sentinel-only keys are refused beside a URL, which
 * carries its own user, password and TLS (rediss://), so that no key is silently ignored.
 */
function ledgerStore(ledger: ConfigFile['ledger']): ConfigIssue[] {
  if (ledger.store === 'file') return ledger.redis === undefined ? [] : [{ path: 'ledger.redis', message: 'only with ledger.store: redis' }];
  const redis = ledger.redis;
  const one = 'give exactly one of url, urlEnv and sentinels (with name)';
  if (redis === undefined) return [{ path: 'ledger.redis', message: 'ledger.store: redis needs redis.url, redis.urlEnv or redis.sentinels' }];
  const forms = (['url', 'urlEnv', 'sentinels'] as const).filter((k) => redis[k] !== undefined);
  if (forms.length !== 1) return [{ path: forms.length === 0 ? 'ledger.redis' : `ledger.redis.${forms[1] ?? 'url'}`, message: one }];
  if (forms[0] === 'sentinels') return redis.name === undefined ? [{ path: 'ledger.redis.name', message: 'sentinels need the master group name (sentinel monitor <name> …)' }] : [];
  const sentinelOnly = (['name', 'username', 'passwordEnv', 'sentinelUsername', 'sentinelPasswordEnv', 'tls'] as const).filter((k) => redis[k] !== undefined);
  return sentinelOnly.map((k) => ({ path: `ledger.redis.${k}`, message: 'only with sentinels: a URL carries its own user and password (urlEnv keeps them out of the file) and TLS (rediss://)' }));
}
