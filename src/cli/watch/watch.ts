// `sluice watch`: follows the admin API's event stream (GET /v1/events) and prints one line per event,
// reconnecting with Last-Event-ID so that nothing is lost or printed twice; with --ask, prompts for each
// ask and posts the answer. Reads no environment and touches no process state: main.ts passes them in.
import { Writable, type Readable } from 'node:stream';
import { callAdmin } from '../grant.js';
import { AskPrompter, type AskAnswer, type PendingAsk } from './ask-prompt.js';
import { formatEventLine, formatJsonLine, howAnswered, printable, type WatchEvent } from './event-line.js';
import { followEventStream, parseAdminAddress, type StreamEnd } from './event-stream.js';
import { SseParser, type SseEvent } from './sse-parser.js';

export const WATCH_KINDS = ['decision', 'ask', 'ask_answered', 'grant', 'gap'] as const;

export interface WatchArgs {
  /** `unix:/path/admin.sock` or `http://host:port`. */
  readonly admin: string;
  readonly adminToken?: string | undefined;
  readonly json?: boolean | undefined;
  readonly grant?: string | undefined;
  readonly generation?: string | undefined;
  /** Comma-separated event kinds, e.g. `decision,ask`. */
  readonly kind?: string | undefined;
  readonly ask?: boolean | undefined;
  /** The reconnect backoff: doubles from `initialMs` up to `maxMs` (defaults 500 and 5000). */
  readonly backoff?: { readonly initialMs: number; readonly maxMs: number } | undefined;
}

export interface WatchIo {
  stdout(s: string): void;
  stderr(s: string): void;
  /** Colour for the event lines: stdout is a terminal and NO_COLOR is not set (main.ts decides). */
  readonly isColor: boolean;
  /** For --ask: the terminal's input, and whether stdin is one (--ask refuses to run without). */
  readonly stdin?: Readable | undefined;
  readonly isStdinTty: boolean;
  /** Where prompts go, and whether it is a terminal too (then the prompt gets line editing). */
  readonly promptOutput?: Writable | undefined;
  readonly isPromptTty?: boolean | undefined;
  /** Registers the handler for SIGINT: the watch ends with exit 0. */
  onInterrupt(handler: () => void): void;
  /** The clock, in ms since the epoch (default Date.now). */
  readonly now?: (() => number) | undefined;
}

/** Consecutive failed reconnects after which the watch gives up (exit 1). */
export const MAX_RECONNECT_FAILURES = 10;
const DEFAULT_BACKOFF = { initialMs: 500, maxMs: 5_000 };
const EXIT_FAILED = 1;
const EXIT_USAGE = 2;

/**
 * Runs `sluice watch`; resolves with the exit code: 0 when interrupted (SIGINT), 1 when Sluice cannot be
 * reached at the start, refuses the stream, or stays out of reach for MAX_RECONNECT_FAILURES attempts in
 * a row, 2 on bad input.
 */
export async function runWatchCommand(args: WatchArgs, io: WatchIo): Promise<number> {
  const path = eventsPath(args);
  if ('error' in path) return usage(io, path.error);
  if (parseAdminAddress(args.admin) === null) return usage(io, `--admin ${args.admin}: expected unix:/path or http://host:port`);
  if (args.ask === true && (!io.isStdinTty || io.stdin === undefined)) return usage(io, '--ask needs a terminal (stdin is not one)');
  return new Watch(args, io, path.value).run();
}

function usage(io: WatchIo, message: string): number {
  io.stderr(`sluice watch: ${message}\n`);
  return EXIT_USAGE;
}

/**
 * `/v1/events?grant=…&generation=…&kind=a,b`, or the bad flag. A gap passes every filter, so `gap` is
 * accepted in --kind but never sent (the server knows no such filter); --ask adds the ask kinds it needs.
 */
