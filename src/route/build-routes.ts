// Builds the route selector from the route section of config (and, in system mode, Sluice's own
// environment), plus the table of upstream proxies the forward relay may dial.
import type { UpstreamProxy } from '../core/index.js';
import { proxyRouteEntries, type ConfigIssue, type RouteSection } from '../config/index.js';
import { PacSource, type FetchText } from './pac-source.js';
import { directSelector, pacSelector, proxySelector, systemSelector, type RouteSelector } from './select-route.js';
import { readSystemProxy } from './system-proxy.js';
import { parseUpstream } from './upstream.js';
import { UpstreamHealthTable } from './upstream-health.js';

export interface RoutePorts {
  readonly lookupSync: (host: string) => readonly string[] | null;
  readonly fetchText: FetchText;
  readonly onPacError: (message: string) => void;
  readonly onPacLoad: () => void;
  readonly onPacCache: (hit: boolean) => void;
}

/** Each principal's share of what the route module shares between principals. */
export interface RouteLimits {
  /** PAC evaluations one grant may have queued (limits.maxPacWaitingPerGrant). */
  readonly maxPacWaitingPerGrant: number;
}

export type BuildResult<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly issues: readonly ConfigIssue[] };

export interface BuiltRoutes {
  readonly selector: RouteSelector;
  readonly upstreams: ReadonlyMap<string, UpstreamProxy>;
  readonly pac: PacSource | null;
  /** Failover state of the upstream proxies of a route.proxy list and of PAC answers (the metrics gauge reads it). */
  readonly health: UpstreamHealthTable;
}

export function buildRoutes(route: RouteSection, env: Readonly<Record<string, string | undefined>>, ports: RoutePorts, limits: RouteLimits): BuildResult<BuiltRoutes> {
  const upstreams = new Map<string, UpstreamProxy>();
  const remember = (p: UpstreamProxy): UpstreamProxy => {
    upstreams.set(`${p.host} ${p.port}`, p);
    return p;
  };
  const health = new UpstreamHealthTable();
  if (route.mode === 'proxy' && route.proxy !== undefined) {
    // Every entry is checked, so one pass names every bad entry by its path (route.proxy[1].url).
    const proxies: UpstreamProxy[] = [];
    const issues: ConfigIssue[] = [];
    for (const { path, entry } of proxyRouteEntries(route.proxy)) {
      const parsed = parseUpstream(entry.url, entry);
      if (parsed.ok) proxies.push(remember(parsed.value));
      else issues.push({ path: parsed.key === undefined ? path : `${path}.${parsed.key}`, message: parsed.message });
    }
    if (issues.length > 0) return { ok: false, issues };
    return { ok: true, value: { selector: proxySelector(proxies, health), upstreams, pac: null, health } };
  }
  if (route.mode === 'system') {
    const system = readSystemProxy(env, route.system?.caFile);
    if (!system.ok) return { ok: false, issues: system.issues.map((i) => ({ path: `route.system (${i.variable})`, message: i.message })) };
    const inspects = route.system?.inspectsTls ?? false;
    const mark = (p: UpstreamProxy | null): UpstreamProxy | null => (p === null ? null : remember({ ...p, inspectsTls: inspects }));
    return { ok: true, value: { selector: systemSelector({ ...system.value, http: mark(system.value.http), https: mark(system.value.https) }), upstreams, pac: null, health } };
  }
  if (route.mode === 'pac' && route.pac !== undefined) {
    const pacConfig = route.pac;
    const settings = {
      auth: pacConfig.auth,
      credentialsFile: pacConfig.credentialsFile,
      credentialProxies: pacConfig.credentialProxies,
      caFile: pacConfig.caFile,
      inspectsTls: pacConfig.inspectsTls,
    };
    // Fail at load time, not on the first hop, when a PAC proxy's credentials or CA cannot be read.
    const probe = parseUpstream('http://pac-probe.invalid:1', settings);
    if (!probe.ok) return { ok: false, issues: [{ path: 'route.pac', message: probe.message }] };
    const source = new PacSource({
      file: pacConfig.file,
      url: pacConfig.url,
      refreshMs: pacConfig.refreshMs,
      // The same enterprise CA that the PAC's HTTPS proxies chain to may serve the PAC URL itself.
      ca: probe.value.ca,
      limits: { timeoutMs: pacConfig.timeoutMs, memoryBytes: pacConfig.memoryBytes, stackBytes: 512 * 1024, maxWaitingPerPrincipal: limits.maxPacWaitingPerGrant },
      host: {
        lookupSync: ports.lookupSync,
        myIpAddress: () => pacConfig.myIpAddress,
        now: () => new Date(),
      },
      fetchText: ports.fetchText,
      onError: ports.onPacError,
      onLoad: ports.onPacLoad,
    });
    const selector = pacSelector(source, settings, ports.onPacCache, undefined, health);
    const trackingSelector: RouteSelector = {
      ...selector,
      select: async (dest, kind, scheme, principal) => {
        const chosen = await selector.select(dest, kind, scheme, principal);
        if (chosen.ok) for (const h of chosen.value.hops) if (h.kind === 'proxy') remember(h.proxy);
        return chosen;
      },
    };
    return { ok: true, value: { selector: trackingSelector, upstreams, pac: source, health } };
  }
  return { ok: true, value: { selector: directSelector(), upstreams, pac: null, health } };
}

