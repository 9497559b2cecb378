// Chooses how an authorized destination is reached: direct, a configured upstream proxy, the system
// proxy variables, or a PAC decision. The principal never influences this (principle A2 in
// docs/principles.md: the host network is a route, not a grant; principle A6: authorization precedes
// routing). DIRECT appears in a route only when the mode or the PAC answer says so; nothing here ever
// falls back to it.
import { deny, ok, type CanonicalDestination, type RequestKind, type Scheme, type UpstreamProxy, type Verdict } from '../core/index.js';
import { pacSendsCredentials } from '../config/index.js';
import { parsePacAnswer } from './pac-answer.js';
import type { PacSource } from './pac-source.js';
import { describeSystemProxy, isSystemProxySplit, type SystemProxy } from './system-proxy.js';
import { parseUpstream, type UpstreamSettings } from './upstream.js';
import type { UpstreamHealth, UpstreamHealthTable } from './upstream-health.js';

export type RouteMode = 'direct' | 'proxy' | 'pac' | 'system';

export type RouteHop =
  | { readonly kind: 'direct' }
  | {
      readonly kind: 'proxy';
      readonly proxy: UpstreamProxy;
      /** Failover back-off (upstream-health.ts): skipped while backing off when the route has another alternative. */
      readonly health?: UpstreamHealth;
    };

export interface Route {
  /** `direct`, `proxy http://corp:8080`, `pac PROXY a:3128; DIRECT`, `system direct`… for decisions and logs. */
  readonly label: string;
  readonly mode: RouteMode;
  /** Alternatives in order; the next is tried only when the previous could not be connected to. */
  readonly hops: readonly RouteHop[];
  readonly pacAnswer: string | null;
}

export interface RouteSummary {
  readonly lines: readonly string[];
  /** One request family goes through a proxy and the other goes direct. */
  readonly isSplit: boolean;
}

export interface RouteSelector {
  readonly mode: RouteMode;
  /** PAC builtins answer from what Sluice already resolved, so resolve before selecting. */
  readonly resolvesFirst: boolean;
  /** System mode: which route each request family takes and why (the startup log and `sluice explain`). */
  readonly summary?: RouteSummary;
  /**
   * `principal` (a grant id) never changes the route. It only says whose share of the PAC queue an
   * evaluation uses (limits.maxPacWaitingPerGrant); a cached route costs no share.
   */
  select(dest: CanonicalDestination, kind: RequestKind, scheme: Scheme | null, principal: string): Promise<Verdict<Route>>;
  /**
   * A value that changes whenever a route selected before may no longer be the answer (the PAC script
   * was replaced); absent when routes never change while the selector lives.
   */
  readonly epoch?: () => unknown;
  close(): void;
}

const DIRECT_HOP: RouteHop = { kind: 'direct' };
const DIRECT_ROUTE: Route = { label: 'direct', mode: 'direct', hops: [DIRECT_HOP], pacAnswer: null };

export function directSelector(): RouteSelector {
  return { mode: 'direct', resolvesFirst: false, select: () => Promise.resolve(ok(DIRECT_ROUTE)), close: () => undefined };
}

/** One upstream proxy, or several tried in order (failover, docs/routes.md#failover); never DIRECT. */
export function proxySelector(proxies: UpstreamProxy | readonly UpstreamProxy[], health?: UpstreamHealthTable): RouteSelector {
  const list = Array.isArray(proxies) ? (proxies as readonly UpstreamProxy[]) : [proxies as UpstreamProxy];
  const hops: RouteHop[] = list.map((proxy) => (health === undefined ? { kind: 'proxy', proxy } : { kind: 'proxy', proxy, health: health.for(proxy.label) }));
  const route: Route = { label: `proxy ${list.map((p) => p.label).join(', ')}`, mode: 'proxy', hops, pacAnswer: null };
  return { mode: 'proxy', resolvesFirst: false, select: () => Promise.resolve(ok(route)), close: () => undefined };
}

export function systemSelector(system: SystemProxy): RouteSelector {
  const direct: Route = { label: 'system direct', mode: 'system', hops: [DIRECT_HOP], pacAnswer: null };
  const via = (proxy: UpstreamProxy | null): Route =>
    proxy === null ? direct : { label: `system proxy ${proxy.label}`, mode: 'system', hops: [{ kind: 'proxy', proxy }], pacAnswer: null };
  const forHttp = via(system.http);
  const forHttps = via(system.https);
  return {
    mode: 'system',
    resolvesFirst: false,
    select(dest, kind) {
      if (system.noProxy?.matches(dest) === true) return Promise.resolve(ok(direct));
      return Promise.resolve(ok(kind === 'connect' ? forHttps : forHttp));
    },
    summary: { lines: describeSystemProxy(system), isSplit: isSystemProxySplit(system) },
    close: () => undefined,
  };
}

const MAX_CACHED_ROUTES = 10_000;

