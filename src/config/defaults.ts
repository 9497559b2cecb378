// Every default value of the config file, in one table. Units are in the key names.

export const Defaults = {
  dns: { servers: 'system' as const, timeoutMs: 2000, cacheMaxEntries: 10_000, cacheMaxTtlMs: 60_000, systemTtlMs: 5_000 },
  timeouts: { dialMs: 5_000, headersMs: 10_000, idleMs: 300_000, originResponseMs: 60_000 },
  audit: { file: 'stdout' as const },
  log: { level: 'info' as const },
  state: './state',
  route: { mode: 'direct' as const },
  grant: { unrestricted: false, requireAttestedAddress: false },
} as const;
