// Ports: the function types through which policy modules reach I/O that app.ts wires in.
import type { ResolvedAddress } from './types.js';

/** Resolve a name to every address it has, within `signal`. Rejects with a ProxyError on failure. */
export type LookupAll = (host: string, signal: AbortSignal) => Promise<readonly LookupAnswer[]>;

export interface LookupAnswer extends ResolvedAddress {
  /** Seconds this answer may be cached; 0 means do not cache. */
  readonly ttlSeconds: number;
}

/** Milliseconds since an arbitrary origin, monotonic. */
export type Clock = () => number;

/** How a grant looks from the control plane: never a token or its hash. */
export interface GrantView {
  readonly id: string;
  readonly source: 'config' | 'runtime';
  readonly generation: string | null;
  readonly destinations: readonly string[];
  readonly unrestricted: boolean;
  readonly allowAddressClasses: readonly string[];
  readonly allowAddresses: readonly string[];
  readonly requireAttestedAddress: boolean;
  /** The grant asks about destinations its rules miss (null: it refuses them at once). */
  readonly ask: { readonly timeoutMs: number } | null;
  /** Asks answered for the grant's life (scope `grant`): each destination's standing allow or deny. */
  readonly answers: readonly { readonly destination: string; readonly decision: 'allow' | 'deny'; readonly at: string }[];
  /** The client certificate that identifies the grant on an `identify: certificate` listener, or null. */
  readonly clientCertificate: { readonly sha256: string } | { readonly uriSan: string } | null;
  readonly limits: Readonly<Record<string, number | string>>;
  readonly issuedAt: string;
  readonly expiresAt: string | null;
  readonly revokedAt: string | null;
  /** `unix:/path` or `host:port` of the grant's dedicated listener, if any. */
  readonly listen: string | null;
  readonly usage: { readonly activeConnections: number; readonly connections: number; readonly bytes: number };
}

export interface ControlIssue {
  readonly path: string;
  readonly message: string;
}

export type ControlResult<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly status: 400 | 404 | 409 | 500 | 503; readonly reason: string; readonly issues: readonly ControlIssue[] };

/**
 * The running proxy as the admin API sees it (STYLE: admin reaches the proxy only through this port).
 * `spec` is a validated run-time grant (config's GrantSpec): destinations, classes, limits, generation, listen.
 */
/** A pending ask as the admin API shows it. */
export interface AskPending {
  readonly ask: string;
  readonly grant: string;
  readonly generation: string | null;
  readonly destination: string;
  readonly raisedAt: string;
  readonly expiresAt: string;
  readonly waiting: number;
}

export interface ProxyControl {
  issueGrant(spec: unknown): Promise<ControlResult<{ readonly id: string; readonly token: string; readonly grant: GrantView }>>;
  listGrants(): readonly GrantView[];
  getGrant(id: string): GrantView | undefined;
  /** Revokes one grant: its live tunnels and keep-alive connections end at once; it never comes back. */
  revokeGrant(id: string): Promise<ControlResult<{ readonly grant: GrantView; readonly endedConnections: number }>>;
  /** Revokes a run-time grant and removes it from the ledger and listings (a run-owned grant whose run ended). */
  forgetGrant(id: string): Promise<ControlResult<{ readonly grant: GrantView; readonly endedConnections: number }>>;
  revokeGeneration(generation: string): Promise<ControlResult<{ readonly revoked: readonly string[]; readonly endedConnections: number }>>;
  /**
   * Gives a run-time grant a new token, shown this once; the previous one stops at once, or at
   * `previousTokenUntil` when `graceMs` > 0. Connections identified by a token that no longer verifies end.
   */
  rotateGrant(id: string, graceMs: number): Promise<ControlResult<{ readonly id: string; readonly token: string; readonly grant: GrantView; readonly previousTokenUntil: string | null; readonly endedConnections: number }>>;
  /** Asks pending now (grants with `ask`), the fleet's with a shared ledger store: GET /v1/asks. */
  listAsks(): Promise<readonly AskPending[]>;
  /**
   * Answers one ask: 200, 404 ask_not_found, 409 ask_answered, 400 ask_answer_invalid, 503 when the
   * fleet's store is away. `kept` (scope `grant` only): whether the ledger kept the answer for the grant's life.
   */
  answerAsk(id: string, body: unknown): Promise<ControlResult<{ readonly ask: string; readonly decision: string; readonly scope: string; readonly kept?: boolean }>>;
  /** Validates the config file again and applies it atomically, or keeps the running config. */
  reload(): Promise<ControlResult<ReloadOutcome>>;
  readiness(): { readonly ready: boolean; readonly detail: string };
  /** False while a fleet instance has not reached its shared ledger store within ledger.maxStaleMs (absent: always fresh). */
  ledgerFresh?(): boolean;
}

/** What a reload did: the sections that changed, those that need a restart to apply, and the listeners. */
export interface ReloadOutcome {
  readonly endedConnections: number;
  /** Top-level config sections whose value changed (`grants`, `listeners`, `route`, ...). */
  readonly changed: readonly string[];
  /** Of those, the ones this reload did not apply: they take effect after a restart. */
  readonly needsRestart: readonly string[];
  readonly listeners: {
    readonly added: readonly string[];
    readonly removed: readonly string[];
    readonly changed: readonly string[];
    /** TLS listeners kept running whose files were read again: new handshakes use them (issue 28). */
    readonly tlsReloaded?: readonly string[];
  };
}
