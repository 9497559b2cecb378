// Runs every hop, whatever its listener (the CONNECT fast path, node:http CONNECT, absolute-form
// requests, SOCKS5), and is the only caller of the record functions: each hop gets exactly one decision
// record and at most one close record, after it (docs/audit-log.md). A stage that throws does not take
// the process down: the hop is denied internal_error unless it was decided already, the fault goes to
// the operational log, and only that connection is closed.
import type { ReasonCode } from '../../core/index.js';
import { recordClose, recordDecision, type CloseFacts } from './audit-hop.js';
import type { ConnectionContext } from './connection-context.js';
import { decisionOf, type Decision } from './decision.js';
import type { Hop } from './hop.js';
import type { ProxyRuntime } from './runtime.js';

/** How a denied hop answers its client: an HTTP response, a SOCKS5 reply, or closing the connection. */
export type Answer = (decision: Decision) => void;

/** One hop in flight: decides it once and closes it once. */
export class HopRun {
  private closeRecorded = false;

  constructor(
    private readonly rt: ProxyRuntime,
    readonly ctx: ConnectionContext,
    readonly hop: Hop,
  ) {}

  /**
   * Decides the hop now, allowed or with its first denial, and writes the decision record; only once.
   * No Decision value is built for it (see decision()).
   */
  decide(): void {
    const { hop } = this;
    if (hop.isDecided) return;
    hop.isDecided = true;
    hop.decidedAtMs = Date.now();
    try {
      recordDecision(this.rt.audit, this.ctx, hop, this.rt.metrics, this.rt.events);
    } catch (error) {
      // Decided all the same: what failed (the sink or a metric) must not change the hop's outcome.
      this.rt.log.error({ err: error, connection: this.ctx.id, hop: hop.index }, 'recording a decision failed');
    }
  }

  /**
   * The hop's Decision value (deciding it first if it is not): built from the decided hop the first
   * time it is asked for, the same value ever after. A denial's answer needs it; an allowed hop seldom does.
   */
  decision(): Decision {
    this.decide();
    return (this.hop.decision ??= decisionOf(this.hop, this.ctx, this.hop.decidedAtMs));
  }

  /** Writes the close record of an allowed hop: once, and never before its decision. */
  close(facts: CloseFacts): void {
    if (this.closeRecorded || !this.hop.isDecided || !this.hop.isAllowed) return;
    this.closeRecorded = true;
    try {
      recordClose(this.rt.audit, this.ctx, this.hop, facts, this.rt.metrics);
    } catch (error) {
      this.rt.log.error({ err: error, connection: this.ctx.id, hop: this.hop.index }, 'recording a close failed');
    }
  }

  get isClosed(): boolean {
    return this.closeRecorded;
  }
}

function answerSafely(rt: ProxyRuntime, ctx: ConnectionContext, answer: Answer, decision: Decision): void {
  try {
    answer(decision);
  } catch (error) {
    rt.log.error({ err: error, connection: ctx.id }, 'answering a denied hop failed');
    ctx.socket.destroy();
  }
}

/**
 * Runs `stages` for `hop`. A stage denies with hop.fail and returns; an allowed hop calls run.decide at
 * its decision point and run.close when it ends. Whatever the stages did or threw, the hop leaves here
 * decided, and a denied hop is answered exactly once.
 */
export async function runHop(rt: ProxyRuntime, ctx: ConnectionContext, hop: Hop, stages: (run: HopRun) => Promise<void>, answer: Answer): Promise<void> {
  const run = new HopRun(rt, ctx, hop);
  let faulted = false;
  try {
    await stages(run);
  } catch (error) {
    faulted = true;
    rt.log.error({ err: error, connection: ctx.id, hop: hop.index }, 'hop handling failed');
    hop.fail('internal_error', 'handling the hop failed; see the operational log');
  } finally {
    if (!hop.isDecided) {
      // Stages that return without deciding an allowed hop are a bug: fail closed.
      hop.fail('internal_error', 'the hop ended undecided');
      answerSafely(rt, ctx, answer, run.decision());
    } else if (faulted && hop.isAllowed) {
      // Allowed, then failed while relaying: nothing more can be answered; the connection ends.
      run.close({ closedBy: 'relay_failed', status: null, bytesUp: 0, bytesDown: 0 });
      ctx.socket.destroy();
    }
  }
}

/** A hop refused before any stage runs (admission, timeouts, parse errors): decided and answered now. */
export function refuseHop(rt: ProxyRuntime, ctx: ConnectionContext, hop: Hop, reason: ReasonCode, detail: string, answer: Answer): void {
  hop.fail(reason, detail);
  answerSafely(rt, ctx, answer, new HopRun(rt, ctx, hop).decision());
}
