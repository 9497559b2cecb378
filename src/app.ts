// The composition root: builds every module from the frozen config and wires them through ports.
// The only file that knows every module; it touches no process globals (main.ts passes env and cwd).
import { ProxyError, type LookupAll, type LookupAnswer, type UpstreamProxy } from './core/index.js';
import type { Config, ConfigIssue } from './config/index.js';
import { canonicalizeHost } from './authority/index.js';
import { TokenStore } from './identity/index.js';
import { Resolver, SelfAddresses, createServersLookup, createSystemLookup } from './resolve/index.js';
import { PacSource, directSelector, pacSelector, parseUpstream, proxySelector, readSystemProxy, systemSelector, type RouteSelector } from './route/index.js';
import { connectToProxy, createPinnedConnector, createUpstreamConnector, fetchText } from './egress/index.js';
import { createForwardAgent } from './relay/index.js';
import { createOperationalLog, createPinoSink, type AuditSink, type OperationalLog } from './audit/index.js';
import { compileGrants, loadTokens, startListeners, stopListeners, type BoundListener, type ProxyRuntime } from './proxy/index.js';
import net from 'node:net';

export interface AppOptions {
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Replaces DNS (tests map names to loopback here). */
  readonly lookup?: LookupAll;
  /** Replaces the pino audit sink (tests observe records here). */
  readonly audit?: AuditSink;
  readonly log?: OperationalLog;
}

export interface SluiceApp {
  readonly runtime: ProxyRuntime;
  readonly listeners: readonly BoundListener[];
  readonly self: SelfAddresses;
  close(): Promise<void>;
}

export type Built<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly issues: readonly ConfigIssue[] };

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

interface BuiltRoutes {
  readonly selector: RouteSelector;
  readonly upstreams: ReadonlyMap<string, UpstreamProxy>;
  readonly pac: PacSource | null;
}

function buildRoutes(config: Config, env: AppOptions['env'], resolver: Resolver, log: OperationalLog): Built<BuiltRoutes> {
  const route = config.route;
  const upstreams = new Map<string, UpstreamProxy>();
  const remember = (p: UpstreamProxy): UpstreamProxy => {
    upstreams.set(`${p.host} ${p.port}`, p);
    return p;
  };
  if (route.mode === 'proxy' && route.proxy !== undefined) {
    const parsed = parseUpstream(route.proxy.url, route.proxy);
    if (!parsed.ok) return { ok: false, issues: [{ path: 'route.proxy', message: parsed.message }] };
    return { ok: true, value: { selector: proxySelector(remember(parsed.value)), upstreams, pac: null } };
  }
  if (route.mode === 'system') {
    const system = readSystemProxy(env, route.system?.caFile);
    if (!system.ok) return { ok: false, issues: system.issues.map((i) => ({ path: `route.system (${i.variable})`, message: i.message })) };
    const inspects = route.system?.inspectsTls ?? false;
    const mark = (p: UpstreamProxy | null): UpstreamProxy | null => (p === null ? null : remember({ ...p, inspectsTls: inspects }));
    return { ok: true, value: { selector: systemSelector({ ...system.value, http: mark(system.value.http), https: mark(system.value.https) }), upstreams, pac: null } };
  }
  if (route.mode === 'pac' && route.pac !== undefined) {
    const pacConfig = route.pac;
    const settings = { credentialsFile: pacConfig.credentialsFile, caFile: pacConfig.caFile, inspectsTls: pacConfig.inspectsTls };
    // Fail at load time, not on the first hop, when a PAC proxy's credentials or CA cannot be read.
    const probe = parseUpstream('http://pac-probe.invalid:1', settings);
    if (!probe.ok) return { ok: false, issues: [{ path: 'route.pac', message: probe.message }] };
    const source = new PacSource({
      file: pacConfig.file,
      url: pacConfig.url,
      refreshMs: pacConfig.refreshMs,
      limits: { timeoutMs: pacConfig.timeoutMs, memoryBytes: pacConfig.memoryBytes, stackBytes: 512 * 1024 },
      host: {
        lookupSync: (host: string) => resolver.peek(host)?.map((a) => a.address) ?? null,
        myIpAddress: () => pacConfig.myIpAddress,
        now: () => new Date(),
      },
      fetchText,
      onError: (message) => log.error({ route: 'pac' }, message),
      onLoad: () => log.info({ route: 'pac' }, 'PAC script loaded'),
    });
    const selector = pacSelector(source, settings);
    const trackingSelector: RouteSelector = {
      ...selector,
      select: async (dest, kind, scheme) => {
        const chosen = await selector.select(dest, kind, scheme);
        if (chosen.ok) for (const h of chosen.value.hops) if (h.kind === 'proxy') remember(h.proxy);
        return chosen;
      },
    };
    return { ok: true, value: { selector: trackingSelector, upstreams, pac: source } };
  }
  return { ok: true, value: { selector: directSelector(), upstreams, pac: null } };
}

