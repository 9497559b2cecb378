// The composition root: builds every module from the frozen config and wires them through ports.
// The only file that knows every module; it touches no process globals (main.ts passes env and cwd).
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import path from 'node:path';
import { ProxyError, type ControlResult, type LookupAll, type LookupAnswer, type ProxyControl, type ReloadOutcome } from './core/index.js';
import { configDraft, dedupeIssues, proxyRouteEntries, loadConfig, unwritableReason, type Config, type ConfigDraft, type ConfigIssue, type ConfigResult, type ListenerSection, type LoadOptions } from './config/index.js';
import { canonicalizeHost } from './authority/index.js';
import { describeStoreError, FleetSync, Ledger, LedgerStore, openRedisLedgerStore, resolveRedisTarget, UsageFile, type GrantRecord, type RedisLedgerStore } from './ledger/index.js';
import { HostAddresses, Resolver, SelfAddresses, createServersLookup, createSystemLookup, type ReadInterfaces } from './resolve/index.js';
import { buildRoutes, type BuiltRoutes, type PacSource, type RouteSelector } from './route/index.js';
import { connectToProxy, createPinnedConnector, createUpstreamConnector, fetchText, isUnixSocketAlive, LearnedMechanisms, systemGss, upstreamFailureLogger, type Gss } from './egress/index.js';
import { checkAdminSection, resolveAdminTokenSha256, startAdminServer, startMetricsServer, type AdminServer, type MetricsServer } from './admin/index.js';
import { BoundUpstreams, createForwardAgent, createUpstreamClient, PrincipalPools, type RelayLimits } from './relay/index.js';
import { EventRing, NoopMetrics, createMetrics, type MetricsSink } from './telemetry/index.js';
import { createFileSink, createOperationalLog, type AuditSink, type OperationalLog } from './audit/index.js';
import { AskRegistry, AuthThrottle, ConnectionGate, DEDICATED_LISTENER_NAME, DedicatedListeners, GrantRegistry, checkConfigGrants, configTokens, createControl } from './grant/index.js';
import { HopCache, startListeners, stopListeners, type BoundListener, type HttpLimits, type ProxyRuntime } from './proxy/index.js';
import { checkSocketGroups, expiryWarnings, ListenError, loadListenersTls, type LoadedTls } from './listen/index.js';

/** How often a fleet instance polls the shared store's revision, beside its notifications (docs/fleet.md). */
const FLEET_POLL_MS = 25;
/** How often the file store writes what each grant used, while it changes (a kill -9 loses at most this). */
const USAGE_FLUSH_MS = 1000;

export interface AppOptions {
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Replaces DNS (tests map names to loopback here). */
  readonly lookup?: LookupAll;
  /** Replaces the file audit sink (tests observe records here). */
  readonly audit?: AuditSink;
  readonly log?: OperationalLog;
  readonly cwd?: string;
  /** Replaces os.networkInterfaces() for the `host` class (tests inject the host's addresses here). */
  readonly hostInterfaces?: ReadInterfaces;
  /** How often `start` re-reads the interface list; HOST_ADDRESS_REFRESH_MS unless given. */
  readonly hostRefreshMs?: number;

  /** Replaces the process's GSSAPI for Negotiate to upstream proxies (tests). */
  readonly gss?: Gss;
  /** Replaces the event ring GET /v1/events serves (tests give it a small capacity). */
  readonly events?: EventRing;
}

/** What `start` needs beyond building the runtime: where Sluice runs, and as whom. */
export interface StartOptions extends AppOptions {
  /** Sluice's working directory: relative paths resolve against it (run-time grants' `unix:` listen, config on reload). */
  readonly cwd: string;
  /** Sluice's effective uid: its state files (ledger.json, usage.json) must be owned by it, mode 0600. */
  readonly uid: number;
}

/** `auth: negotiate` where this build has no GSSAPI: refused at load, not on the first hop. */
export function negotiateIssues(route: NonNullable<ConfigDraft['route']>, gss: Gss): ConfigIssue[] {
  if (gss.unavailable === null) return [];
  const paths = [
    ...(route.proxy === undefined ? [] : proxyRouteEntries(route.proxy).filter((e) => e.entry.auth === 'negotiate').map((e) => `${e.path}.auth`)),
    ...(route.pac?.auth === 'negotiate' ? ['route.pac.auth'] : []),
  ];
  return paths.map((path) => ({ path, message: `negotiate needs GSSAPI: ${gss.unavailable ?? ''}` }));
}

export interface SluiceApp {
  readonly runtime: ProxyRuntime;
  readonly listeners: readonly BoundListener[];
  /** The admin API and metrics listeners' real addresses, when configured. */
  readonly adminAddress: string | null;
  readonly metricsAddress: string | null;
  readonly self: SelfAddresses;
  readonly control: ProxyControl;
  readonly ledger: Ledger;
  /** Where the ledger lives: the state file, or the fleet's shared store (its label holds no password). */
  readonly ledgerStore: { readonly kind: 'file'; readonly file: string } | { readonly kind: 'redis'; readonly label: string };
  close(drainMs?: number): Promise<void>;
}

export type Built<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly issues: readonly ConfigIssue[] };

function httpLimits(config: Config): HttpLimits {
  return { headersTimeoutMs: config.timeouts.headersMs, keepAliveTimeoutMs: 5_000, maxHeaderBytes: config.limits.maxHeaderBytes };
}

function compileHosts(hosts: Readonly<Record<string, readonly string[]>>): Built<Map<string, LookupAnswer[]>> {
  const issues: ConfigIssue[] = [];
  const out = new Map<string, LookupAnswer[]>();
  for (const [name, addresses] of Object.entries(hosts)) {
    const host = canonicalizeHost(name);
    if (!host.ok || host.value.hostKind !== 'name') {
      issues.push({ path: `dns.hosts.${name}`, message: 'not a valid host name' });
      continue;
    }
    const answers: LookupAnswer[] = [];
    addresses.forEach((address, i) => {
      const family = net.isIP(address);
      if (family === 0) issues.push({ path: `dns.hosts.${name}[${i}]`, message: `"${address}" is not an IP address` });
      else answers.push({ address, family: family === 6 ? 6 : 4, ttlSeconds: 0 });
    });
    out.set(host.value.host, answers);
  }
  return issues.length > 0 ? { ok: false, issues } : { ok: true, value: out };
}

