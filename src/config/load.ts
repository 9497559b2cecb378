// Loads the config file: read → parse YAML → validate → cross-check → resolve paths → deep-freeze.
// Every error names its key path; nothing here touches process (the caller passes cwd).
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parseDocument } from 'yaml';
import type { z } from 'zod';
import { isLoopbackTcpListen, isUnixListen, NON_LOOPBACK_DEDICATED_MESSAGE } from './listen-address.js';
import { configSchema, type ConfigFile } from './schema.js';

export interface ConfigIssue {
  readonly path: string;
  readonly message: string;
}

export type Config = Readonly<ConfigFile> & { readonly sourcePath: string };

export type ConfigResult = { readonly ok: true; readonly config: Config } | { readonly ok: false; readonly issues: readonly ConfigIssue[] };

export function formatKeyPath(parts: readonly PropertyKey[]): string {
  let out = '';
  for (const part of parts) {
    if (typeof part === 'number') out += `[${part}]`;
    else out += out === '' ? String(part) : `.${String(part)}`;
  }
  return out === '' ? '(root)' : out;
}

export async function loadConfig(file: string, cwd: string): Promise<ConfigResult> {
  const sourcePath = path.resolve(cwd, file);
  let text: string;
  try {
    text = await readFile(sourcePath, 'utf8');
  } catch (error) {
    return { ok: false, issues: [{ path: '(file)', message: `cannot read ${sourcePath}: ${(error as NodeJS.ErrnoException).code ?? String(error)}` }] };
  }
  return parseConfigText(text, sourcePath, cwd);
}

export function parseConfigText(text: string, sourcePath: string, cwd: string): ConfigResult {
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length > 0) {
    return { ok: false, issues: doc.errors.map((e) => ({ path: '(yaml)', message: e.message.split('\n')[0] ?? e.message })) };
  }
  const parsed = configSchema.safeParse(doc.toJS() ?? {});
  if (!parsed.success) return { ok: false, issues: zodIssues(parsed.error) };
  const issues = crossCheck(parsed.data);
  if (issues.length > 0) return { ok: false, issues };
  const config = { ...resolvePaths(parsed.data, cwd), sourcePath };
  return { ok: true, config: deepFreeze(config) };
}

function zodIssues(error: z.ZodError): ConfigIssue[] {
  return error.issues.map((issue) => {
    const keys = issue.code === 'unrecognized_keys' ? ` (${issue.keys.join(', ')})` : '';
    return { path: formatKeyPath(issue.path), message: issue.message + keys };
  });
}

function crossCheck(config: ConfigFile): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  const grantIds = new Set<string>();
  config.grants.forEach((grant, i) => {
    if (grantIds.has(grant.id)) issues.push({ path: `grants[${i}].id`, message: `duplicate grant id "${grant.id}"` });
    grantIds.add(grant.id);
  });
  const names = new Set<string>();
  const addresses = new Set<string>();
  config.listeners.forEach((listener, i) => {
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
  issues.push(...adminExposure(config.admin));
  issues.push(...ledgerStore(config.ledger));
  if (config.route.mode === 'proxy' && config.route.proxy === undefined) {
    issues.push({ path: 'route.proxy', message: 'route.mode is proxy but route.proxy is missing' });
  }
  if (config.route.mode === 'pac' && config.route.pac === undefined) {
    issues.push({ path: 'route.pac', message: 'route.mode is pac but route.pac is missing' });
  }
  return issues;
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

function resolveListen(listen: string, cwd: string): string {
  return listen.startsWith('unix:') ? `unix:${path.resolve(cwd, listen.slice(5))}` : listen;
}

function resolvePaths(config: ConfigFile, cwd: string): ConfigFile {
  const admin = { ...config.admin };
  if (admin.listen !== undefined) admin.listen = resolveListen(admin.listen, cwd);
  const route = { ...config.route };
  const file = (p: string | undefined): string | undefined => (p === undefined ? undefined : path.resolve(cwd, p));
  if (route.proxy !== undefined) route.proxy = { ...route.proxy, credentialsFile: file(route.proxy.credentialsFile), caFile: file(route.proxy.caFile) };
  if (route.pac !== undefined) route.pac = { ...route.pac, file: file(route.pac.file), credentialsFile: file(route.pac.credentialsFile), caFile: file(route.pac.caFile) };
  if (route.system !== undefined) route.system = { ...route.system, caFile: file(route.system.caFile) };
  const audit = { file: config.audit.file === 'stdout' || config.audit.file === 'stderr' ? config.audit.file : path.resolve(cwd, config.audit.file) };
  return {
    ...config,
    listeners: config.listeners.map((l) => ({ ...l, listen: resolveListen(l.listen, cwd) })),
    admin,
    audit,
    route,
    state: path.resolve(cwd, config.state),
  };
}

export function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const inner of Object.values(value as Record<string, unknown>)) deepFreeze(inner);
  }
  return value;
}

/** The Redis store needs exactly one of url and urlEnv; the file store takes no redis section. */
function ledgerStore(ledger: ConfigFile['ledger']): ConfigIssue[] {
  if (ledger.store === 'file') return ledger.redis === undefined ? [] : [{ path: 'ledger.redis', message: 'only with ledger.store: redis' }];
  const redis = ledger.redis;
  if (redis === undefined) return [{ path: 'ledger.redis', message: 'ledger.store: redis needs redis.url or redis.urlEnv' }];
  if ((redis.url === undefined) === (redis.urlEnv === undefined)) return [{ path: 'ledger.redis.url', message: 'give exactly one of url and urlEnv' }];
  return [];
}