function selfListeners(config: Config): string[] {
  const listens = config.listeners.map((l) => l.listen);
  if (config.admin.listen !== undefined) listens.push(config.admin.listen);
  if (config.admin.metrics !== undefined) listens.push(config.admin.metrics);
  return listens;
}

/** Builds the runtime without listening: used by `start`, `explain` and `check-config`. */
export async function buildRuntime(config: Config, options: AppOptions): Promise<Built<{ runtime: ProxyRuntime; self: SelfAddresses; pacError: string | null }>> {
  const self = new SelfAddresses(selfListeners(config));
  const compiled = compileGrants(config.grants, options.env, self);
  const hosts = compileHosts(config.dns.hosts);
  const issues = [...(compiled.ok ? [] : compiled.issues), ...(hosts.ok ? [] : hosts.issues)];
  if (!compiled.ok || !hosts.ok) return { ok: false, issues };
  const tokens = new TokenStore();
  loadTokens(tokens, compiled.value.tokens);
  const lookup =
    options.lookup ??
    (config.dns.servers === 'system'
      ? createSystemLookup(Math.floor(config.dns.systemTtlMs / 1000))
      : createServersLookup(config.dns.servers, config.dns.timeoutMs));
  const resolver = new Resolver(lookup, { ...config.dns, hosts: hosts.value }, () => performance.now());
  const dialOptions = { timeoutMs: config.timeouts.dialMs };
  const upstreamOptions = { timeoutMs: config.timeouts.upstreamMs };
  const log = options.log ?? createOperationalLog(config.log.level);
  const routes = buildRoutes(config, options.env, resolver, log);
  if (!routes.ok) return routes;
  let pacError: string | null = null;
  if (routes.value.pac !== null) {
    // Without a PAC every PAC hop fails closed with pac_unavailable; refreshes may load one later.
    if (!(await routes.value.pac.load())) pacError = routes.value.pac.lastError;
    routes.value.pac.start();
  }
  const upstreams = routes.value.upstreams;
  const runtime: ProxyRuntime = {
    grants: compiled.value.grants,
    tokens,
    resolver,
    routes: routes.value.selector,
    now: Date.now,
    audit: options.audit ?? createPinoSink(config.audit.file),
    log,
    forwardAgent: createForwardAgent({
      connect: createPinnedConnector(dialOptions),
      headersTimeoutMs: config.timeouts.originResponseMs,
      bodyTimeoutMs: config.timeouts.idleMs,
    }),
    upstreamAgent: createForwardAgent({
      connect: createUpstreamConnector((host, port) => upstreams.get(`${host} ${port}`), (proxy) => connectToProxy(proxy, upstreamOptions)),
      headersTimeoutMs: config.timeouts.originResponseMs,
      bodyTimeoutMs: config.timeouts.idleMs,
    }),
    dial: dialOptions,
    upstream: upstreamOptions,
    relay: { idleTimeoutMs: config.timeouts.idleMs },
  };
  return { ok: true, value: { runtime, self, pacError } };
}

export async function startApp(config: Config, options: AppOptions): Promise<SluiceApp> {
  const built = await buildRuntime(config, options);
  if (!built.ok) {
    throw new ProxyError('ERR_CONFIG_INVALID', built.issues.map((i) => `${i.path}: ${i.message}`).join('\n'));
  }
  const { runtime, self } = built.value;
  const listeners = await startListeners(runtime, config.listeners, {
    headersTimeoutMs: config.timeouts.headersMs,
    keepAliveTimeoutMs: 5_000,
    maxHeaderBytes: 16 * 1024,
  });
  for (const l of listeners) self.add(l.address);
  let closed = false;
  return {
    runtime,
    listeners,
    self,
    async close() {
      if (closed) return;
      closed = true;
      await stopListeners(listeners);
      runtime.routes.close();
      await runtime.forwardAgent.close();
      await runtime.upstreamAgent.close();
      await runtime.audit.flush();
    },
  };
}