function selfListeners(config: ConfigDraft): string[] {
  const listens = config.listeners.flatMap((l) => (l === undefined ? [] : [l.listen]));
  if (config.admin?.listen !== undefined) listens.push(config.admin.listen);
  if (config.admin?.metrics !== undefined) listens.push(config.admin.metrics);
  return listens;
}

/** The items of a draft list that parsed, with the index each has in the file. */
function present<T>(items: readonly (T | undefined)[]): { items: T[]; indices: number[] } {
  const out: { items: T[]; indices: number[] } = { items: [], indices: [] };
  items.forEach((item, i) => {
    if (item === undefined) return;
    out.items.push(item);
    out.indices.push(i);
  });
  return out;
}

/** Checks ran on the items that parsed (`grants[0]` is the first of those): name each by its index in the file. */
function atFileIndex(issues: readonly ConfigIssue[], list: string, indices: readonly number[]): ConfigIssue[] {
  const prefix = new RegExp(`^${list}\\[(\\d+)\\]`);
  return issues.map((issue) => ({ ...issue, path: issue.path.replace(prefix, (whole, k: string) => `${list}[${indices[Number(k)] ?? k}]`) }));
}

/** listeners[].tls files that do not load (issue 28): named by key, as start, check-config and reload report them. */
function tlsIssues(listeners: readonly ListenerSection[]): ConfigIssue[] {
  const loaded = loadListenersTls(listeners);
  return loaded.ok ? [] : loaded.issues;
}

/** How often a running Sluice looks again at its listener certificates' expiry (and warns ahead of it). */
const CERTIFICATE_CHECK_MS = 6 * 3_600_000;

function warnExpiring(log: OperationalLog, listeners: readonly BoundListener[]): void {
  const now = Date.now();
  for (const l of listeners) {
    for (const warning of l.tls === null ? [] : expiryWarnings(l.name, l.tls.current, now)) log.warn({ listener: l.name }, warning);
  }
}

const PROBE_ROUTE_PORTS = {
  lookupSync: () => null,
  fetchText: () => Promise.reject(new Error('not fetched by the config check')),
  onPacError: () => undefined,
  onPacLoad: () => undefined,
  onPacCache: () => undefined,
};

/**
 * The checks of a config that need the host (environment variables, files, the group file, the admin
 * socket's directory), run on whatever parsed: with loadConfig's, they are the one validation that
 * `check-config` prints and `start` refuses on (issue 17, item 3). Creates, opens and binds nothing.
 */
export async function checkConfigDraft(draft: ConfigDraft, env: AppOptions['env'], hostInterfaces?: ReadInterfaces): Promise<ConfigIssue[]> {
  const self = new SelfAddresses(selfListeners(draft), new HostAddresses(hostInterfaces));
  const grants = present(draft.grants);
  const listeners = present(draft.listeners);
  const issues = [
    ...atFileIndex(checkConfigGrants(grants.items, env, self), 'grants', grants.indices),
    ...atFileIndex(await checkSocketGroups(listeners.items), 'listeners', listeners.indices),
    ...atFileIndex(tlsIssues(listeners.items), 'listeners', listeners.indices),
  ];
  if (draft.dns !== undefined) {
    const hosts = compileHosts(draft.dns.hosts);
    if (!hosts.ok) issues.push(...hosts.issues);
  }
  if (draft.admin !== undefined) issues.push(...(await checkAdminSection(draft.admin, env)));
  if (draft.ledger?.store === 'redis' && draft.ledger.redis !== undefined) {
    // The store's variables and CA file: start reads them too (openSharedStore); nothing is connected here.
    const target = resolveRedisTarget(draft.ledger.redis, env);
    if (!target.ok) issues.push(...target.issues);
  }
  if (draft.route !== undefined) {
    // Reads credentialsFile and caFile as start does; the PAC itself is loaded only by start (and check-config).
    const routes = buildRoutes(draft.route, env, PROBE_ROUTE_PORTS, { maxPacWaitingPerGrant: 1 });
    if (routes.ok) routes.value.selector.close();
    else issues.push(...routes.issues);
    issues.push(...negotiateIssues(draft.route, systemGss()));
  }
  const audit = draft.audit?.file;
  if (audit !== undefined && audit !== 'stdout' && audit !== 'stderr') {
    const why = await unwritableReason(audit, 'file');
    if (why !== null) issues.push({ path: 'audit.file', message: why });
  }
  if (draft.state !== undefined) {
    const why = await unwritableReason(draft.state, 'directory');
    if (why !== null) issues.push({ path: 'state', message: why });
  }
  return issues;
}

/**
 * Loads a config file and runs every check on it in one pass: the schema, the cross-checks and the host
 * checks. `sluice check-config` and `sluice start` both call this, so they name the same errors.
 */
export async function loadCheckedConfig(file: string, options: Pick<AppOptions, 'env' | 'hostInterfaces'> & { readonly cwd: string } & LoadOptions): Promise<ConfigResult> {
  const loaded = await loadConfig(file, options.cwd, options.nowMs === undefined ? {} : { nowMs: options.nowMs });
  const draft = loaded.ok ? configDraft(loaded.config) : (loaded.draft ?? null);
  if (draft === null) return loaded;
  const host = await checkConfigDraft(draft, options.env, options.hostInterfaces);
  if (loaded.ok && host.length === 0) return loaded;
  return { ok: false, issues: dedupeIssues([...(loaded.ok ? [] : loaded.issues), ...host]), draft };
}