export function eventsPath(args: WatchArgs): { value: string } | { error: string } {
  const query: string[] = [];
  if (args.grant !== undefined) query.push(`grant=${encodeURIComponent(args.grant)}`);
  if (args.generation !== undefined) query.push(`generation=${encodeURIComponent(args.generation)}`);
  if (args.kind !== undefined) {
    const named = args.kind.split(',').map((k) => k.trim()).filter((k) => k !== '');
    const unknown = named.filter((k) => !(WATCH_KINDS as readonly string[]).includes(k));
    if (named.length === 0 || unknown.length > 0) return { error: `--kind ${args.kind}: expected a comma-separated list of ${WATCH_KINDS.join(', ')}` };
    const kinds = [...new Set(named.filter((k) => k !== 'gap'))];
    if (kinds.length === 0) return { error: `--kind ${args.kind}: a gap always shows; name at least one other kind` };
    if (args.ask === true) for (const k of ['ask', 'ask_answered']) if (!kinds.includes(k)) kinds.push(k);
    query.push(`kind=${kinds.join(',')}`);
  }
  return { value: `/v1/events${query.length === 0 ? '' : `?${query.join('&')}`}` };
}

class Watch {
  private readonly abort = new AbortController();
  private readonly now: () => number;
  private readonly backoff: { readonly initialMs: number; readonly maxMs: number };
  private lastEventId = '';
  /** The newest numeric id printed: a repeat on the same connection is dropped. */
  private lastNumericId: number | null = null;
  private isFirstOnConnection = true;
  /** A stream has opened once: later failures are reconnects, retried; before, the first failure ends the watch. */
  private hasOpened = false;
  private readonly asks: AskPrompter | null;

  constructor(
    private readonly args: WatchArgs,
    private readonly io: WatchIo,
    private readonly path: string,
  ) {
    this.now = io.now ?? Date.now;
    this.backoff = args.backoff ?? DEFAULT_BACKOFF;
    io.onInterrupt(() => this.abort.abort());
    this.asks =
      args.ask === true && io.stdin !== undefined
        ? new AskPrompter({
            input: io.stdin,
            output: io.promptOutput ?? errorWriter(io),
            isTerminal: io.isPromptTty === true && io.isStdinTty,
            postAnswer: (ask, answer) => this.postAnswer(ask, answer),
            onQuit: () => this.abort.abort(),
          })
        : null;
  }

  async run(): Promise<number> {
    try {
      return await this.follow();
    } finally {
      await this.asks?.close();
    }
  }

  /** The reconnect loop: bounded by MAX_RECONNECT_FAILURES failures in a row, or by the interrupt. */
  private async follow(): Promise<number> {
    const signal = this.abort.signal;
    let failures = 0;
    let delayMs = this.backoff.initialMs;
    while (!signal.aborted) {
      const end = await this.connectOnce();
      if (signal.aborted) break;
      if (end.isOpened) {
        failures = 0;
        delayMs = this.backoff.initialMs;
        this.warn(`${end.detail}; reconnecting in ${seconds(delayMs)}`);
      } else if (end.isFatal || !this.hasOpened) {
        // At the start, or a refusal (token, filter, a Sluice without /v1/events): say so, as sluice grant does.
        // A 400 is bad input (a filter the server refuses), never 1.
        this.warn(end.detail);
        return end.status === 400 ? EXIT_USAGE : EXIT_FAILED;
      } else {
        failures += 1;
        delayMs = Math.min(this.backoff.initialMs * 2 ** failures, this.backoff.maxMs);
        if (failures >= MAX_RECONNECT_FAILURES) {
          this.warn(`gave up after ${failures} failed reconnects to ${this.args.admin}: ${end.detail}`);
          return EXIT_FAILED;
        }
        this.warn(`${end.detail}; reconnecting in ${seconds(delayMs)} (${failures}/${MAX_RECONNECT_FAILURES})`);
      }
      await sleep(delayMs, signal);
    }
    return 0;
  }

  private connectOnce(): Promise<StreamEnd> {
    const parser = new SseParser(this.lastEventId);
    this.isFirstOnConnection = true;
    return followEventStream(
      { admin: this.args.admin, adminToken: this.args.adminToken, path: this.path, lastEventId: this.lastEventId, signal: this.abort.signal },
      () => {
        if (this.hasOpened) this.warn('reconnected');
        this.hasOpened = true;
        void this.listPendingAsks();
      },
      (chunk) => {
        const events = parser.push(chunk);
        this.lastEventId = parser.lastEventId;
        for (const event of events) this.onEvent(event);
      },
    );
  }

