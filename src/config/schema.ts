// The on-disk config format as a zod schema; the section types every module receives come from here.
import { z } from 'zod';
import { GRANTABLE_CLASSES } from '../core/index.js';
import net from 'node:net';
import { Defaults } from './defaults.js';
import { isLoopbackTcpListen, isUnixListen, listenAddressProblem, NON_LOOPBACK_DEDICATED_MESSAGE } from './listen-address.js';

// One check for every listen address (listeners, admin, metrics, dedicated): what listen() would refuse.
const listenAddress = z
  .string()
  .min(1)
  .superRefine((v, ctx) => {
    const problem = listenAddressProblem(v);
    if (problem !== null) ctx.addIssue({ code: 'custom', message: problem });
  });

function isDnsServer(value: string): boolean {
  if (net.isIP(value) !== 0) return true;
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([0-9.]+)):(\d{1,5})$/.exec(value);
  if (match === null) return false;
  const port = Number(match[3]);
  return net.isIP(match[1] ?? match[2] ?? '') !== 0 && port >= 1 && port <= 65535;
}

const positiveMs = z.number().int().positive().max(86_400_000);

/** `a.b.c.d/n` or `v6/n` (or one address): a peer allowed to send a PROXY protocol header. */
function isCidr(value: string): boolean {
  const [address = '', prefix, extra] = value.split('/');
  if (extra !== undefined || net.isIP(address) === 0) return false;
  if (prefix === undefined) return true;
  return /^(0|[1-9][0-9]{0,2})$/.test(prefix) && Number(prefix) <= (net.isIPv6(address) ? 128 : 32);
}

/** listeners[].tls: PEM files, read at start and at every reload (a rotation needs no restart). */
export const listenerTlsSchema = z
  .strictObject({
    certFile: z.string().min(1),
    keyFile: z.string().min(1),
    /** Client certificates must chain to this CA: with it, a client without a certificate fails the handshake. */
    clientCaFile: z.string().min(1).optional(),
    /** Certificates this CRL revokes fail the handshake (needs clientCaFile). */
    crlFile: z.string().min(1).optional(),
    minVersion: z.enum(['TLSv1.2', 'TLSv1.3']).default('TLSv1.2'),
  })
  .refine((t) => t.crlFile === undefined || t.clientCaFile !== undefined, { message: 'tls.crlFile needs tls.clientCaFile', path: ['crlFile'] });

export const listenerSchema = z
  .strictObject({
    name: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'letters, digits, _ . - (1-64)'),
    listen: listenAddress,
    /** `token` (Proxy-Authorization) or `certificate` (a client certificate mapped to a grant; needs tls.clientCaFile). */
    identify: z.enum(['token', 'certificate']).optional(),
    grant: z.string().min(1).optional(),
    /** TLS on this TCP listener (issue 28): after a PROXY protocol header, before anything else. */
    tls: listenerTlsSchema.optional(),
    maxConnections: z.number().int().positive().optional(),
    /** `http` (CONNECT and absolute-form) or `socks5` (RFC 1928 CONNECT, RFC 1929 credentials). */
    protocol: z.enum(['http', 'socks5']).default('http'),
    /** A `unix:` listener's socket becomes 0660 and owned by this group (name or gid); otherwise 0600. */
    socketGroup: z
      .union([z.string().regex(/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}$/, 'expected a group name or a numeric gid'), z.number().int().min(0).max(4_294_967_294)])
      .optional(),
    /** Every connection starts with a PROXY protocol header (v1 or v2) from one of these peers: a load balancer. */
    proxyProtocol: z
      .strictObject({ trustedSources: z.array(z.string().refine(isCidr, { message: 'expected a CIDR such as 10.0.0.0/8 or fd00::/8' })).min(1) })
      .optional(),
  })
  .refine((l) => !(l.identify && l.grant), { message: 'a listener is either identify: token or bound to one grant, not both' })
  .superRefine((l, ctx) => {
    if (l.tls !== undefined && l.listen.startsWith('unix:')) ctx.addIssue({ code: 'custom', path: ['tls'], message: 'TLS is for TCP listeners: a unix: socket is already confined by its file mode' });
    if (l.identify === 'certificate' && l.tls?.clientCaFile === undefined) {
      ctx.addIssue({ code: 'custom', path: ['identify'], message: 'identify: certificate needs tls.clientCaFile (the CA that client certificates must chain to)' });
    }
  });