/** Builds the runtime without listening or reading state: used by `start`, `explain` and `check-config`. */
export async function buildRuntime(
  config: Config,
  options: AppOptions,
): Promise<Built<{ runtime: ProxyRuntime; self: SelfAddresses; pacError: string | null; pac: () => PacSource | null; tokens: ReadonlyMap<string, Buffer>; freshness: { isFresh: () => boolean }; rebuildNetwork: (next: Config) => Promise<Built<Network>>; useNetwork: (next: Network) => void; useTunables: (next: Config) => void }>> {
  const self = new SelfAddresses(selfListeners(configDraft(config)), new HostAddresses(options.hostInterfaces, options.hostRefreshMs));
  // The same checks loadCheckedConfig runs: a caller that parsed the config itself (tests, reload) gets them too.
  const issues = await checkConfigDraft(configDraft(config), options.env, options.hostInterfaces);
  if (issues.length > 0) return { ok: false, issues };
  const log = options.log ?? createOperationalLog(config.log.level);
  let audit = options.audit;
  if (audit === undefined) {
    try {
      audit = createFileSink(config.audit.file, {
        onError: (error) => log.error({ code: error.code, file: config.audit.file }, `audit write failed: ${error.message}`),
        onWarning: (message, fields) => log.warn(fields, message),
      });
    } catch (error) {
      return { ok: false, issues: [{ path: 'audit.file', message: `cannot open ${config.audit.file}: ${(error as Error).message}` }] };
    }
  }
  const metricsRef: { current: MetricsSink | null } = { current: null };
  const built = await buildNetwork(config, options, log, metricsRef);
  if (!built.ok) return built;
  const network = { current: built.value };
  const pacError = built.value.pacError;
  // Said once, at start: the route each request family takes in system mode (review 2026-12 finding 11).
  const summary = built.value.routes.selector.summary;
  if (summary !== undefined) log[summary.isSplit ? 'warn' : 'info']({ route: config.route.mode, routes: summary.lines }, `route ${config.route.mode}: ${summary.lines.join('; ')}`);
  const dialOptions = { timeoutMs: config.timeouts.dialMs };
  const upstreamOptions = { timeoutMs: config.timeouts.upstreamMs, onFailure: upstreamFailureLogger(log), auth: { gss: options.gss ?? systemGss(), learned: new LearnedMechanisms() } };
  // What an upstream request may wait for; a reload changes them for requests from then on.
  const forwardTimeouts = { headersTimeoutMs: config.timeouts.originResponseMs, bodyTimeoutMs: config.timeouts.idleMs };
  const registry = new GrantRegistry(self, Date.now);
  const tokens = configTokens(config.grants, options.env);
  if (!tokens.ok) return tokens;
  installConfigGrants(registry, config, tokens.value, new Set());
  // Series exist only for configured listeners (bounded labels); without admin.metrics nothing is counted.
  const metrics = config.admin.metrics === undefined ? new NoopMetrics() : await createMetrics({ listeners: [...config.listeners.map((l) => l.name), DEDICATED_LISTENER_NAME] });
  metricsRef.current = metrics;
  // The file store is always fresh; startApp points this at the fleet sync on the Redis store.
  const freshness = { isFresh: (): boolean => true };
  // Looked up in the routes in force: a reload that changes route.proxy changes what may be dialed.
  const upstreamConnector = createUpstreamConnector((host, port) => network.current.routes.upstreams.get(`${host} ${port}`), (proxy) => connectToProxy(proxy, upstreamOptions));
  const events = options.events ?? new EventRing();
  const asks = new AskRegistry({ events, now: Date.now });
  // A revoked, forgotten or dropped grant refuses the hops held on its asks at once.
  registry.onGrantEnded((id) => asks.endGrant(id));
  // An expired grant's held hops are refused grant_expired, and a supervisor sees it expire.
  registry.onGrantExpired((id) => {
    asks.endGrant(id, 'grant_expired');
    const generation = registry.grants.get(id)?.generation ?? null;
    events.publish('grant', { grant: id, generation }, { ts: new Date().toISOString(), action: 'expire', grant: id, generation });
  });
  const runtime: ProxyRuntime = {
    gate: new ConnectionGate(config.limits.maxConnections),
    authThrottle: new AuthThrottle({ perGrantId: config.limits.authFailuresPerMinute, perSource: config.limits.authFailuresPerMinutePerSource }, Date.now, log),
    maxHeaderCount: config.limits.maxHeaderCount,
    handshakeTimeoutMs: config.timeouts.headersMs,
    metrics,
    registry,
    resolver: built.value.resolver,
    routes: built.value.routes.selector,
    now: Date.now,
    audit,
    log,
    forwardAgent: new PrincipalPools(() => createForwardAgent({ connect: createPinnedConnector(dialOptions), ...forwardTimeouts })),
    upstreamAgent: new PrincipalPools(() => createForwardAgent({ connect: upstreamConnector, ...forwardTimeouts })),
    boundUpstreams: new BoundUpstreams((origin) => createUpstreamClient(origin, { connect: upstreamConnector, ...forwardTimeouts })),
    dial: dialOptions,
    upstream: upstreamOptions,
    relay: { idleTimeoutMs: config.timeouts.idleMs },
    ledgerFresh: () => freshness.isFresh(),
    events,
    asks,
    hopCache: new HopCache({ registry, self, routes: { epoch: () => runtime.routes.epoch?.() ?? null }, now: () => performance.now() }),
  };
  /** Puts a rebuilt resolver and route selector in force (a reload); the old selector's PAC refresh stops. */
  const useNetwork = (next: Network): void => {
    const previous = network.current;
    network.current = next;
    const writable = runtime as { resolver: Resolver; routes: RouteSelector };
    writable.resolver = next.resolver;
    writable.routes = next.routes.selector;
    if (previous.routes.selector !== next.routes.selector) previous.routes.selector.close();
  };
  const rebuildNetwork = (next: Config): Promise<Built<Network>> => buildNetwork(next, options, log, metricsRef);
  /** A reload's timeouts and limits, for every new connection, hop, dial and forwarded request from now on. */
  const useTunables = (next: Config): void => {
    // The operational log's level, when it is Sluice's own pino logger (a caller's log keeps its own).
    if (options.log === undefined && 'level' in log) (log as { level: string }).level = next.log.level;
    const writable = runtime as { relay: RelayLimits; handshakeTimeoutMs: number; maxHeaderCount: number; forwardAgent: PrincipalPools; upstreamAgent: PrincipalPools };
    (dialOptions as { timeoutMs: number }).timeoutMs = next.timeouts.dialMs;
    (upstreamOptions as { timeoutMs: number }).timeoutMs = next.timeouts.upstreamMs;
    forwardTimeouts.headersTimeoutMs = next.timeouts.originResponseMs;
    forwardTimeouts.bodyTimeoutMs = next.timeouts.idleMs;
    writable.relay = { idleTimeoutMs: next.timeouts.idleMs };
    writable.handshakeTimeoutMs = next.timeouts.headersMs;
    writable.maxHeaderCount = next.limits.maxHeaderCount;
    runtime.gate.setMax(next.limits.maxConnections);
    runtime.authThrottle.setLimits({ perGrantId: next.limits.authFailuresPerMinute, perSource: next.limits.authFailuresPerMinutePerSource });
    if (next.timeouts.originResponseMs !== config.timeouts.originResponseMs || next.timeouts.idleMs !== config.timeouts.idleMs) {
      // undici takes its timeouts at construction: new agents for new requests; the old ones finish theirs.
      const [forward, upstream] = [runtime.forwardAgent, runtime.upstreamAgent];
      writable.forwardAgent = new PrincipalPools(() => createForwardAgent({ connect: createPinnedConnector(dialOptions), ...forwardTimeouts }));
      writable.upstreamAgent = new PrincipalPools(() => createForwardAgent({ connect: upstreamConnector, ...forwardTimeouts }));
      void forward.close().catch(() => undefined);
      void upstream.close().catch(() => undefined);
    }
  };
  return { ok: true, value: { runtime, self, pacError, pac: () => network.current.routes.pac, tokens: tokens.value, freshness, rebuildNetwork, useNetwork, useTunables } };
}

