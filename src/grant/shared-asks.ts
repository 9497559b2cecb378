// The ports an AskRegistry (asks.ts) keeps its asks and answers through. In a fleet (ledger.store:
// redis) `SharedAsks` makes one ask per (grant, destination) for every instance: a hop held on
// instance A and one on B wait on the same ask, a supervisor answers it on any instance, and the first
// answer wins fleet-wide (ledger/redis-asks.ts implements it; app.ts wires it). `StandingAnswers` keeps
// an answer with scope `grant` for the grant's life: the ledger, as a new revision (ledger.ts).
import type { AskPending } from '../core/index.js';

export type AskDecision = 'allow' | 'deny';
export type AskScope = 'once' | 'grant';

/** How an ask ended, as every instance of the fleet learns it. */
export interface FleetAnswer {
  readonly decision: AskDecision | 'timeout' | 'revoked';
  readonly scope: AskScope | null;
  readonly answeredBy: 'admin' | 'timeout' | 'revoked';
}

export type AnswerResult = 'answered' | 'already_answered' | 'not_found';

/** What another instance told the fleet: an ask it raised, or how one ended. */
export type AskMessage =
  | { readonly kind: 'raised'; readonly from: string; readonly view: AskPending }
  | { readonly kind: 'answered'; readonly from: string; readonly view: AskPending; readonly answer: FleetAnswer };

export interface SharedAsks {
  /** This instance's name in the messages it sends (its own are not delivered back to it). */
  readonly instance: string;
  /**
   * Raises `view` fleet-wide, unless an ask for the same grant and destination is pending: then that
   * one's view is returned, and the caller waits on it instead.
   */
  raise(view: AskPending, timeoutMs: number): Promise<AskPending>;
  /** Ends an ask: the first answer wins fleet-wide (`view` is the ask it ended, for the standing answer). */
  answer(id: string, answer: FleetAnswer): Promise<{ readonly result: AnswerResult; readonly view: AskPending | null }>;
  /** How an ask ended, or null while it is pending (or was never raised). */
  outcome(id: string): Promise<FleetAnswer | null>;
  /** The fleet's pending asks. */
  list(): Promise<AskPending[]>;
  /** Messages from the other instances; resolves once listening. */
  subscribe(listener: (message: AskMessage) => void): Promise<void>;
}

export interface StandingAnswers {
  /** The answer kept for (grant, destination), or undefined: the grant asks again. */
  get(grantId: string, destination: string): AskDecision | undefined;
  /** Keeps an answer for the grant's life; false when the grant is unknown or no longer live. */
  keep(grantId: string, destination: string, decision: AskDecision): Promise<boolean>;
  /** Drops a grant's answers when it ends (the ledger drops them itself when it forgets a grant). */
  forget?(grantId: string): void;
}

/** Standing answers in this process only (tests, and an AskRegistry built without the ledger). */
export function memoryStandingAnswers(): StandingAnswers {
  const kept = new Map<string, Map<string, AskDecision>>();
  return {
    get: (grantId, destination) => kept.get(grantId)?.get(destination),
    keep: (grantId, destination, decision) => {
      let decisions = kept.get(grantId);
      if (decisions === undefined) kept.set(grantId, (decisions = new Map()));
      decisions.set(destination, decision);
      return Promise.resolve(true);
    },
    forget: (grantId) => kept.delete(grantId),
  };
}
