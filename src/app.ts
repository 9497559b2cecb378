// The composition root: builds every module from the frozen config and wires them through ports.
// The only file that knows every module; it touches no process globals (main.ts passes env and cwd).
import { ProxyError, type LookupAll, type LookupAnswer } from './core/index.js';
import type { Config, ConfigIssue } from './config/index.js';
import { canonicalizeHost } from './authority/index.js';
import { TokenStore } from './identity/index.js';
import { Resolver, SelfAddresses, createServersLookup, createSystemLookup } from './resolve/index.js';
import { createRouteSelector } from './route/index.js';
import { createPinnedConnector } from './egress/index.js';
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

function selfListeners(config: Config): string[] {
  const listens = config.listeners.map((l) => l.listen);
  if (config.admin.listen !== undefined) listens.push(config.admin.listen);
  if (config.admin.metrics !== undefined) listens.push(config.admin.metrics);
  return listens;
}

/** Builds the runtime without listening: used by `start`, `explain` and `check-config`. */
export function buildRuntime(config: Config, options: AppOptions): Built<{ runtime: ProxyRuntime; self: SelfAddresses }> {
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
  const runtime: ProxyRuntime = {
    grants: compiled.value.grants,
    tokens,
    resolver,
    routes: createRouteSelector(config.route.mode),
    now: Date.now,
    audit: options.audit ?? createPinoSink(config.audit.file),
    log: options.log ?? createOperationalLog(config.log.level),
    forwardAgent: createForwardAgent({
      connect: createPinnedConnector(dialOptions),
      headersTimeoutMs: config.timeouts.originResponseMs,
      bodyTimeoutMs: config.timeouts.idleMs,
    }),
    dial: dialOptions,
    relay: { idleTimeoutMs: config.timeouts.idleMs },
  };
  return { ok: true, value: { runtime, self } };
}

export async function startApp(config: Config, options: AppOptions): Promise<SluiceApp> {
  const built = buildRuntime(config, options);
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
      await runtime.forwardAgent.close();
      await runtime.audit.flush();
    },
  };
}
