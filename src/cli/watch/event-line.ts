// The lines `sluice watch` prints for the admin event stream: one per event, for a person (aligned
// columns, colour on a terminal) or for a script (`--json`). Pure: the caller gives the clock and colour.

/** One event of GET /v1/events, its data already parsed. */
export interface WatchEvent {
  /** The event's own SSE id: a number on Sluice's stream, text when it is not one, null when it has none (a gap). */
  readonly id: number | string | null;
  readonly event: string;
  readonly data: Readonly<Record<string, unknown>>;
}

export interface LineStyle {
  readonly isColor: boolean;
  /** Now, in ms since the epoch: the time of a line whose event carries no `ts`, and what "expires in" counts from. */
  readonly nowMs: number;
}

const GREEN = '\x1b[32m';
const RED = '\x1b[31m';
const YELLOW = '\x1b[33m';
const RESET = '\x1b[0m';
/** The widest label (`ANSWERED`), so that the columns after it line up. */
const LABEL_WIDTH = 8;

/** `{"id":N,"event":KIND,"data":{…}}`: the `--json` line. */
export function formatJsonLine(event: WatchEvent): string {
  return `${JSON.stringify({ id: event.id, event: event.event, data: event.data })}\n`;
}

/** The human line of one event, newline included. */
export function formatEventLine(event: WatchEvent, style: LineStyle): string {
  const d = event.data;
  const time = clockTime(typeof d['ts'] === 'string' ? Date.parse(d['ts']) : Number.NaN, style.nowMs);
  const [label, color, rest] = describe(event, style.nowMs);
  const padded = label.padEnd(LABEL_WIDTH);
  const shown = style.isColor && color !== null ? `${color}${label}${RESET}${padded.slice(label.length)}` : padded;
  return `${time}  ${shown}  ${rest.map(printable).join('  ')}\n`;
}

function describe(event: WatchEvent, nowMs: number): [string, string | null, string[]] {
  const d = event.data;
  switch (event.event) {
    case 'decision': {
      const isAllow = d['decision'] === 'allow';
      return [isAllow ? 'ALLOW' : 'DENY', isAllow ? GREEN : RED, [text(d['reason']), text(d['grant']), text(d['destination'])]];
    }
    case 'ask':
      return ['ASK', YELLOW, [text(d['ask']), text(d['grant']), text(d['destination']), `(expires in ${expiresIn(d['expiresAt'], nowMs)})`]];
    case 'ask_answered':
      return ['ANSWERED', null, [text(d['ask']), howAnswered(d), text(d['grant']), text(d['destination'])]];
    case 'grant': {
      const generation = typeof d['generation'] === 'string' ? [`generation ${d['generation']}`] : [];
      // A change made on another instance of a fleet, said so: this instance's own log will not have it.
      const via = d['via'] === 'fleet' ? ['(on another instance)'] : [];
      return ['GRANT', null, [text(d['action']), text(d['grant']), ...generation, ...via]];
    }
    case 'gap':
      // A restart gap has no ids: the events it lost were numbered by an earlier run of Sluice.
      if (d['from'] === null || d['from'] === undefined) return ['GAP', null, [`lost the events from before Sluice restarted (${text(d['reason'])})`]];
      return ['GAP', null, [`lost events ${text(d['from'])}..${text(d['to'])} (${text(d['reason'])})`]];
    default:
      // A kind this watcher does not know yet (a newer Sluice): shown whole rather than dropped.
      return [printable(event.event.toUpperCase()), null, [JSON.stringify(d)]];
  }
}

/** `allow once by admin`, `deny for the grant by admin`, `timed out`, `deny (grant revoked)`. */
export function howAnswered(d: Readonly<Record<string, unknown>>): string {
  if (d['decision'] === 'timeout' || d['answeredBy'] === 'timeout') return 'timed out';
  if (d['answeredBy'] === 'revoked') return `${text(d['decision'])} (grant revoked)`;
  const scope = d['scope'] === 'once' ? ' once' : d['scope'] === 'grant' ? ' for the grant' : '';
  return `${text(d['decision'])}${scope} by ${text(d['answeredBy'])}`;
}

/** `HH:MM:SS` in local time: of the event, or of now when the event has no valid `ts`. */
function clockTime(ms: number, nowMs: number): string {
  const at = new Date(Number.isFinite(ms) ? ms : nowMs);
  return [at.getHours(), at.getMinutes(), at.getSeconds()].map((n) => String(n).padStart(2, '0')).join(':');
}

function expiresIn(expiresAt: unknown, nowMs: number): string {
  const at = typeof expiresAt === 'string' ? Date.parse(expiresAt) : Number.NaN;
  return Number.isFinite(at) ? `${Math.max(0, Math.round((at - nowMs) / 1000))}s` : '?';
}

function text(value: unknown): string {
  if (value === null || value === undefined || value === '') return '-';
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/**
 * The text with its control characters shown as `\xNN`: a destination or reason comes from the stream, and
 * a terminal must never receive escape sequences it did not get from `sluice watch` itself.
 */
export function printable(value: string): string {
  return value.replace(/[\x00-\x1f\x7f-\x9f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
}