/**
 * PAC answers by `scheme://host:port/`, least recently used evicted first, one entry at a time: a
 * principal churning unique names pushes out the routes nobody used lately, not every principal's at
 * once (review 2026-12 finding 15). A Map keeps insertion order; a hit re-inserts its key at the end.
 */
class RouteCache {
  private readonly entries = new Map<string, Route>();

  constructor(private readonly maxEntries: number) {}

  get(key: string): Route | undefined {
    const route = this.entries.get(key);
    if (route !== undefined) {
      this.entries.delete(key);
      this.entries.set(key, route);
    }
    return route;
  }

  set(key: string, route: Route): void {
    this.entries.delete(key);
    if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value as string);
    this.entries.set(key, route);
  }

  clear(): void {
    this.entries.clear();
  }
}

/** route.pac's settings for every proxy a PAC answer names. */
export interface PacProxySettings extends UpstreamSettings {
  /**
   * route.pac.credentialProxies, canonical `host:port` / `[v6]:port`: the only PAC-named proxies that get
   * the credentials (review 2026-12-04 finding 10). Absent while credentials are configured: none does.
   */
  readonly credentialProxies?: readonly string[] | undefined;
}

/** `host:port`, or `[v6]:port`, of a parsed proxy: its label without the scheme. */
export function proxyHostPort(proxy: UpstreamProxy): string {
  return `${proxy.host.includes(':') ? `[${proxy.host}]` : proxy.host}:${proxy.port}`;
}

export function pacSelector(
  source: PacSource,
  settings: PacProxySettings,
  onCache: (hit: boolean) => void = () => undefined,
  maxCachedRoutes = MAX_CACHED_ROUTES,
  health?: UpstreamHealthTable,
): RouteSelector {
  const cache = new RouteCache(maxCachedRoutes);
  let cachedFor: unknown = null;
  const proxies = new Map<string, UpstreamProxy>();
  // Whoever can alter the PAC chooses the proxies it names: credentials go only to those the operator
  // listed, compared after the same URL parsing that gives the proxy its host (so 127.1, [::0:1] or
  // PROXY.CORP cannot spell their way around the list). Any other proxy is dialed with none.
  const sendsCredentials = pacSendsCredentials(settings);
  const credentialProxies = new Set(settings.credentialProxies ?? []);
  const bareSettings: UpstreamSettings = { caFile: settings.caFile, inspectsTls: settings.inspectsTls };
  const proxyFor = (tls: boolean, host: string, port: number): Verdict<UpstreamProxy> => {
    const key = `${tls ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${port}`;
    const known = proxies.get(key);
    if (known !== undefined) return ok(known);
    const bare = parseUpstream(key, bareSettings);
    if (!bare.ok) return deny('pac_failed', bare.message);
    let proxy = bare.value;
    if (sendsCredentials) {
      if (credentialProxies.has(proxyHostPort(bare.value))) {
        const parsed = parseUpstream(key, settings);
        if (!parsed.ok) return deny('pac_failed', parsed.message);
        proxy = parsed.value;
      } else proxy = { ...bare.value, credentialsWithheld: true };
    }
    proxies.set(key, proxy);
    return ok(proxy);
  };
  return {
    mode: 'pac',
    resolvesFirst: true,
    epoch: () => source.current,
    async select(dest, kind, scheme, principal) {
      const script = source.current;
      if (script === null) return deny('pac_unavailable', source.lastError ?? 'no PAC script');
      // Chromium hands PAC only scheme://host:port/ for tunnels; we do the same for every request so the
      // answer can be cached per scheme/host/port and no path or query reaches the script.
      const urlScheme = kind === 'connect' ? 'https' : (scheme ?? 'http');
      const key = `${urlScheme}://${dest.key}/`;
      // Cached answers belong to one script: a refreshed PAC starts with an empty cache.
      if (cachedFor !== script) {
        cache.clear();
        cachedFor = script;
      }
      const cached = cache.get(key);
      onCache(cached !== undefined);
      if (cached !== undefined) return ok(cached);
      const answer = await script.findProxy(key, dest.host, principal);
      if (!answer.ok) return answer;
      const entries = parsePacAnswer(answer.value);
      if (!entries.ok) return entries;
      const hops: RouteHop[] = [];
      for (const entry of entries.value) {
        if (entry.kind === 'direct') hops.push(DIRECT_HOP);
        else if (entry.kind === 'proxy') {
          const proxy = proxyFor(entry.tls, entry.host, entry.port);
          if (!proxy.ok) return proxy;
          // `PROXY a; PROXY b` fails over with the same back-off as a route.proxy list.
          hops.push(health === undefined ? { kind: 'proxy', proxy: proxy.value } : { kind: 'proxy', proxy: proxy.value, health: health.for(proxy.value.label) });
        }
      }
      if (hops.length === 0) return deny('pac_unsupported_entry', `PAC answered "${answer.value}"`);
      const route: Route = { label: `pac ${answer.value}`, mode: 'pac', hops, pacAnswer: answer.value };
      cache.set(key, route);
      return ok(route);
    },
    close() {
      source.stop();
    },
  };
}