/** Installs config grants, replacing earlier config grants; `revoked` ids load revoked. Returns connections ended. */
function installConfigGrants(registry: GrantRegistry, config: Config, tokens: ReadonlyMap<string, Buffer>, revoked: ReadonlySet<string>): number {
  const compiled = config.grants.map((section, i) => {
    const { id, tokenSha256: _h, tokenEnv: _e, ...spec } = section;
    const result = registry.compile({ id, spec, revoked: revoked.has(id), tokenSha256: null }, `grants[${i}]`);
    if (!result.ok) throw new ProxyError('ERR_CONFIG_INVALID', result.issues.map((x) => `${x.path}: ${x.message}`).join('\n'));
    return { grant: result.value, tokenSha256: tokens.get(id) ?? null };
  });
  return registry.install(compiled);
}

function installRecord(registry: GrantRegistry, record: GrantRecord, log: OperationalLog): void {
  const compiled = registry.compile({ id: record.id, spec: record.spec, revoked: record.revokedAt !== null, tokenSha256: null }, '');
  if (!compiled.ok) {
    log.error({ grant: record.id }, 'a stored grant no longer compiles; it stays unusable');
    return;
  }
  registry.install([{ grant: compiled.value, tokenSha256: record.tokenSha256 === null ? null : Buffer.from(record.tokenSha256, 'hex') }]);
}

/** The Redis store of `ledger.store: redis`, connected and checked; null for the file store. */
async function openSharedStore(config: Config, env: AppOptions['env']): Promise<RedisLedgerStore | null> {
  const redis = config.ledger.redis;
  if (config.ledger.store !== 'redis' || redis === undefined) return null;
  const target = resolveRedisTarget(redis, env);
  if (!target.ok) throw new ProxyError('ERR_CONFIG_INVALID', target.issues.map((i) => `${i.path}: ${i.message}`).join('\n'));
  return openRedisLedgerStore({ target: target.value, keyPrefix: redis.keyPrefix, commandTimeoutMs: Math.min(1000, config.ledger.maxStaleMs) });
}

/** Changes other instances made reach the grants in force here: a revocation ends live connections at once. */
async function startFleetSync(ledger: Ledger, store: RedisLedgerStore, config: Config, runtime: ProxyRuntime): Promise<FleetSync> {
  const { registry, log } = runtime;
  // A supervisor on this instance sees the fleet's grant changes too (issue 27): `via: "fleet"`.
  const announce = (action: string, grant: string, generation: string | null): void => {
    runtime.events?.publish('grant', { grant, generation }, { ts: new Date().toISOString(), action, grant, generation, via: 'fleet' });
  };
  ledger.onRemote((change) => {
    const generation = change.kind === 'issued' ? (change.record.spec.generation ?? null) : (ledger.get(change.id)?.spec.generation ?? null);
    if (change.kind === 'issued') installRecord(registry, change.record, log);
    else if (change.kind === 'revoked') registry.revoke(change.id);
    else registry.forget(change.id);
    announce(change.kind === 'issued' ? 'issue' : change.kind === 'revoked' ? 'revoke' : 'forget', change.kind === 'issued' ? change.record.id : change.id, generation);
  });
  ledger.onRotated((record) => announce('rotate', record.id, record.spec.generation ?? null));
  const sync = new FleetSync(ledger, store, {
    pollMs: FLEET_POLL_MS,
    maxStaleMs: config.ledger.maxStaleMs,
    now: Date.now,
    onStoreState: (up, detail) => (up ? log.info({ store: store.label }, detail) : log.error({ store: store.label }, detail)),
    onCatchUp: (up, stalenessMs) => runtime.metrics.ledgerStore(up, stalenessMs / 1000),
    onRevocationLag: (lagMs) => runtime.metrics.revocationLagSeconds(lagMs / 1000),
  });
  await sync.start();
  return sync;
}

