// Negotiate (SPNEGO, RFC 4559) tokens for the corporate proxy, made with the service's own Kerberos
// credentials through MIT/Heimdal GSSAPI: the `kerberos` package (ADR 0019). The credentials are the
// process's: the ticket cache in KRB5CCNAME, or the client keytab in KRB5_CLIENT_KTNAME that GSSAPI
// uses to get a ticket itself. Nothing of them passes through Sluice's code but the opaque token, and the
// sandbox never sees either (principle A8 in docs/principles.md).
import { createRequire } from 'node:module';

/** One security context: the first token, then more legs while the proxy answers with tokens of its own. */
export interface NegotiateContext {
  /** The base64 token for `Proxy-Authorization: Negotiate …`; `challenge` is the proxy's token, '' on the first leg. */
  step(challenge: string): Promise<string>;
  readonly complete: boolean;
}

export interface Gss {
  /** Null when Negotiate can be used; otherwise why not (the binding is not installed or did not load). */
  readonly unavailable: string | null;
  /** A new context for `spn` (GSS host-based form `HTTP@proxy.corp.example`). Rejects with GSSAPI's message. */
  initiate(spn: string): Promise<NegotiateContext>;
}

// The part of the binding Sluice uses (the package's own index.d.ts says the same); declared here so the
// type check does not need the optional package.
interface KerberosBinding {
  readonly GSS_MECH_OID_SPNEGO: number;
  initializeClient(service: string, options: { mechOID: number }): Promise<{ step(challenge: string): Promise<string>; readonly contextComplete: boolean }>;
}

let loaded: Gss | null = null;

/** The process's GSSAPI, loaded once; a missing binding is a value, never a throw. */
export function systemGss(): Gss {
  if (loaded !== null) return loaded;
  let binding: KerberosBinding | null = null;
  let unavailable: string | null = null;
  try {
    binding = createRequire(import.meta.url)('kerberos') as KerberosBinding;
  } catch (error) {
    unavailable = `the GSSAPI binding (npm package kerberos) is not installed or did not load: ${(error as Error).message.split('\n')[0] ?? ''}`;
  }
  loaded = binding === null ? unavailableGss(unavailable ?? 'no GSSAPI binding') : bindingGss(binding);
  return loaded;
}

export function unavailableGss(reason: string): Gss {
  return { unavailable: reason, initiate: () => Promise.reject(new Error(reason)) };
}

/**
 * GSSAPI calls run on libuv's thread pool (4 threads by default), which DNS lookups and file I/O share:
 * at most this many at once, so a burst of tunnels through a Negotiate proxy (or a slow KDC) cannot
 * hold every thread and stall other principals' lookups. The rest wait in arrival order.
 */
export const MAX_CONCURRENT_GSS_CALLS = 2;

/** Runs at most `max` of the given calls at once, the others in arrival order. */
export function callLimiter(max: number): <T>(call: () => Promise<T>) => Promise<T> {
  let running = 0;
  const waiting: (() => void)[] = [];
  // A finished call hands its slot straight to the next waiter, so no newcomer can slip in between.
  const release = (): void => {
    const next = waiting.shift();
    if (next === undefined) running -= 1;
    else next();
  };
  return async <T>(call: () => Promise<T>): Promise<T> => {
    if (running >= max) await new Promise<void>((resolve) => waiting.push(resolve));
    else running += 1;
    try {
      return await call();
    } finally {
      release();
    }
  };
}

function bindingGss(binding: KerberosBinding, limit = callLimiter(MAX_CONCURRENT_GSS_CALLS)): Gss {
  return {
    unavailable: null,
    async initiate(spn) {
      const client = await limit(() => binding.initializeClient(spn, { mechOID: binding.GSS_MECH_OID_SPNEGO }));
      return {
        step: (challenge) => limit(() => client.step(challenge)),
        get complete() {
          return client.contextComplete;
        },
      };
    },
  };
}

/** GSSAPI's message, one line and bounded: it names principals and caches, never key material. */
export function gssMessage(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > 240 ? `${line.slice(0, 240)}…` : line;
}
