// GET /v1/events (issue 27 item 2): the EventRing as Server-Sent Events, filtered by grant, generation and
// kind, resumable with Last-Event-ID. Publishing only hands an event to this stream, which writes it or
// queues it: a reader that does not keep up loses events and is told so with a `gap`, and never slows a
// hop. Writes the events' own data only: never a token, a header value or a request body.
import type http from 'node:http';
import type { ControlIssue } from '../core/index.js';
import { EVENT_KINDS, matchesFilter, type EventFilter, type EventKind, type EventRing, type SluiceEvent } from '../telemetry/index.js';
import type { AdminErrorCode } from './errors.js';
import { PARAM_MESSAGE, PARAM_PATTERN } from './router.js';

export const EVENTS_PATH = '/v1/events';

export interface EventStreamLimits {
  /** A comment line this often keeps proxies and idle timers from closing a quiet stream. */
  readonly keepAliveMs: number;
  /** What a stalled reader may have queued before further events are dropped (and a gap is owed). */
  readonly maxQueuedEvents: number;
  readonly maxQueuedBytes: number;
}

export const EVENT_STREAM_LIMITS: EventStreamLimits = Object.freeze({ keepAliveMs: 15_000, maxQueuedEvents: 1_000, maxQueuedBytes: 1024 * 1024 });

/** What a reader asked for: its filter, and the id it last saw (null: start at the newest event). */
export interface EventsRequest {
  readonly filter: EventFilter;
  readonly lastEventId: number | null;
}

export type ParsedEventsRequest =
  | { readonly ok: true; readonly value: EventsRequest }
  | { readonly ok: false; readonly error: AdminErrorCode; readonly issues: readonly ControlIssue[] };

/** A gap is not asked for: every reader gets one when it loses events. */
const FILTER_KINDS: readonly EventKind[] = EVENT_KINDS.filter((kind) => kind !== 'gap');
const KIND_MESSAGE = `expected a comma-separated list of ${FILTER_KINDS.join(', ')}`;
/** An SSE id as Sluice writes it: a decimal integer that stays exact in a JSON number. */
const EVENT_ID = /^(0|[1-9][0-9]{0,14})$/;

function invalid(error: AdminErrorCode, path: string, message: string): ParsedEventsRequest {
  return { ok: false, error, issues: [{ path, message }] };
}

/** Parses `?grant=ID&generation=LABEL&kind=a,b` and the Last-Event-ID header; other parameters are ignored. */
export function parseEventsRequest(query: URLSearchParams, lastEventIdHeader: string | string[] | undefined): ParsedEventsRequest {
  const filter: { grant?: string; generation?: string; kinds?: ReadonlySet<EventKind> } = {};
  for (const [name, error] of [['grant', 'grant_id_invalid'], ['generation', 'generation_invalid']] as const) {
    const values = query.getAll(name);
    if (values.length > 1) return invalid(error, name, `give ${name} once`);
    const value = values[0];
    if (value === undefined) continue;
    if (!PARAM_PATTERN.test(value)) return invalid(error, name, PARAM_MESSAGE);
    filter[name] = value;
  }
  const kindValues = query.getAll('kind');
  if (kindValues.length > 0) {
    const kinds = new Set<EventKind>();
    for (const name of kindValues.join(',').split(',')) {
      const kind = FILTER_KINDS.find((k) => k === name.trim());
      if (kind === undefined) return invalid('kind_invalid', 'kind', KIND_MESSAGE);
      kinds.add(kind);
    }
    filter.kinds = kinds;
  }
  let lastEventId: number | null = null;
  if (lastEventIdHeader !== undefined) {
    const raw = Array.isArray(lastEventIdHeader) ? lastEventIdHeader.join(',') : lastEventIdHeader;
    if (!EVENT_ID.test(raw.trim())) return invalid('last_event_id_invalid', 'Last-Event-ID', 'expected the integer id of the last event received');
    lastEventId = Number(raw.trim());
  }
  return { ok: true, value: { filter, lastEventId } };
}

const HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-store',
  // A stream ends only when one side goes: the connection goes with it.
  connection: 'close',
} as const;

const KEEP_ALIVE = ': keep-alive\n\n';

type GapReason = 'ring' | 'slow_reader' | 'restart';

/**
 * One reader's stream. Events arrive in id order from the ring (backlog, then live); an event whose id is
 * not above the last one handled is a duplicate and skipped, so none is written twice. While the socket
 * will not take more (res.write returned false), events queue up to the limits; beyond them they are
 * dropped, and once the queue has drained one `gap` names the ids dropped before the stream goes on live.
 */
export class EventStream {
  private lastHandledId = 0;
  private isBlocked = false;
  private queue: string[] = [];
  private queueHead = 0;
  private queuedBytes = 0;
  private dropped: { from: number; to: number } | null = null;
  private isClosed = false;
  private readonly unsubscribe: () => void;
  private readonly keepAlive: NodeJS.Timeout;
  private readonly closeListeners: (() => void)[] = [];