export async function startApp(config: Config, options: StartOptions): Promise<SluiceApp> {
  const built = await buildRuntime(config, options);
  if (!built.ok) throw new ProxyError('ERR_CONFIG_INVALID', built.issues.map((i) => `${i.path}: ${i.message}`).join('\n'));
  const { runtime, self, pac, tokens, freshness, rebuildNetwork, useNetwork, useTunables } = built.value;
  const registry = runtime.registry;
  const shared = await openSharedStore(config, options.env);
  const stateFile = new LedgerStore(config.state, options.uid);
  const ledger = await Ledger.open(stateFile, undefined, shared, options.cwd).catch(async (error: unknown) => {
    await shared?.close();
    throw error;
  });
  if (shared !== null) {
    // Budgets hold across the fleet: a budgeted grant's connections and bytes are counted in the store.
    registry.useSharedBudgets(shared.budgets(config.ledger.redis?.leaseTtlMs ?? 10_000), (error) =>
      runtime.log.error({ store: shared.label }, `ledger store ${shared.label}: a budget call failed (${describeStoreError(error, shared)})`),
    );
  }
  ledger.setConfigGrants(config.grants);
  // Revocations outlive restarts: a config grant revoked at run time loads revoked.
  const revokedConfig = new Set(ledger.list().filter((r) => r.source === 'config' && r.revokedAt !== null).map((r) => r.id));
  installConfigGrants(registry, config, tokens, revokedConfig);
  for (const record of ledger.list()) if (record.source === 'runtime') installRecord(registry, record, runtime.log);
  // On the file store, budgets survive restarts through the usage file (on Redis, the store counts them).
  const usageFile = shared === null ? new UsageFile(config.state, options.uid) : null;
  if (usageFile !== null) {
    const used = await usageFile.read().catch((error: Error) => {
      if (error instanceof ProxyError) throw error;
      throw new ProxyError('ERR_LEDGER_UNREADABLE', `cannot read ${usageFile.file}: ${error.message}`, { cause: error });
    });
    registry.seedUsage(used);
    usageFile.start(() => registry.usageSnapshot(), USAGE_FLUSH_MS);
  }
  // Asks (issue 27): answers for a grant's life are ledger revisions; in a fleet one ask per grant and
  // destination serves every instance, and the first answer on any of them wins.
  await runtime.asks?.useLedger(
    { get: (grant, destination) => ledger.standingAnswer(grant, destination), keep: (grant, destination, decision) => ledger.keepAnswer(grant, destination, decision) },
    shared === null ? null : shared.asks(`sluice-${randomBytes(6).toString('hex')}`),
    (error) => runtime.log.error({ store: shared?.label ?? 'ledger' }, `asks: the ledger store failed a call; the held hops fail closed (${shared === null ? (error as Error).message : describeStoreError(error, shared)})`),
  );

  // Replaced in place by a reload that adds, removes or changes listeners (reloadListeners).
  // One limits object for every listener, read per connection: a reload updates it in place.
  const limits: { -readonly [K in keyof HttpLimits]: HttpLimits[K] } = httpLimits(config);
  const listeners: BoundListener[] = await startListeners(runtime, config.listeners, limits).catch((error: unknown) => {
    throw listenRefused(error, (listen) => {
      const index = config.listeners.findIndex((l) => l.listen === listen);
      return index < 0 ? 'listeners' : `listeners[${index}].listen`;
    });
  });
  for (const l of listeners) self.add(l.address);
  warnExpiring(runtime.log, listeners);
  const certificateCheck = setInterval(() => warnExpiring(runtime.log, listeners), CERTIFICATE_CHECK_MS);
  certificateCheck.unref();
  const dedicated = new DedicatedListeners<BoundListener>({
    open: async (grantId, listen) => {
      const [bound] = await startListeners(runtime, [{ name: DEDICATED_LISTENER_NAME, listen, grant: grantId, protocol: 'http' }], limits);
      if (bound === undefined) throw new Error('listener did not start');
      return bound;
    },
    stop: stopListeners,
  }, self);
  for (const record of ledger.list()) {
    const listen = record.spec.listen;
    if (record.source === 'runtime' && record.revokedAt === null && listen !== undefined) {
      await dedicated.open(record.id, listen).catch((error: Error) => runtime.log.error({ grant: record.id }, `cannot reopen dedicated listener: ${error.message}`));
    }
  }

  const sync = shared === null ? null : await startFleetSync(ledger, shared, config, runtime);
  if (sync !== null) freshness.isFresh = () => sync.isFresh();

  // The config in force: what a reload compares the file against, so that a restart-only change (state,
  // ledger, …) reverted before any restart reports nothing (UX review 2026-12-04 finding 11).
  let current = config;
  /** A refused reload is logged here, once, whether SIGHUP or POST /v1/reload asked for it. */
  async function reload(): Promise<ControlResult<ReloadOutcome>> {
    const result = await tryReload();
    if (!result.ok) runtime.log.error({ issues: result.issues }, `reload refused, keeping the running config: ${result.issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`);
    return result;
  }
  async function tryReload(): Promise<ControlResult<ReloadOutcome>> {
    // The one validation check-config and start run (loadCheckedConfig): a reload refuses what they refuse.
    const loaded = await loadCheckedConfig(current.sourcePath, { env: options.env, cwd: options.cwd, ...(options.hostInterfaces === undefined ? {} : { hostInterfaces: options.hostInterfaces }) });
    if (!loaded.ok) return { ok: false, status: 400, reason: 'config_invalid', issues: loaded.issues };
    const next = loaded.config;
    const nextIssues = checkConfigGrants(next.grants, options.env, self);
    const nextTokens = configTokens(next.grants, options.env);
    if (nextIssues.length > 0 || !nextTokens.ok) return { ok: false, status: 400, reason: 'config_invalid', issues: nextTokens.ok ? nextIssues : [...nextIssues, ...nextTokens.issues] };
    // The audit file is opened again on every reload (logrotate moved it; or audit.file names another).
    try {
      runtime.audit.reopen?.(next.audit.file);
    } catch (error) {
      return { ok: false, status: 400, reason: 'config_invalid', issues: [{ path: 'audit.file', message: `cannot open ${next.audit.file}: ${(error as Error).message}` }] };
    }
    // A changed dns or route section: the resolver and route selector are built beside the ones in force
    // and swapped in only once the rest of the reload holds.
    const sections = changedSections(current, next);
    let network: Network | null = null;
    if (sections.includes('dns') || sections.includes('route') || sections.includes('limits')) {
      const rebuilt = await rebuildNetwork(next);
      if (!rebuilt.ok) {
        if (next.audit.file !== current.audit.file) runtime.audit.reopen?.(current.audit.file);
        return { ok: false, status: 400, reason: 'config_invalid', issues: rebuilt.issues };
      }
      network = rebuilt.value;
    }
    // The metrics listener moved: the new one is bound beside the old, which closes once the reload holds.
    const metricsMoves = next.admin.metrics !== current.admin.metrics && next.admin.metrics !== undefined && metricsServer !== null;
    let nextMetrics: MetricsServer | null = null;
    const undoSoFar = (): void => {
      if (next.audit.file !== current.audit.file) runtime.audit.reopen?.(current.audit.file);
      network?.routes.selector.close();
      void nextMetrics?.close();
    };
    if (metricsMoves && next.admin.metrics !== undefined) {
      try {
        nextMetrics = await startMetricsServer(next.admin.metrics, runtime.metrics, control);
      } catch (error) {
        undoSoFar();
        return { ok: false, status: 400, reason: 'config_invalid', issues: [{ path: 'admin.metrics', message: bindFailure(next.admin.metrics, error) }] };
      }
    }
    // Listeners next: one that cannot bind rolls the whole reload back before any grant changes.
    const relisted = await reloadListeners(runtime, listeners, current.listeners, next.listeners, limits, self);
    if (!relisted.ok) {
      undoSoFar();
      return { ok: false, status: 400, reason: 'config_invalid', issues: [relisted.issue] };
    }
    if (nextMetrics !== null || (next.admin.metrics === undefined && metricsServer !== null)) {
      // Moved, or switched off (counting goes on; nothing serves it): the old listener closes.
      const old = metricsServer;
      metricsServer = nextMetrics;
      if (nextMetrics !== null) self.add(nextMetrics.address);
      void old?.close();
    }
    // In force from here: new hops resolve and route by the new sections (hops already dialed keep theirs).
    if (network !== null) useNetwork(network);
    useTunables(next);
    Object.assign(limits, httpLimits(next));
    for (const l of listeners) {
      if (l.http === null) continue;
      // node:http reads these per new connection.
      l.http.headersTimeout = limits.headersTimeoutMs;
      (l.http as unknown as { maxHeaderSize: number }).maxHeaderSize = limits.maxHeaderBytes;
      // maxHeadersCount stays 0: the identify stage counts fields against rt.maxHeaderCount (server.ts).
    }
    // The ledger and the grants in force change together.
    const dropped = current.grants.map((g) => g.id).filter((id) => !next.grants.some((g) => g.id === id) && ledger.get(id)?.source === 'config');
    ledger.setConfigGrants(next.grants);
    const revoked = new Set(ledger.list().filter((r) => r.source === 'config' && r.revokedAt !== null).map((r) => r.id));
    let ended = registry.remove(dropped, 'grant_changed');
    ended += installConfigGrants(registry, next, nextTokens.value, revoked);
    // The grant table's revision already moved; a reload empties the hop cache outright all the same.
    runtime.hopCache.clear();
    ended += await relisted.retire();
    const changed = sections;
    const needsRestart = changed.filter((section) => !RELOADED_SECTIONS.has(section) && !(section === 'admin' && onlyMetricsApplied(current, next, metricsServer !== null || next.admin.metrics === undefined)));
    // The metrics listener as bound now: moved, closed, or as it was (switched on at run time is not applied).
    const metricsInForce = nextMetrics !== null ? next.admin.metrics : next.admin.metrics === undefined ? undefined : current.admin.metrics;
    current = inForceAfterReload(current, next, metricsInForce);
    const listenerChanges = { added: relisted.added, removed: relisted.removed, changed: relisted.changed, tlsReloaded: relisted.tlsReloaded };
    const tlsNote = relisted.tlsReloaded.length === 0 ? '' : `; TLS files read again for listener(s) ${relisted.tlsReloaded.join(', ')} (new handshakes use them)`;
    runtime.log.info({ endedConnections: ended, changed, listeners: listenerChanges }, `config reloaded: ${changed.length === 0 ? 'nothing changed' : `changed ${changed.join(', ')}`}${tlsNote}`);
    if (needsRestart.length > 0) runtime.log.warn({ needsRestart }, restartWarning(needsRestart));
    return { ok: true, value: { endedConnections: ended, changed, needsRestart, listeners: listenerChanges } };
  }

  let closing = false;
  const control = createControl({
    ledger,
    registry,
    asks: runtime.asks,
    dedicated,
    cwd: options.cwd,
    reload,
    log: runtime.log,
    ledgerFresh: () => freshness.isFresh(),
    readiness: () => {
      // A balancer must stop sending while the listeners are shut and live connections drain.
      if (closing) return { ready: false, detail: 'draining: shutting down' };
      if (!freshness.isFresh()) return { ready: false, detail: 'the shared ledger store is out of reach (ledger.maxStaleMs)' };
      const source = pac();
      return source !== null && source.current === null ? { ready: false, detail: 'no PAC script loaded' } : { ready: true, detail: 'listening' };
    },
  });

  let admin: AdminServer | null = null;
  let metricsServer: MetricsServer | null = null;
  try {
    if (config.admin.listen !== undefined) {
      admin = await startAdminServer({
        listen: config.admin.listen,
        control,
        adminTokenSha256: resolveAdminTokenSha256(config.admin, options.env),
        log: runtime.log,
        isUnixSocketAlive,
        events: runtime.events,
      });
      self.add(admin.address);
    }
    if (config.admin.metrics !== undefined) {
      metricsServer = await startMetricsServer(config.admin.metrics, runtime.metrics, control);
      self.add(metricsServer.address);
    }
  } catch (error) {
    await admin?.close();
    await stopListeners(listeners, 0);
    await dedicated.closeAll(0);
    throw listenRefused(error, () => (admin === null && config.admin.listen !== undefined ? 'admin.listen' : 'admin.metrics'));
  }

  // Read again now that everything listens, then every hostRefreshMs: a new interface address is `host` within that.
  self.host.refresh();
  self.host.start();
  return {
    runtime,
    listeners,
    adminAddress: admin?.address ?? null,
    get metricsAddress() {
      return metricsServer?.address ?? null;
    },
    self,
    control,
    ledger,
    ledgerStore: shared === null ? { kind: 'file', file: stateFile.file } : { kind: 'redis', label: shared.label },
    async close(drainMs = 0) {
      if (closing) return;
      closing = true;
      clearInterval(certificateCheck);
      self.host.stop();
      await Promise.all([stopListeners(listeners, drainMs), dedicated.closeAll(drainMs)]);
      await admin?.close();
      await metricsServer?.close();
      await sync?.stop();
      await usageFile?.stop(() => registry.usageSnapshot()).catch((error: Error) => runtime.log.error({}, `cannot write the usage file: ${error.message}`));
      registry.close();
      runtime.routes.close();
      await runtime.forwardAgent.close();
      await runtime.upstreamAgent.close();
      await runtime.boundUpstreams.close();
      await runtime.audit.flush();
    },
  };
}

