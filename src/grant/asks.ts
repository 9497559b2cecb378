// Asks (issue 27): a grant with `ask: {timeoutMs}` does not refuse a destination none of its rules names
// (when the grant's address classes allow it): the hop is held, before anything is dialed or answered,
// and a supervisor answers allow or deny, once or for the grant's life. One ask per (grant, canonical
// scheme://host:port): every concurrent hop to it waits on the same ask, so a hundred parallel CONNECTs
// raise one prompt. No answer within timeoutMs refuses (approval_timeout): a held hop fails closed. A
// revoked, forgotten or removed grant ends its asks at once (grant_revoked) and forgets its standing
// answers. Answers kept for a grant's life live in this instance's memory, never in the ledger.
import { randomBytes } from 'node:crypto';
import type { AskPending, ReasonCode } from '../core/index.js';
import type { EventRing } from '../telemetry/index.js';
import type { RuntimeGrant } from './grant-table.js';

export type AskDecision = 'allow' | 'deny';
export type AskScope = 'once' | 'grant';

export interface AskAnswer {
  readonly decision: AskDecision;
  readonly scope: AskScope;
}

/** What a held hop learns: go on (and under which ask), or the reason it is refused. */
export type AskOutcome = { readonly allowed: true; readonly ask: string; readonly scope: AskScope } | { readonly allowed: false; readonly ask: string; readonly reason: ReasonCode };

/** A pending ask as the admin API shows it (GET /v1/asks). */
export type AskView = AskPending;

export type AnswerResult = 'answered' | 'already_answered' | 'not_found';

interface PendingAsk {
  readonly id: string;
  readonly key: string;
  readonly grant: string;
  readonly generation: string | null;
  readonly destination: string;
  readonly raisedAtMs: number;
  readonly expiresAtMs: number;
  readonly timer: NodeJS.Timeout;
  readonly settle: (outcome: AskOutcome) => void;
  readonly outcome: Promise<AskOutcome>;
  waiting: number;
}

export interface AskRegistryDeps {
  readonly events: EventRing;
  readonly now: () => number;
}

/** How many answered ask ids are remembered, so a late second answer gets 409, not 404. */
const ANSWERED_KEPT = 4096;
/** Pending asks at once, all grants together: beyond it a miss is refused at once (approval_timeout). */
export const MAX_PENDING_ASKS = 1024;
/**
 * Pending asks of one grant: a sandbox that probes many destinations fills its own share, never the
 * table every other grant's asks need (one principal must not starve another's supervisor).
 */
export const MAX_PENDING_ASKS_PER_GRANT = 64;

export class AskRegistry {
  private readonly pending = new Map<string, PendingAsk>();
  private readonly byId = new Map<string, PendingAsk>();
  private readonly answered = new Set<string>();
  private readonly perGrant = new Map<string, number>();
  /** Answers for a grant's life: grant id → destination → decision. */
  private readonly standing = new Map<string, Map<string, AskDecision>>();

  constructor(private readonly deps: AskRegistryDeps) {}

  /** A standing answer for (grant, destination), given earlier with scope `grant`; undefined: none. */
  standingAnswer(grantId: string, destination: string): AskDecision | undefined {
    return this.standing.get(grantId)?.get(destination);
  }