  constructor(
    ring: EventRing,
    private readonly res: http.ServerResponse,
    private readonly request: EventsRequest,
    private readonly limits: EventStreamLimits = EVENT_STREAM_LIMITS,
  ) {
    res.writeHead(200, HEADERS);
    res.flushHeaders();
    res.on('drain', () => this.flush());
    res.once('close', () => this.dispose());
    // A write racing the reader's reset must not become an uncaught error: the close follows.
    res.on('error', () => this.dispose());
    // Subscribed before the backlog is read: an event published from here on is either in the backlog or
    // arrives live, and the id check drops the one that is both.
    this.unsubscribe = ring.subscribe((event) => this.receive(event));
    this.keepAlive = setInterval(() => this.sendKeepAlive(), limits.keepAliveMs);
    this.keepAlive.unref();
    this.writeBacklog(ring);
  }

  /** Registers `listener` for the end of the stream, whoever ends it. */
  onClose(listener: () => void): void {
    if (this.isClosed) listener();
    else this.closeListeners.push(listener);
  }

  /** Ends the stream (the admin server is closing): at once, also for a reader that stopped reading. */
  end(): void {
    if (this.isClosed) return;
    if (this.isBlocked) this.res.destroy();
    else this.res.end();
    this.dispose();
  }

  private writeBacklog(ring: EventRing): void {
    const { lastEventId } = this.request;
    if (lastEventId === null) {
      this.lastHandledId = ring.lastId;
      return;
    }
    let after = lastEventId;
    if (lastEventId > ring.lastId) {
      // An id this process never wrote: the reader saw an earlier Sluice (ids count from 1 in each process).
      // What it missed there is unknowable; everything this process still holds is new to it. `id: 0`
      // makes a reconnect from here ask for exactly that again.
      this.sendGap(0, null, null, 'restart');
      after = 0;
    }
    const backlog = ring.since(after);
    this.lastHandledId = after;
    if (backlog.lost !== null) {
      this.sendGap(backlog.lost.to, backlog.lost.from, backlog.lost.to, 'ring');
      this.lastHandledId = backlog.lost.to;
    }
    for (const event of backlog.events) this.receive(event);
  }

  /** Called in the publish path: never throws and never waits. */
  private receive(event: SluiceEvent): void {
    if (this.isClosed || event.id <= this.lastHandledId) return;
    this.lastHandledId = event.id;
    if (!matchesFilter(event, this.request.filter)) return;
    try {
      this.send(event.id, `id: ${event.id}\nevent: ${event.kind}\ndata: ${JSON.stringify(event.data)}\n\n`);
    } catch {
      // An event that cannot be serialized must not reach the hop that published it: this reader ends.
      this.res.destroy();
    }
  }

  private send(id: number, text: string): void {
    if (!this.isBlocked && this.dropped === null) {
      this.isBlocked = !this.res.write(text);
      return;
    }
    const bytes = Buffer.byteLength(text);
    const isFull = this.queue.length - this.queueHead >= this.limits.maxQueuedEvents || this.queuedBytes + bytes > this.limits.maxQueuedBytes;
    if (this.dropped !== null || isFull) {
      // Dropped from here until the gap is written, so the gap sits exactly where the dropped ids were.
      if (this.dropped === null) this.dropped = { from: id, to: id };
      else this.dropped.to = id;
      return;
    }
    this.queue.push(text);
    this.queuedBytes += bytes;
  }

  private sendGap(id: number, from: number | null, to: number | null, reason: GapReason): void {
    this.isBlocked = !this.res.write(`id: ${id}\nevent: gap\ndata: ${JSON.stringify({ from, to, reason })}\n\n`);
  }

  /** The socket took what it had: write what queued, then the gap owed, then go on live. */
  private flush(): void {
    if (this.isClosed) return;
    this.isBlocked = false;
    while (!this.isBlocked && this.queueHead < this.queue.length) {
      const text = this.queue[this.queueHead]!;
      this.queueHead += 1;
      this.queuedBytes -= Buffer.byteLength(text);
      this.isBlocked = !this.res.write(text);
    }
    if (this.queueHead < this.queue.length) return;
    this.queue = [];
    this.queueHead = 0;
    this.queuedBytes = 0;
    const dropped = this.dropped;
    if (dropped === null || this.isBlocked) return;
    this.dropped = null;
    this.sendGap(dropped.to, dropped.from, dropped.to, 'slow_reader');
  }

  private sendKeepAlive(): void {
    if (this.isClosed || this.isBlocked || this.dropped !== null || this.queueHead < this.queue.length) return;
    this.isBlocked = !this.res.write(KEEP_ALIVE);
  }

  private dispose(): void {
    if (this.isClosed) return;
    this.isClosed = true;
    this.unsubscribe();
    clearInterval(this.keepAlive);
    this.queue = [];
    this.queueHead = 0;
    this.queuedBytes = 0;
    for (const listener of this.closeListeners.splice(0)) listener();
  }
}