/** The longest a hop may be held on an ask: a held connection is a resource the sandbox spends. */
export const MAX_ASK_TIMEOUT_MS = 600_000;

const limitsSchema = z.strictObject({
  maxConcurrent: z.number().int().positive().optional(),
  maxBytes: z.number().int().positive().optional(),
  maxConnections: z.number().int().positive().optional(),
  idleTimeoutMs: positiveMs.optional(),
  maxDurationMs: positiveMs.optional(),
  expiresAt: z.union([z.iso.datetime({ offset: true }), z.date()]).optional(),
});

const grantFields = {
  destinations: z.array(z.string().min(1)).default([]),
  unrestricted: z.boolean().default(Defaults.grant.unrestricted),
  // unspecified, multicast and self can never be granted: listing them is an error, not a silent no-op.
  allowAddressClasses: z.array(z.enum(GRANTABLE_CLASSES as [string, ...string[]])).default([]),
  allowAddresses: z.array(z.string().min(1)).default([]),
  requireAttestedAddress: z.boolean().default(Defaults.grant.requireAttestedAddress),
  tls: z.strictObject({ requireSniMatch: z.boolean().default(false) }).prefault({}),
  generation: z.string().regex(/^[A-Za-z0-9_.:-]{1,128}$/, 'letters, digits, _ . : - (1-128)').optional(),
  limits: limitsSchema.prefault({}),
  /**
   * A destination no rule names is held and asked about (GET/POST /v1/asks) for up to timeoutMs, then
   * refused approval_timeout. Absent: refused at once (destination_not_granted), as before.
   */
  ask: z.strictObject({ timeoutMs: z.number().int().min(100).max(MAX_ASK_TIMEOUT_MS) }).optional(),
  /**
   * The client certificate that identifies this grant on a listener with `identify: certificate` (issue 28):
   * the SHA-256 of the certificate (DER, hex; colons allowed), or a URI SAN it carries (SPIFFE style). Never the CN.
   */
  clientCertificate: z
    .union([
      z.strictObject({ sha256: z.string().regex(/^(?:[0-9a-fA-F]{2}:?){31}[0-9a-fA-F]{2}$/, 'expected the SHA-256 of the certificate: 64 hex digits, colons allowed').transform((v) => v.replaceAll(':', '').toLowerCase()) }),
      z.strictObject({ uriSan: z.string().min(1).max(2048).regex(/^[A-Za-z][A-Za-z0-9+.-]*:[^\s]+$/, 'expected a URI such as spiffe://example.org/agent') }),
    ])
    .optional(),
};

/** A grant issued at run time (POST /v1/grants): the same fields as config, never an id or a token. */
export const grantSpecSchema = z.strictObject({
  ...grantFields,
  // Every connection on a dedicated listener acts for the grant without a token (finding 12).
  listen: listenAddress.refine((v) => isUnixListen(v) || isLoopbackTcpListen(v), { message: NON_LOOPBACK_DEDICATED_MESSAGE }).optional(),
});
export type GrantSpec = z.infer<typeof grantSpecSchema>;

export const grantSchema = z
  .strictObject({
    id: z.string().regex(/^[A-Za-z0-9_.-]{1,128}$/, 'letters, digits, _ . - (1-128), no colon'),
    tokenSha256: z.string().regex(/^[0-9a-f]{64}$/i, 'expected 64 hex digits (SHA-256 of the token)').optional(),
    tokenEnv: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'expected an environment variable name').optional(),
    ...grantFields,
  })
  .refine((g) => !(g.tokenSha256 && g.tokenEnv), { message: 'give tokenSha256 or tokenEnv, not both' });