  /** Holds a hop on the ask for (grant, destination), raising it if none is pending. */
  raise(grant: RuntimeGrant, destination: string): Promise<AskOutcome> {
    const key = `${grant.id} ${destination}`;
    const open = this.pending.get(key);
    if (open !== undefined) {
      open.waiting += 1;
      return open.outcome;
    }
    const timeoutMs = grant.askTimeoutMs ?? 0;
    const id = `ask-${randomBytes(8).toString('hex')}`;
    const ofGrant = this.perGrant.get(grant.id) ?? 0;
    if (timeoutMs <= 0 || this.pending.size >= MAX_PENDING_ASKS || ofGrant >= MAX_PENDING_ASKS_PER_GRANT) return Promise.resolve({ allowed: false, ask: id, reason: 'approval_timeout' });
    const raisedAtMs = this.deps.now();
    let settle!: (outcome: AskOutcome) => void;
    const outcome = new Promise<AskOutcome>((resolve) => (settle = resolve));
    const timer = setTimeout(() => this.finish(entry, { allowed: false, ask: id, reason: 'approval_timeout' }, null, 'timeout'), timeoutMs);
    timer.unref();
    const entry: PendingAsk = { id, key, grant: grant.id, generation: grant.generation, destination, raisedAtMs, expiresAtMs: raisedAtMs + timeoutMs, timer, settle, outcome, waiting: 1 };
    this.pending.set(key, entry);
    this.byId.set(id, entry);
    this.perGrant.set(grant.id, ofGrant + 1);
    this.deps.events.publish('ask', { grant: grant.id, generation: grant.generation }, { ts: new Date(raisedAtMs).toISOString(), ...this.viewOf(entry) });
    return outcome;
  }

  /** The supervisor's answer: the first one wins. */
  answer(id: string, answer: AskAnswer): AnswerResult {
    const entry = this.byId.get(id);
    if (entry === undefined) return this.answered.has(id) ? 'already_answered' : 'not_found';
    if (answer.scope === 'grant') {
      let decisions = this.standing.get(entry.grant);
      if (decisions === undefined) this.standing.set(entry.grant, (decisions = new Map()));
      decisions.set(entry.destination, answer.decision);
    }
    const outcome: AskOutcome = answer.decision === 'allow' ? { allowed: true, ask: id, scope: answer.scope } : { allowed: false, ask: id, reason: 'approval_denied' };
    this.finish(entry, outcome, answer, 'admin');
    return 'answered';
  }

  /** The grant was revoked, forgotten or dropped: its held hops are refused now, its standing answers forgotten. */
  endGrant(grantId: string): void {
    this.standing.delete(grantId);
    for (const entry of [...this.pending.values()]) {
      if (entry.grant === grantId) this.finish(entry, { allowed: false, ask: entry.id, reason: 'grant_revoked' }, null, 'revoked');
    }
  }

  list(): AskView[] {
    return [...this.pending.values()].map((entry) => this.viewOf(entry));
  }

  /** Ends every pending ask (shutdown): held hops are refused, never left hanging. */
  close(): void {
    for (const entry of [...this.pending.values()]) this.finish(entry, { allowed: false, ask: entry.id, reason: 'approval_timeout' }, null, 'timeout');
  }

  private finish(entry: PendingAsk, outcome: AskOutcome, answer: AskAnswer | null, answeredBy: 'admin' | 'timeout' | 'revoked'): void {
    if (this.byId.get(entry.id) !== entry) return;
    clearTimeout(entry.timer);
    this.pending.delete(entry.key);
    this.byId.delete(entry.id);
    const left = (this.perGrant.get(entry.grant) ?? 1) - 1;
    if (left > 0) this.perGrant.set(entry.grant, left);
    else this.perGrant.delete(entry.grant);
    this.answered.add(entry.id);
    if (this.answered.size > ANSWERED_KEPT) this.answered.delete(this.answered.values().next().value as string);
    const decision = answer?.decision ?? (answeredBy === 'timeout' ? 'timeout' : 'deny');
    this.deps.events.publish('ask_answered', { grant: entry.grant, generation: entry.generation }, {
      ts: new Date(this.deps.now()).toISOString(),
      ask: entry.id,
      grant: entry.grant,
      generation: entry.generation,
      destination: entry.destination,
      decision,
      scope: answer?.scope ?? null,
      answeredBy,
      waiting: entry.waiting,
    });
    entry.settle(outcome);
  }

  private viewOf(entry: PendingAsk): AskView {
    return {
      ask: entry.id,
      grant: entry.grant,
      generation: entry.generation,
      destination: entry.destination,
      raisedAt: new Date(entry.raisedAtMs).toISOString(),
      expiresAt: new Date(entry.expiresAtMs).toISOString(),
      waiting: entry.waiting,
    };
  }
}