  private onEvent(sse: SseEvent): void {
    // An event without an id line of its own (a gap) shares the previous id: it is never a repeat.
    const id = !sse.hasOwnId ? null : /^\d{1,15}$/.test(sse.id) ? Number(sse.id) : sse.id;
    if (typeof id === 'number') {
      if (this.lastNumericId !== null && id <= this.lastNumericId) {
        if (!this.isFirstOnConnection) return;
        // The first event of a new connection went back: this Sluice restarted and its ids began again.
        // Sluice says so with a restart gap (shown as its own line); another server may not.
        if (sse.event !== 'gap') this.warn(`event ids restarted at ${id} (was ${this.lastNumericId}): Sluice restarted; events in between may be lost`);
      }
      this.isFirstOnConnection = false;
      this.lastNumericId = id;
    }
    let data: unknown;
    try {
      data = JSON.parse(sse.data);
    } catch {
      data = undefined;
    }
    if (typeof data !== 'object' || data === null || Array.isArray(data)) {
      this.warn(`${sse.event} event${sse.hasOwnId ? ` ${sse.id}` : ''}: data is not a JSON object; skipped`);
      return;
    }
    const event: WatchEvent = { id, event: sse.event, data: data as Record<string, unknown> };
    const line = this.args.json === true ? formatJsonLine(event) : formatEventLine(event, { isColor: this.io.isColor, nowMs: this.now() });
    if (this.asks === null) this.io.stdout(line);
    else this.asks.printAbove(() => this.io.stdout(line));
    this.offerAsk(event);
  }

  private offerAsk(event: WatchEvent): void {
    if (this.asks === null) return;
    const d = event.data;
    if (event.event === 'ask') {
      const ask = pendingAsk(d);
      if (ask !== null) this.asks.offer(ask);
    } else if (event.event === 'ask_answered' && askId(d['ask']) !== null) {
      this.asks.answered(askId(d['ask']) ?? '', d['answeredBy'] === 'admin' ? 'answered elsewhere' : howAnswered(d));
    } else if (event.event === 'gap') {
      // Lost events may have held asks: the list of pending ones has them.
      void this.listPendingAsks();
    }
  }

  /** Offers the asks pending before the stream (re)opened or lost in a gap (GET /v1/asks). */
  private async listPendingAsks(): Promise<void> {
    if (this.asks === null) return;
    const listed = await callAdmin(this.args.admin, this.args.adminToken, { method: 'GET', path: '/v1/asks' }).catch((error: unknown) => ({
      status: 0,
      body: { error: (error as Error).message },
    }));
    if (listed.status !== 200) {
      const error = (listed.body as { error?: unknown } | null)?.error;
      this.warn(`cannot list the pending asks (${listed.status === 0 ? '' : `${listed.status} `}${typeof error === 'string' ? error : 'error'}); prompting for new ones only`);
      return;
    }
    const asks = (listed.body as { asks?: unknown } | null)?.asks;
    for (const item of Array.isArray(asks) ? (asks as unknown[]) : []) {
      const ask = typeof item === 'object' && item !== null ? pendingAsk(item as Record<string, unknown>) : null;
      if (ask !== null) this.asks.offer(ask);
    }
  }

  /** A notice on stderr; what the stream or the admin API sent (an id, an error code) never reaches the terminal raw. */
  private warn(message: string): void {
    this.io.stderr(`sluice watch: ${printable(message)}\n`);
  }

  private postAnswer(ask: string, answer: AskAnswer): Promise<{ status: number; body: unknown }> {
    return callAdmin(this.args.admin, this.args.adminToken, { method: 'POST', path: `/v1/asks/${encodeURIComponent(ask)}`, body: answer });
  }
}

function pendingAsk(d: Readonly<Record<string, unknown>>): PendingAsk | null {
  const ask = askId(d['ask']);
  const { grant, destination } = d;
  if (ask === null || typeof grant !== 'string' || typeof destination !== 'string') return null;
  return { ask, grant, destination };
}

/** An ask's id as text (the stream may send it as a string or a number). */
function askId(value: unknown): string | null {
  if (typeof value === 'string' && value !== '') return value;
  return typeof value === 'number' && Number.isSafeInteger(value) ? String(value) : null;
}

function seconds(ms: number): string {
  return ms < 1000 ? `${ms} ms` : `${Number((ms / 1000).toFixed(1))} s`;
}

/** Resolves after `ms`, or at once when `signal` aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

/** A Writable over io.stderr, for prompts when main.ts gives no stream of its own. */
function errorWriter(io: WatchIo): Writable {
  return new Writable({
    write(chunk: Buffer, _encoding, callback): void {
      io.stderr(chunk.toString('utf8'));
      callback();
    },
  });
}
