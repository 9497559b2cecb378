// What a `sluice run` command was refused, told when it ends (issue 27, item 3; UX review 2026-12-04
// finding 2): the command inside the sandbox sees only a 403 or a reset, and the audit file is out of its
// reach. The run follows its own grant's decisions on GET /v1/events (`?grant=ID&kind=decision`) while the
// command runs, and prints each refused destination once, with how often, why, and the fix.
import { remedyFor, type ReasonCode, type RequestKind } from '../core/index.js';
import { followEventStream } from './watch/event-stream.js';
import { SseParser } from './watch/sse-parser.js';

export interface RunDenials {
  /** Stops following and returns the summary to print, or null when nothing was refused. */
  finish(): Promise<string | null>;
}

interface Refusal {
  readonly reason: string;
  readonly destination: string;
  readonly request: string;
  count: number;
}

/** How long the stream has to open before the command starts anyway (its denials then go untold). */
const OPEN_WAIT_MS = 2000;
/** After the command ends: time for the last decisions, already written by Sluice, to arrive. */
const DRAIN_MS = 150;
/** Distinct refusals kept; more are counted, not listed. */
const MAX_LISTED = 20;

/** Starts following; resolves once the stream is open (or could not open), so no early denial is missed. */
export async function followRunDenials(admin: string, adminToken: string | undefined, grantId: string): Promise<RunDenials> {
  const refusals = new Map<string, Refusal>();
  let total = 0;
  const parser = new SseParser();
  const controller = new AbortController();
  let opened!: () => void;
  const isOpen = new Promise<void>((resolve) => (opened = resolve));
  const ended = followEventStream(
    { admin, adminToken, path: `/v1/events?grant=${encodeURIComponent(grantId)}&kind=decision`, lastEventId: '', signal: controller.signal },
    opened,
    (chunk) => {
      for (const event of parser.push(chunk)) {
        if (event.event !== 'decision') continue;
        const data = JSON.parse(event.data) as { decision?: unknown; reason?: unknown; destination?: unknown; request?: unknown };
        if (data.decision !== 'deny' || typeof data.reason !== 'string') continue;
        total += 1;
        const destination = typeof data.destination === 'string' ? data.destination : '(no destination)';
        const key = `${data.reason} ${destination}`;
        const seen = refusals.get(key);
        if (seen !== undefined) seen.count += 1;
        else if (refusals.size < MAX_LISTED) refusals.set(key, { reason: data.reason, destination, request: typeof data.request === 'string' ? data.request : 'connect', count: 1 });
      }
    },
  );
  void ended.then(() => opened());
  await Promise.race([isOpen, new Promise((resolve) => setTimeout(resolve, OPEN_WAIT_MS).unref())]);
  return {
    finish: async () => {
      await new Promise((resolve) => setTimeout(resolve, DRAIN_MS));
      controller.abort();
      await ended;
      return total === 0 ? null : formatSummary([...refusals.values()], total);
    },
  };
}

export function formatSummary(refusals: readonly Refusal[], total: number): string {
  const lines = refusals.map((r) => {
    const fix = fixFor(r);
    return `  ${r.count}x ${r.reason} ${r.destination}${fix === '' ? '' : `\n      fix: ${fix}`}`;
  });
  const listed = refusals.reduce((n, r) => n + r.count, 0);
  if (listed < total) lines.push(`  … and ${total - listed} more`);
  return `sluice run: ${total} request${total === 1 ? ' was' : 's were'} refused:\n${lines.join('\n')}\n`;
}

/** The fix of a reason code for the destination, as the 403 body gives it (core/remedy.ts). */
function fixFor(refusal: Refusal): string {
  const match = /^([a-z]+):\/\/(.+)$/.exec(refusal.destination);
  const request: RequestKind = refusal.request === 'forward' ? 'forward' : 'connect';
  try {
    return remedyFor(refusal.reason as ReasonCode, { request, scheme: (match?.[1] ?? null) as never, canonical: match?.[2] ?? null, addresses: [] });
  } catch {
    return '';
  }
}
