// Asks (issue 27): a grant with `ask: {timeoutMs}` does not refuse a destination none of its rules names
// (when the grant's address classes allow it): the hop is held, before anything is dialed or answered,
// and a supervisor answers allow or deny, once or for the grant's life. One ask per (grant, canonical
// scheme://host:port): every concurrent hop to it waits on the same ask, so a hundred parallel CONNECTs
// raise one prompt; in a fleet the ask is one for every instance (SharedAsks) and the first answer, on
// any instance, wins. No answer within timeoutMs refuses (approval_timeout): a held hop fails closed,
// and so does a hop whose ask the shared store could not take (ledger_unavailable). A revoked,
// forgotten or removed grant ends its asks at once (grant_revoked). An answer for the grant's life is a
// ledger revision (StandingAnswers), so every instance and a restart keep it.
import { randomBytes } from 'node:crypto';
import type { AskPending, ReasonCode } from '../core/index.js';
import type { EventRing } from '../telemetry/index.js';
import type { RuntimeGrant } from './grant-table.js';
import { memoryStandingAnswers, type AnswerResult, type AskDecision, type AskMessage, type AskScope, type FleetAnswer, type SharedAsks, type StandingAnswers } from './shared-asks.js';

export interface AskAnswer {
  readonly decision: AskDecision;
  readonly scope: AskScope;
}

/** What a held hop learns: go on (and under which ask), or the reason it is refused. */
export type AskOutcome = { readonly allowed: true; readonly ask: string; readonly scope: AskScope } | { readonly allowed: false; readonly ask: string; readonly reason: ReasonCode };

/** A pending ask as the admin API shows it (GET /v1/asks). */
export type AskView = AskPending;

/** The answer, and for scope `grant` whether the ledger kept it (false: it applied to the held hops only). */
export interface AnswerReport {
  readonly result: AnswerResult;
  readonly kept?: boolean;
  /** The ask's grant and destination, once answered. */
  readonly grant?: string;
  readonly destination?: string;
}

interface PendingAsk {
  /** The fleet's id of the ask: a hop that joined another instance's ask takes that ask's id. */
  id: string;
  readonly key: string;
  readonly grant: string;
  readonly generation: string | null;
  readonly destination: string;
  readonly raisedAtMs: number;
  expiresAtMs: number;
  timer: NodeJS.Timeout;
  readonly settle: (outcome: AskOutcome) => void;
  readonly outcome: Promise<AskOutcome>;
  waiting: number;
  /** Raised by another instance: this one waits on its answer and claims a timeout only after a grace. */
  joined: boolean;
  done: boolean;
}

export interface AskRegistryDeps {
  readonly events: EventRing;
  readonly now: () => number;
  /** Where answers for a grant's life are kept (the ledger); by default in this process only. */
  readonly standing?: StandingAnswers;
  /** The fleet's asks (ledger.store: redis); absent: asks are this instance's. */
  readonly shared?: SharedAsks;
  /** Told when the shared store failed a call (it is logged; the hop fails closed). */
  readonly onStoreError?: (error: unknown) => void;
}

/** How many answered ask ids are remembered, so a late second answer gets 409, not 404. */
const ANSWERED_KEPT = 4096;
/** A hop waiting on another instance's ask asks the store how it ended this long after it expired. */
export const JOIN_GRACE_MS = 1000;
/** Pending asks at once, all grants together: beyond it a miss is refused at once (approval_timeout). */
export const MAX_PENDING_ASKS = 1024;
/**
 * Pending asks of one grant: a sandbox that probes many destinations fills its own share, never the
 * table every other grant's asks need (one principal must not starve another's supervisor).
 */
export const MAX_PENDING_ASKS_PER_GRANT = 64;

function outcomeOf(id: string, answer: FleetAnswer): AskOutcome {
  if (answer.decision === 'allow') return { allowed: true, ask: id, scope: answer.scope ?? 'once' };
  const reason: ReasonCode = answer.decision === 'deny' ? 'approval_denied' : answer.decision === 'revoked' ? 'grant_revoked' : 'approval_timeout';
  return { allowed: false, ask: id, reason };
}

const TIMED_OUT: FleetAnswer = { decision: 'timeout', scope: null, answeredBy: 'timeout' };
const REVOKED: FleetAnswer = { decision: 'revoked', scope: null, answeredBy: 'revoked' };

export class AskRegistry {
  private readonly pending = new Map<string, PendingAsk>();
  private readonly byId = new Map<string, PendingAsk>();
  /** Ask ids whose end this instance announced (ask_answered): once each, and 409 for a late answer. */
  private readonly answered = new Set<string>();
  private readonly perGrant = new Map<string, number>();
  private standing: StandingAnswers;
  private shared: SharedAsks | null;
  private onStoreError: (error: unknown) => void;