// How Sluice authenticates to a corporate proxy (docs/routes.md#proxy-authentication). Absent: Basic
// when credentialsFile is given, otherwise none.
const proxyAuth = z.enum(['basic', 'negotiate', 'ntlm', 'auto']).optional();
// A GSS host-based service name (RFC 2743 §4.1): service@host, e.g. HTTP@proxy.corp.example.
const proxySpn = z.string().regex(/^[A-Za-z0-9_.-]+@[A-Za-z0-9_.-]+$/, 'expected service@host, e.g. HTTP@proxy.corp.example').optional();

const proxyEntrySchema = z.strictObject({
  url: z.string().min(1),
  auth: proxyAuth,
  spn: proxySpn,
  credentialsFile: z.string().min(1).optional(),
  caFile: z.string().min(1).optional(),
  inspectsTls: z.boolean().default(false),
  sendResolvedAddress: z.boolean().default(false),
});

/** The most upstream proxies one route lists: failover order is for an operator to read, not a pool. */
export const MAX_ROUTE_PROXIES = 16;

// One upstream proxy (an object), or several (a list) tried in order with back-off (docs/routes.md#failover).
const proxyRouteSchema = z.union([
  proxyEntrySchema,
  z.array(proxyEntrySchema).min(1, 'list at least one proxy').max(MAX_ROUTE_PROXIES, `at most ${MAX_ROUTE_PROXIES} proxies`),
]);

export type ProxyRouteEntry = z.infer<typeof proxyEntrySchema>;

/** route.proxy in either form as its entries, in order, each with its config path (`route.proxy`, `route.proxy[1]`). */
export function proxyRouteEntries(proxy: ProxyRouteEntry | readonly ProxyRouteEntry[]): readonly { readonly path: string; readonly entry: ProxyRouteEntry }[] {
  if (!Array.isArray(proxy)) return [{ path: 'route.proxy', entry: proxy as ProxyRouteEntry }];
  return proxy.map((entry, i) => ({ path: `route.proxy[${i}]`, entry }));
}

/**
 * One entry of route.pac.credentialProxies, `host:port` or `[IPv6]:port`, in the form a PAC answer's proxy
 * is compared in (route/select-route.ts): the host through the WHATWG URL host parser, as parseUpstream
 * reads the proxy (lower case, IPv6 compressed, IPv4 normalized, IDN as A-labels), the port explicit.
 * Null when it is not one.
 */
