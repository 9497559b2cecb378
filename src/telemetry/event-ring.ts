// The supervisor's event stream (GET /v1/events, issue 27): decisions, asks raised and answered, grant
// changes, each with an increasing id, kept in a bounded ring so a reader that reconnects with
// Last-Event-ID gets what it missed, or a `gap` when the ring no longer holds it. Publishing never waits
// on a reader: subscribers are called synchronously and must only enqueue (a slow reader is cut off by
// its own stream, not by the ring).

export const EVENT_KINDS = ['decision', 'ask', 'ask_answered', 'grant', 'gap'] as const;
export type EventKind = (typeof EVENT_KINDS)[number];

export interface SluiceEvent {
  readonly id: number;
  readonly kind: EventKind;
  /** The grant the event concerns, for the `grant` filter (null: none). */
  readonly grant: string | null;
  /** That grant's generation label, for the `generation` filter (null: none). */
  readonly generation: string | null;
  /** One JSON object: the SSE `data:` line. */
  readonly data: Readonly<Record<string, unknown>>;
}

export interface EventFilter {
  readonly grant?: string | undefined;
  readonly generation?: string | undefined;
  /** Absent: every kind. A `gap` is always delivered. */
  readonly kinds?: ReadonlySet<EventKind> | undefined;
}

export function matchesFilter(event: SluiceEvent, filter: EventFilter): boolean {
  if (event.kind === 'gap') return true;
  if (filter.kinds !== undefined && !filter.kinds.has(event.kind)) return false;
  if (filter.grant !== undefined && event.grant !== filter.grant) return false;
  if (filter.generation !== undefined && event.generation !== filter.generation) return false;
  return true;
}

export type EventListener = (event: SluiceEvent) => void;

/** What a reader that last saw `afterId` can still get: the events after it, and the ids it lost. */
export interface Backlog {
  readonly events: readonly SluiceEvent[];
  /** The ids no longer held (from..to inclusive), or null when nothing was lost. */
  readonly lost: { readonly from: number; readonly to: number } | null;
}

export const DEFAULT_EVENT_RING_CAPACITY = 10_000;

export class EventRing {
  private readonly slots: (SluiceEvent | undefined)[];
  private next = 1;
  private readonly listeners = new Set<EventListener>();
  /**
   * Decisions are the one kind published on every hop: they are kept only once a reader has asked for
   * the stream (a proxy nobody supervises builds no event per hop). Asks and grant changes always are.
   */
  private watched = false;

  constructor(readonly capacity = DEFAULT_EVENT_RING_CAPACITY) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`event ring capacity ${capacity}: expected a positive integer`);
    this.slots = new Array<SluiceEvent | undefined>(capacity);
  }

  /** The id of the newest event (0 before the first). */
  get lastId(): number {
    return this.next - 1;
  }

  /** True once a reader has subscribed: decision events are worth building. */
  get wantsDecisions(): boolean {
    return this.watched;
  }

  publish(kind: Exclude<EventKind, 'gap'>, scope: { readonly grant: string | null; readonly generation: string | null }, data: Readonly<Record<string, unknown>>): SluiceEvent {
    const event: SluiceEvent = { id: this.next, kind, grant: scope.grant, generation: scope.generation, data };
    this.slots[this.next % this.capacity] = event;
    this.next += 1;
    for (const listener of this.listeners) listener(event);
    return event;
  }

  /** The events after `afterId` still in the ring (oldest first), and what was lost before them. */
  since(afterId: number): Backlog {
    const newest = this.lastId;
    if (afterId >= newest) return { events: [], lost: null };
    const oldest = Math.max(1, newest - this.capacity + 1);
    const from = Math.max(afterId + 1, oldest);
    const events: SluiceEvent[] = [];
    for (let id = from; id <= newest; id += 1) {
      const event = this.slots[id % this.capacity];
      if (event !== undefined && event.id === id) events.push(event);
    }
    return { events, lost: afterId + 1 < oldest ? { from: afterId + 1, to: oldest - 1 } : null };
  }

  subscribe(listener: EventListener): () => void {
    this.watched = true;
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  get subscriberCount(): number {
    return this.listeners.size;
  }
}