  constructor(private readonly deps: AskRegistryDeps) {
    this.standing = deps.standing ?? memoryStandingAnswers();
    this.shared = deps.shared ?? null;
    this.onStoreError = deps.onStoreError ?? (() => undefined);
  }

  /**
   * Keeps standing answers in the ledger and, in a fleet, asks in the shared store (app.ts, once they are
   * open, before any listener accepts); resolves once this instance hears the others' asks.
   */
  async useLedger(standing: StandingAnswers, shared: SharedAsks | null, onStoreError: (error: unknown) => void): Promise<void> {
    this.standing = standing;
    this.shared = shared;
    this.onStoreError = onStoreError;
    await shared?.subscribe((message) => this.onMessage(message));
  }

  /** A standing answer for (grant, destination), given earlier with scope `grant`; undefined: none. */
  standingAnswer(grantId: string, destination: string): AskDecision | undefined {
    return this.standing.get(grantId, destination);
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
    const entry: PendingAsk = {
      id,
      key,
      grant: grant.id,
      generation: grant.generation,
      destination,
      raisedAtMs,
      expiresAtMs: raisedAtMs + timeoutMs,
      timer: this.timer(timeoutMs, () => this.expire(entry)),
      settle,
      outcome,
      waiting: 1,
      joined: false,
      done: false,
    };
    this.pending.set(key, entry);
    this.byId.set(id, entry);
    this.perGrant.set(grant.id, ofGrant + 1);
    if (this.shared === null) this.announceRaised(this.viewOf(entry));
    else void this.raiseShared(this.shared, entry, timeoutMs);
    return outcome;
  }

  /** Raises the ask fleet-wide, or joins the one another instance raised for the same grant and destination. */
  private async raiseShared(shared: SharedAsks, entry: PendingAsk, timeoutMs: number): Promise<void> {
    let view: AskPending;
    try {
      view = await shared.raise(this.viewOf(entry), timeoutMs);
    } catch (error) {
      this.onStoreError(error);
      this.finish(entry, { allowed: false, ask: entry.id, reason: 'ledger_unavailable' }, null, 'timeout');
      return;
    }
    if (entry.done) {
      // Revoked (or shut down) while the store took it: the fleet learns it ended.
      if (view.ask === entry.id) void shared.answer(entry.id, REVOKED).catch(() => undefined);
      return;
    }
    if (view.ask === entry.id) {
      this.announceRaised(view);
      return;
    }
    this.byId.delete(entry.id);
    entry.id = view.ask;
    entry.joined = true;
    entry.expiresAtMs = Date.parse(view.expiresAt);
    this.byId.set(entry.id, entry);
    clearTimeout(entry.timer);
    entry.timer = this.timer(entry.expiresAtMs - this.deps.now() + JOIN_GRACE_MS, () => this.expire(entry));
    // It may have ended between the store's answer and now: the message found no hop waiting on it here.
    await this.settleFromStore(shared, entry, false);
  }

  /** The deadline passed: refuse (approval_timeout), unless an answer beat it somewhere in the fleet. */
  private async expire(entry: PendingAsk): Promise<void> {
    if (entry.done) return;
    if (this.shared === null) return this.finish(entry, outcomeOf(entry.id, TIMED_OUT), null, 'timeout');
    try {
      if (entry.joined && (await this.settleFromStore(this.shared, entry, true))) return;
      const claimed = await this.shared.answer(entry.id, TIMED_OUT);
      if (claimed.result !== 'answered' && (await this.settleFromStore(this.shared, entry, true))) return;
    } catch (error) {
      this.onStoreError(error);
    }
    this.finish(entry, outcomeOf(entry.id, TIMED_OUT), null, 'timeout');
  }

  /** Settles `entry` from the store's record of how its ask ended; false while it is still pending. */
  private async settleFromStore(shared: SharedAsks, entry: PendingAsk, rethrow: boolean): Promise<boolean> {
    let answer: FleetAnswer | null;
    try {
      answer = await shared.outcome(entry.id);
    } catch (error) {
      if (rethrow) throw error;
      this.onStoreError(error);
      return false;
    }
    if (answer === null || entry.done) return entry.done;
    this.finish(entry, outcomeOf(entry.id, answer), answer, answer.answeredBy);
    return true;
  }