export function canonicalProxyHostPort(text: string): string | null {
  const match = /^(\[[0-9A-Fa-f:.]+\]|[^\s:/?#@[\]\\%]+):(\d{1,5})$/.exec(text);
  if (match === null) return null;
  const port = Number(match[2]);
  if (port < 1 || port > 65535) return null;
  let host: string;
  try {
    host = new URL(`http://${match[1] ?? ''}/`).hostname;
  } catch {
    return null;
  }
  // A PAC answer never names a host with a trailing dot, so such an entry could never match.
  if (host === '' || host.endsWith('.')) return null;
  return `${host}:${port}`;
}

const credentialProxy = z.string().transform((value, ctx) => {
  const canonical = canonicalProxyHostPort(value.trim());
  if (canonical !== null) return canonical;
  ctx.addIssue({ code: 'custom', message: `${JSON.stringify(value)}: expected host:port or [IPv6]:port` });
  return z.NEVER;
});

/** Whether route.pac gives Sluice something to authenticate with: Basic or NTLM credentials, or Negotiate (auth negotiate or auto). */
export function pacSendsCredentials(pac: { readonly auth?: string | undefined; readonly credentialsFile?: string | undefined }): boolean {
  return pac.credentialsFile !== undefined || pac.auth !== undefined;
}

export const PAC_CREDENTIAL_PROXIES_REQUIRED =
  'required when route.pac.credentialsFile or route.pac.auth is set: the proxies your PAC may send credentials to';
export const PAC_HTTP_URL_WITH_CREDENTIALS =
  'an http:// PAC URL can be altered on the path, and the proxies it names would receive the credentials: use https:// or a file';

const pacRouteSchema = z
  .strictObject({
    file: z.string().min(1).optional(),
    url: z.string().regex(/^https?:\/\/\S+$/i, 'expected an http:// or https:// URL').optional(),
    refreshMs: positiveMs.optional(),
    timeoutMs: positiveMs.default(Defaults.pac.timeoutMs),
    memoryBytes: z.number().int().min(1_048_576).max(1_073_741_824).default(Defaults.pac.memoryBytes),
    auth: proxyAuth,
    credentialsFile: z.string().min(1).optional(),
    /**
     * The only proxies a PAC answer may send Sluice's credentials (Basic, NTLM, Negotiate) to: whoever can
     * alter the PAC could otherwise name a proxy of their own and collect them (review 2026-12-04 finding 10).
     */
    credentialProxies: z.array(credentialProxy).min(1, 'list at least one proxy host:port').optional(),
    caFile: z.string().min(1).optional(),
    inspectsTls: z.boolean().default(false),
    myIpAddress: z.string().min(1).default(Defaults.pac.myIpAddress),
  })
  .refine((p) => (p.file === undefined) !== (p.url === undefined), { message: 'give exactly one of file or url' })
  .superRefine((p, ctx) => {
    if (!pacSendsCredentials(p)) return;
    if (p.credentialProxies === undefined) ctx.addIssue({ code: 'custom', path: ['credentialProxies'], message: PAC_CREDENTIAL_PROXIES_REQUIRED });
    if (p.url !== undefined && /^http:/i.test(p.url)) ctx.addIssue({ code: 'custom', path: ['url'], message: PAC_HTTP_URL_WITH_CREDENTIALS });
  });

const systemRouteSchema = z.strictObject({
  caFile: z.string().min(1).optional(),
  inspectsTls: z.boolean().default(false),
});

/**
 * One Sentinel of ledger.redis.sentinels: `host:port` or `[IPv6]:port`, the port explicit (a Sentinel
 * usually listens on 26379, not Redis' 6379, and guessing it wrong would only fail at start).
 */
export function parseSentinelAddress(text: string): { readonly host: string; readonly port: number } | null {
  const match = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9_.-]+)):(\d{1,5})$/.exec(text);
  if (match === null) return null;
  const port = Number(match[3]);
  const host = match[1] ?? match[2] ?? '';
  if (port < 1 || port > 65535 || (match[1] !== undefined && !net.isIPv6(host))) return null;
  return { host, port };
}

const envName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'expected an environment variable name');