/**
 * An address the host refuses at start (in use, a port below 1024, on no interface), named by its key:
 * main.ts exits 1 with it. Not a config error (exit 2): check-config binds nothing, and the file is
 * valid; what is missing is on the host (docs/configuration.md, "Binding"). Any other error as it came.
 */
function listenRefused(error: unknown, keyOf: (listen: string) => string): unknown {
  if (!(error instanceof ListenError)) return error;
  return new ProxyError('ERR_LISTEN_REFUSED', `${keyOf(error.listen)}: ${error.message}`, { cause: error });
}

/** Why a reload could not bind `listen`, in the words start uses for the same address. */
function bindFailure(listen: string, error: unknown): string {
  return error instanceof ListenError ? error.message : `cannot bind ${listen}: ${(error as Error).message}`;
}

/** The config sections a reload applies; a change to any other is reported as needing a restart. */
const RELOADED_SECTIONS: ReadonlySet<string> = new Set(['grants', 'listeners', 'audit', 'dns', 'route', 'timeouts', 'limits', 'log']);

/**
 * The one start-up line (UX review 2026-12-04 finding 8): the version, the config file as given, the
 * listeners, the grants and where the ledger lives, never a secret. A state file under `cwd` is shown
 * relative to it.
 */
export function startedLine(app: SluiceApp, configFile: string, version: string, cwd: string): { readonly fields: Record<string, unknown>; readonly msg: string } {
  const records = app.ledger.list();
  const revoked = records.filter((r) => r.revokedAt !== null).length;
  const grants = records.length - revoked;
  const store = app.ledgerStore;
  let ledger: string;
  if (store.kind === 'file') {
    const relative = path.relative(cwd, store.file);
    ledger = `file ${relative !== '' && !relative.startsWith('..') && !path.isAbsolute(relative) ? relative : store.file}`;
  } else ledger = `${store.label} at revision ${app.ledger.revision}`;
  const listeners = app.listeners.length;
  return {
    fields: { version, config: configFile, listeners, grants, revokedGrants: revoked, ledger },
    msg: `sluice ${version} started: config ${configFile}, ${listeners} listener(s), ${grants} grant(s)${revoked > 0 ? ` (and ${revoked} revoked)` : ''}, ledger ${ledger}`,
  };
}

