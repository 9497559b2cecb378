// Every default value of the config file, in one table. Units are in the key names.

export const Defaults = {
  dns: { servers: 'system' as const, timeoutMs: 2000, cacheMaxEntries: 10_000, cacheMaxTtlMs: 60_000, systemTtlMs: 5_000 },
  timeouts: { dialMs: 5_000, headersMs: 10_000, idleMs: 300_000, originResponseMs: 60_000, upstreamMs: 10_000 },
  pac: { timeoutMs: 500, memoryBytes: 32 * 1024 * 1024, myIpAddress: '127.0.0.1' },
  audit: { file: 'stdout' as const },
  log: { level: 'info' as const },
  state: './state',
  ledger: { store: 'file' as const, keyPrefix: 'sluice:', maxStaleMs: 1000, leaseTtlMs: 10_000 },
  limits: {
    maxConnections: 20_000,
    maxHeaderBytes: 16_384,
    maxHeaderCount: 100,
    authFailuresPerMinute: 30,
    authFailuresPerMinutePerSource: 300,
    maxConcurrentLookups: 512,
    maxConcurrentLookupsPerGrant: 64,
    maxPacWaitingPerGrant: 32,
  },
  admin: { drainTimeoutMs: 10_000 },
  route: { mode: 'direct' as const },
  grant: { unrestricted: false, requireAttestedAddress: false },
} as const;
