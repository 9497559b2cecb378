// Where the shared ledger store is: one Redis server (ledger.redis.url or urlEnv), or the primary of a
// Sentinel group (ledger.redis.sentinels and name), read from the config and the environment. Both
// `check-config` and `start` resolve it (app.ts), so a variable that is not set or a CA file that cannot
// be read is named by both. The label names the store in logs and errors and never holds a password.
import { readFileSync } from 'node:fs';
import type { RedisOptions } from 'ioredis';
import { parseSentinelAddress, type ConfigFile, type ConfigIssue } from '../config/index.js';

type RedisSection = NonNullable<ConfigFile['ledger']['redis']>;

export type RedisTarget =
  | { readonly kind: 'url'; readonly url: string }
  | {
      readonly kind: 'sentinel';
      readonly name: string;
      readonly sentinels: readonly { readonly host: string; readonly port: number }[];
      readonly username: string | undefined;
      readonly password: string | undefined;
      readonly sentinelUsername: string | undefined;
      readonly sentinelPassword: string | undefined;
      /** null: plain TCP; otherwise TLS to the sentinels and to the servers they name, with an extra CA. */
      readonly tls: { readonly ca: string | undefined } | null;
    };

/** The part of ioredis' options a target sets (Pick: ioredis' whole RedisOptions type does not fit exactOptionalPropertyTypes). */
export type TargetOptions = Pick<
  RedisOptions,
  'sentinels' | 'name' | 'role' | 'username' | 'password' | 'sentinelUsername' | 'sentinelPassword' | 'tls' | 'sentinelTLS' | 'enableTLSForSentinelMode' | 'sentinelCommandTimeout' | 'failoverDetector'
>;

export type Resolved<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly issues: readonly ConfigIssue[] };

/**
 * The URL as `redis://host:port/db` for logs and errors: no user name, no password, no query (ioredis
 * reads options, a password among them, from the query too), the default port and database made explicit.
 */
export function redactRedisUrl(url: string): string {
  try {
    const u = new URL(url);
    const db = u.searchParams.get('db') ?? (u.pathname.replace(/^\//, '') || '0');
    return `${u.protocol}//${u.hostname}:${u.port || '6379'}/${db}`;
  } catch {
    return 'redis://(unparsable URL)';
  }
}

/** The store as logs name it: the redacted URL, or the group and its sentinels (no credentials either way). */
export function redisTargetLabel(target: RedisTarget): string {
  if (target.kind === 'url') return redactRedisUrl(target.url);
  const hosts = target.sentinels.map((s) => (s.host.includes(':') ? `[${s.host}]:${s.port}` : `${s.host}:${s.port}`));
  return `sentinel group ${target.name} via ${hosts.join(',')}${target.tls === null ? '' : ' (TLS)'}`;
}

function secret(env: Readonly<Record<string, string | undefined>>, key: string, name: string | undefined, issues: ConfigIssue[]): string | undefined {
  if (name === undefined) return undefined;
  const value = env[name];
  if (value === undefined || value === '') issues.push({ path: `ledger.redis.${key}`, message: `environment variable ${name} is not set` });
  return value;
}

function readCa(file: string, issues: ConfigIssue[]): string | undefined {
  try {
    const pem = readFileSync(file, 'utf8');
    if (pem.includes('-----BEGIN CERTIFICATE-----')) return pem;
    issues.push({ path: 'ledger.redis.tls.caFile', message: `${file} holds no PEM certificate` });
  } catch (error) {
    issues.push({ path: 'ledger.redis.tls.caFile', message: `cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? 'error'})` });
  }
  return undefined;
}

/** The target of a section that passed the config's cross-check (config/load.ts: one form, name with sentinels). */
export function resolveRedisTarget(redis: RedisSection, env: Readonly<Record<string, string | undefined>>): Resolved<RedisTarget> {
  const issues: ConfigIssue[] = [];
  if (redis.sentinels === undefined) {
    if (redis.url === undefined && redis.urlEnv === undefined) issues.push({ path: 'ledger.redis', message: 'give exactly one of url, urlEnv and sentinels (with name)' });
    const url = redis.url ?? secret(env, 'urlEnv', redis.urlEnv, issues);
    return url === undefined || issues.length > 0 ? { ok: false, issues } : { ok: true, value: { kind: 'url', url } };
  }
  const password = secret(env, 'passwordEnv', redis.passwordEnv, issues);
  const sentinelPassword = secret(env, 'sentinelPasswordEnv', redis.sentinelPasswordEnv, issues);
  const tls = redis.tls === undefined || redis.tls === false ? null : { ca: redis.tls === true || redis.tls.caFile === undefined ? undefined : readCa(redis.tls.caFile, issues) };
  if (issues.length > 0) return { ok: false, issues };
  const sentinels = redis.sentinels.flatMap((s) => parseSentinelAddress(s) ?? []);
  return {
    ok: true,
    value: { kind: 'sentinel', name: redis.name ?? '', sentinels, username: redis.username, password, sentinelUsername: redis.sentinelUsername, sentinelPassword, tls },
  };
}

/**
 * The ioredis options that reach the target. With sentinels, ioredis asks them for the group's primary
 * on every (re)connect and checks the server's role (INFO) before using it, so a reconnect after a
 * failover lands on the new primary; `duplicate()` copies these options, so the subscriber follows too.
 */
export function redisTargetOptions(target: RedisTarget, sentinelCommandTimeoutMs: number): { url: string | null; options: TargetOptions } {
  if (target.kind === 'url') return { url: target.url, options: {} };
  const tls = target.tls === null ? undefined : target.tls.ca === undefined ? {} : { ca: target.tls.ca };
  return {
    url: null,
    options: {
      sentinels: target.sentinels.map((s) => ({ host: s.host, port: s.port })),
      name: target.name,
      role: 'master',
      ...(target.username === undefined ? {} : { username: target.username }),
      ...(target.password === undefined ? {} : { password: target.password }),
      ...(target.sentinelUsername === undefined ? {} : { sentinelUsername: target.sentinelUsername }),
      ...(target.sentinelPassword === undefined ? {} : { sentinelPassword: target.sentinelPassword }),
      // TLS to the sentinels (sentinelTLS) and to the servers they name (tls, only with enableTLSForSentinelMode).
      ...(tls === undefined ? {} : { tls, sentinelTLS: tls, enableTLSForSentinelMode: true }),
      sentinelCommandTimeout: sentinelCommandTimeoutMs,
      // Subscribed to the sentinels' +switch-master: a planned failover (SENTINEL FAILOVER) leaves the old
      // primary up and writable until Sentinel demotes it, 10 s later as measured, and every write it takes
      // meanwhile is lost. With this, every connection leaves it as soon as the switch is announced.
      failoverDetector: true,
    },
  };
}