/**
 * The config in force after a reload: `next` for the sections a reload applies, the running values of
 * the others (they wait for a restart), and admin.metrics as the metrics listener is bound.
 */
function inForceAfterReload(current: Config, next: Config, metrics: string | undefined): Config {
  const merged: Record<string, unknown> = { ...next };
  for (const key of new Set([...Object.keys(current), ...Object.keys(next)])) {
    if (key === 'sourcePath' || RELOADED_SECTIONS.has(key)) continue;
    if (key in current) merged[key] = (current as unknown as Record<string, unknown>)[key];
    else delete merged[key];
  }
  // Key order kept: sections are compared as JSON (changedSections).
  const admin: Record<string, unknown> = { ...current.admin, metrics };
  if (metrics === undefined) delete admin['metrics'];
  merged['admin'] = Object.freeze(admin);
  return Object.freeze(merged) as unknown as Config;
}

/** `config reloaded, but a change to state takes effect …` / `… changes to state and ledger take effect …`. */
function restartWarning(sections: readonly string[]): string {
  const list = sections.length === 1 ? (sections[0] ?? '') : `${sections.slice(0, -1).join(', ')} and ${sections.at(-1) ?? ''}`;
  return `config reloaded, but ${sections.length === 1 ? `a change to ${list} takes` : `changes to ${list} take`} effect only after a restart`;
}

/** The top-level sections whose value differs between two configs, in the config's order. */
function changedSections(from: Config, to: Config): string[] {
  const keys = [...new Set([...Object.keys(from), ...Object.keys(to)])].filter((key) => key !== 'sourcePath');
  return keys.filter((key) => JSON.stringify((from as unknown as Record<string, unknown>)[key]) !== JSON.stringify((to as unknown as Record<string, unknown>)[key]));
}

type ListenerReload =
  | { readonly ok: true; readonly added: string[]; readonly removed: string[]; readonly changed: string[]; readonly tlsReloaded: string[]; retire(): Promise<number> }
  | { readonly ok: false; readonly issue: ConfigIssue };

/**
 * Brings the bound listeners to `to`: a listener whose section is unchanged keeps running with its
 * connections; a new one is bound; a removed or changed one is closed once the reload is kept
 * (`retire`, its live tunnels end with proxy_shutdown). A changed listener on another address is bound
 * before the old one closes; on the same address the old one closes first. If any bind fails,
 * everything is put back as it was and nothing else of the reload happens.
 */