export const configSchema = z.strictObject({
  listeners: z.array(listenerSchema).min(1, 'at least one listener is required'),
  admin: z
    .strictObject({
      listen: listenAddress.optional(),
      metrics: listenAddress.optional(),
      /** SHA-256 of the admin bearer token, or the variable holding it: required on TCP; once set, required on a Unix socket too. */
      tokenSha256: z.string().regex(/^[0-9a-f]{64}$/i, 'expected 64 hex digits (SHA-256 of the token)').optional(),
      tokenEnv: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'expected an environment variable name').optional(),
      drainTimeoutMs: positiveMs.default(Defaults.admin.drainTimeoutMs),
    })
    .prefault({}),
  state: z.string().min(1).default(Defaults.state),
  /** Where grants and revocations live: the state directory (one instance) or Redis (a fleet; docs/fleet.md). */
  ledger: z
    .strictObject({
      store: z.enum(['file', 'redis']).default(Defaults.ledger.store),
      redis: z
        .strictObject({
          url: z.string().regex(/^rediss?:\/\//, 'expected a redis:// or rediss:// URL').optional(),
          urlEnv: envName.optional(),
          /** A Sentinel group instead of one server: the store follows its primary across a failover (docs/fleet.md). */
          sentinels: z
            .array(z.string().refine((v) => parseSentinelAddress(v) !== null, { message: 'expected host:port or [IPv6]:port' }))
            .min(1, 'list at least one sentinel host:port')
            .max(16)
            .optional(),
          name: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'the master group name: letters, digits, _ . - (1-64)').optional(),
          // With sentinels the secrets come from the environment, never the file (the URL form has urlEnv).
          username: z.string().min(1).max(128).optional(),
          passwordEnv: envName.optional(),
          sentinelUsername: z.string().min(1).max(128).optional(),
          sentinelPasswordEnv: envName.optional(),
          tls: z.union([z.boolean(), z.strictObject({ caFile: z.string().min(1).optional() })]).optional(),
          keyPrefix: z.string().max(64).default(Defaults.ledger.keyPrefix),
          leaseTtlMs: z.number().int().min(1000).max(600_000).default(Defaults.ledger.leaseTtlMs),
        })
        .optional(),
      maxStaleMs: z.number().int().min(50).max(600_000).default(Defaults.ledger.maxStaleMs),
    })
    .prefault({}),
  dns: z
    .strictObject({
      servers: z
        .union([z.literal('system'), z.array(z.string().refine(isDnsServer, { message: 'expected an IP address, IP:port or [IPv6]:port' })).min(1)])
        .default(Defaults.dns.servers),
      timeoutMs: positiveMs.default(Defaults.dns.timeoutMs),
      hosts: z.record(z.string().min(1), z.array(z.string().min(1)).min(1)).default({}),
      cacheMaxEntries: z.number().int().min(0).max(10_000_000).default(Defaults.dns.cacheMaxEntries),
      cacheMaxTtlMs: z.number().int().min(0).max(86_400_000).default(Defaults.dns.cacheMaxTtlMs),
      systemTtlMs: z.number().int().min(0).max(86_400_000).default(Defaults.dns.systemTtlMs),
    })
    .prefault({}),
  route: z
    .strictObject({
      mode: z.enum(['direct', 'proxy', 'pac', 'system']).default(Defaults.route.mode),
      proxy: proxyRouteSchema.optional(),
      pac: pacRouteSchema.optional(),
      system: systemRouteSchema.optional(),
    })
    .prefault({}),
  timeouts: z
    .strictObject({
      dialMs: positiveMs.default(Defaults.timeouts.dialMs),
      headersMs: positiveMs.default(Defaults.timeouts.headersMs),
      idleMs: positiveMs.default(Defaults.timeouts.idleMs),
      originResponseMs: positiveMs.default(Defaults.timeouts.originResponseMs),
      upstreamMs: positiveMs.default(Defaults.timeouts.upstreamMs),
    })
    .prefault({}),
  limits: z
    .strictObject({
      maxConnections: z.number().int().positive().default(Defaults.limits.maxConnections),
      maxHeaderBytes: z.number().int().min(1024).max(1_048_576).default(Defaults.limits.maxHeaderBytes),
      maxHeaderCount: z.number().int().min(8).max(10_000).default(Defaults.limits.maxHeaderCount),
      /** Per presented grant id (per source for a token without one): one principal's guesses never lock out another's. */
      authFailuresPerMinute: z.number().int().positive().default(Defaults.limits.authFailuresPerMinute),
      authFailuresPerMinutePerSource: z.number().int().positive().default(Defaults.limits.authFailuresPerMinutePerSource),
      maxConcurrentLookups: z.number().int().positive().default(Defaults.limits.maxConcurrentLookups),
      /** Each grant's share of the lookups above (review 2026-12 finding 7): its own 429s, never another grant's. */
      maxConcurrentLookupsPerGrant: z.number().int().positive().default(Defaults.limits.maxConcurrentLookupsPerGrant),
      /** Each grant's share of the PAC queue (finding 15). */
      maxPacWaitingPerGrant: z.number().int().positive().max(256).default(Defaults.limits.maxPacWaitingPerGrant),
    })
    .prefault({}),
  audit: z.strictObject({ file: z.string().min(1).default(Defaults.audit.file) }).prefault({}),
  log: z
    .strictObject({ level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default(Defaults.log.level) })
    .prefault({}),
  grants: z.array(grantSchema).default([]),
});

export type ConfigFile = z.infer<typeof configSchema>;
export type ListenerSection = ConfigFile['listeners'][number];
export type GrantSection = ConfigFile['grants'][number];
export type GrantLimits = GrantSection['limits'];
export type DnsSection = ConfigFile['dns'];
export type RouteSection = ConfigFile['route'];
export type TimeoutsSection = ConfigFile['timeouts'];
export type AuditSection = ConfigFile['audit'];
export type AdminSection = ConfigFile['admin'];