  /** The supervisor's answer: the first one wins (in a fleet, the first on any instance). */
  async answer(id: string, answer: AskAnswer): Promise<AnswerReport> {
    const fleetAnswer: FleetAnswer = { decision: answer.decision, scope: answer.scope, answeredBy: 'admin' };
    let view: AskPending | null;
    if (this.shared !== null) {
      const claimed = await this.shared.answer(id, fleetAnswer);
      if (claimed.result !== 'answered') return { result: claimed.result };
      view = claimed.view;
    } else {
      const entry = this.byId.get(id);
      if (entry === undefined) return { result: this.answered.has(id) ? 'already_answered' : 'not_found' };
      view = this.viewOf(entry);
      // Taken now, so a second answer while the ledger writes is 409, not a second winner.
      entry.done = true;
    }
    let kept: boolean | undefined;
    if (answer.scope === 'grant' && view !== null) {
      try {
        kept = await this.standing.keep(view.grant, view.destination, answer.decision);
      } catch (error) {
        this.onStoreError(error);
        kept = false;
      }
    }
    const entry = this.byId.get(id);
    if (entry !== undefined) this.finish(entry, outcomeOf(id, fleetAnswer), fleetAnswer, 'admin', true);
    else if (view !== null) this.announceAnswered(view, fleetAnswer);
    const answered = { result: 'answered' as const, ...(view === null ? {} : { grant: view.grant, destination: view.destination }) };
    return kept === undefined ? answered : { ...answered, kept };
  }

  /** The grant was revoked, forgotten or dropped (or it expired): its held hops are refused now. */
  endGrant(grantId: string, reason: 'grant_revoked' | 'grant_expired' = 'grant_revoked'): void {
    if (reason === 'grant_revoked') this.standing.forget?.(grantId);
    for (const entry of [...this.pending.values()]) {
      if (entry.grant !== grantId) continue;
      if (this.shared !== null && !entry.joined) void this.shared.answer(entry.id, REVOKED).catch(() => undefined);
      this.finish(entry, { allowed: false, ask: entry.id, reason }, REVOKED, 'revoked');
    }
  }

  /** This instance's pending asks. */
  list(): AskView[] {
    return [...this.pending.values()].map((entry) => this.viewOf(entry));
  }

  /** The pending asks an admin sees: the fleet's with a shared store, else this instance's. */
  async listAll(): Promise<AskView[]> {
    if (this.shared === null) return this.list();
    const local = new Map(this.list().map((v) => [v.ask, v]));
    return (await this.shared.list()).map((view) => local.get(view.ask) ?? view);
  }

  /** Ends every pending ask (shutdown): held hops are refused, never left hanging. */
  close(): void {
    for (const entry of [...this.pending.values()]) this.finish(entry, outcomeOf(entry.id, TIMED_OUT), null, 'timeout');
  }

  private onMessage(message: AskMessage): void {
    if (message.kind === 'raised') {
      this.announceRaised(message.view);
      return;
    }
    const entry = this.byId.get(message.view.ask);
    if (entry !== undefined) this.finish(entry, outcomeOf(entry.id, message.answer), message.answer, message.answer.answeredBy);
    else this.announceAnswered(message.view, message.answer);
  }

  private timer(ms: number, run: () => Promise<void> | void): NodeJS.Timeout {
    const timer = setTimeout(() => void run(), Math.max(0, ms));
    timer.unref();
    return timer;
  }

  private finish(entry: PendingAsk, outcome: AskOutcome, answer: FleetAnswer | null, answeredBy: FleetAnswer['answeredBy'], taken = false): void {
    if (this.byId.get(entry.id) !== entry || (entry.done && !taken)) return;
    entry.done = true;
    clearTimeout(entry.timer);
    this.pending.delete(entry.key);
    this.byId.delete(entry.id);
    const left = (this.perGrant.get(entry.grant) ?? 1) - 1;
    if (left > 0) this.perGrant.set(entry.grant, left);
    else this.perGrant.delete(entry.grant);
    this.announceAnswered(this.viewOf(entry), answer ?? { decision: answeredBy === 'timeout' ? 'timeout' : 'revoked', scope: null, answeredBy });
    entry.settle(outcome);
  }

  private announceRaised(view: AskPending): void {
    this.deps.events.publish('ask', { grant: view.grant, generation: view.generation }, { ts: new Date(this.deps.now()).toISOString(), ...view });
  }

  /** Publishes ask_answered once per ask on this instance, and remembers the id for a late answer's 409. */
  private announceAnswered(view: AskPending, answer: FleetAnswer): void {
    if (this.answered.has(view.ask)) return;
    this.answered.add(view.ask);
    if (this.answered.size > ANSWERED_KEPT) this.answered.delete(this.answered.values().next().value as string);
    this.deps.events.publish('ask_answered', { grant: view.grant, generation: view.generation }, {
      ts: new Date(this.deps.now()).toISOString(),
      ask: view.ask,
      grant: view.grant,
      generation: view.generation,
      destination: view.destination,
      decision: answer.decision === 'revoked' ? 'deny' : answer.decision,
      scope: answer.scope,
      answeredBy: answer.answeredBy,
      waiting: view.waiting,
    });
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