async function reloadListeners(runtime: ProxyRuntime, live: BoundListener[], from: readonly ListenerSection[], to: readonly ListenerSection[], limits: HttpLimits, self: SelfAddresses): Promise<ListenerReload> {
  // New TLS files (a rotation: the same paths with new contents, or new paths) swap the context of new
  // handshakes without restarting the listener, so no live tunnel ends; turning TLS on or off restarts it.
  // Every file set loads before anything changes: one that does not refuses the whole reload.
  const tls = loadListenersTls(to);
  if (!tls.ok) return { ok: false, issue: tls.issues[0] as ConfigIssue };
  const shape = (s: ListenerSection): string => JSON.stringify({ ...s, tls: s.tls !== undefined });
  const same = (a: ListenerSection, b: ListenerSection): boolean => shape(a) === shape(b);
  const before = new Map(from.map((section) => [section.name, section]));
  const after = new Map(to.map((section) => [section.name, section]));
  const removed = from.filter((section) => !after.has(section.name));
  const changed = to.filter((section) => before.has(section.name) && !same(before.get(section.name) as ListenerSection, section));
  const added = to.filter((section) => !before.has(section.name));
  const boundOf = (name: string): BoundListener | undefined => live.find((l) => l.name === name);
  const started: BoundListener[] = [];
  const closedEarly: ListenerSection[] = [];
  const rollBack = async (section: ListenerSection, error: unknown): Promise<ListenerReload> => {
    await stopListeners(started, 0);
    for (const old of closedEarly) {
      const [again] = await startListeners(runtime, [old], limits).catch((e: Error) => {
        runtime.log.error({ listener: old.name }, `reload rollback: cannot bind listener ${old.name} again: ${e.message}`);
        return [];
      });
      const at = live.findIndex((l) => l.name === old.name);
      if (again !== undefined && at >= 0) live[at] = again;
    }
    const index = to.indexOf(section);
    return { ok: false, issue: { path: `listeners[${index}].listen`, message: bindFailure(section.listen, error) } };
  };
  for (const section of [...added, ...changed]) {
    const old = before.get(section.name);
    const previous = boundOf(section.name);
    try {
      if (old !== undefined && old.listen === section.listen && previous !== undefined) {
        // The same address cannot be bound twice: the old listener goes first, and comes back on failure.
        await stopListeners([previous], 0);
        closedEarly.push(old);
      }
      const [bound] = await startListeners(runtime, [section], limits);
      if (bound !== undefined) started.push(bound);
    } catch (error) {
      return rollBack(section, error);
    }
  }
  for (const bound of started) self.add(bound.address);
  const retiring: BoundListener[] = [];
  for (const section of [...removed, ...changed]) {
    const old = boundOf(section.name);
    if (old !== undefined && !closedEarly.some((c) => c.name === section.name)) retiring.push(old);
  }
  // The new set, in the new config's order: unchanged ones keep their server and connections.
  const next = to.map((section) => started.find((l) => l.name === section.name) ?? boundOf(section.name)).filter((l): l is BoundListener => l !== undefined);
  live.splice(0, live.length, ...next);
  const tlsReloaded: string[] = [];
  for (const l of next) {
    const loaded: LoadedTls | undefined = tls.value.get(l.name);
    if (l.tls === null || loaded === undefined || started.includes(l)) continue;
    l.tls.current = loaded;
    tlsReloaded.push(l.name);
  }
  warnExpiring(runtime.log, next);
  return {
    ok: true,
    added: added.map((s) => s.name),
    removed: removed.map((s) => s.name),
    changed: changed.map((s) => s.name),
    tlsReloaded,
    async retire() {
      const ended = retiring.reduce((n, l) => n + l.sockets.size, 0);
      await stopListeners(retiring, 0);
      return ended;
    },
  };
}

/** The stages a reload can swap as one: the resolver (dns) and the route selector with its PAC and upstreams (route). */
export interface Network {
  readonly resolver: Resolver;
  readonly routes: BuiltRoutes;
  readonly pacError: string | null;
}

async function buildNetwork(config: Config, options: AppOptions, log: OperationalLog, metricsRef: { current: MetricsSink | null }): Promise<Built<Network>> {
  const hosts = compileHosts(config.dns.hosts);
  if (!hosts.ok) return hosts;
  const lookup =
    options.lookup ??
    (config.dns.servers === 'system'
      ? createSystemLookup(Math.floor(config.dns.systemTtlMs / 1000))
      : createServersLookup(config.dns.servers, config.dns.timeoutMs));
  const { maxConcurrentLookups, maxConcurrentLookupsPerGrant } = config.limits;
  const resolver = new Resolver(lookup, { ...config.dns, hosts: hosts.value, maxConcurrentLookups, maxConcurrentLookupsPerGrant }, () => performance.now());
  const routes = buildRoutes(config.route, options.env, {
    lookupSync: (host) => resolver.peek(host)?.map((a) => a.address) ?? null,
    fetchText,
    // The route fails closed (pac_unavailable) and the source retries: a warning, not a fault of Sluice's.
    onPacError: (message) => log.warn({ route: 'pac' }, message),
    onPacLoad: () => log.info({ route: 'pac' }, 'PAC script loaded'),
    onPacCache: (hit) => metricsRef.current?.pacCache(hit),
  }, { maxPacWaitingPerGrant: config.limits.maxPacWaitingPerGrant });
  if (!routes.ok) return routes;
  let pacError: string | null = null;
  const pac = routes.value.pac;
  if (pac !== null) {
    // Without a PAC every PAC hop fails closed with pac_unavailable; refreshes may load one later.
    if (!(await pac.load())) pacError = pac.lastError;
    pac.start();
  }
  return { ok: true, value: { resolver, routes: routes.value, pacError } };
}

/**
 * Whether `admin` changed only in `metrics` and the reload applied it: a moved or closed metrics
 * listener. Metrics switched on at run time are not: without admin.metrics at start nothing is counted
 * (NoopMetrics, so the hot path pays nothing), so that needs a restart.
 */
function onlyMetricsApplied(from: Config, to: Config, applied: boolean): boolean {
  const { metrics: _a, ...fromRest } = from.admin;
  const { metrics: _b, ...toRest } = to.admin;
  return applied && JSON.stringify(fromRest) === JSON.stringify(toRest) && (from.admin.metrics !== undefined || to.admin.metrics === undefined);
}
