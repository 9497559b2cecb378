// An incremental Server-Sent Events parser (WHATWG HTML, "Parsing an event stream", section 9.2.6): bytes
// in, whole events out, whatever the chunking. Never does I/O and never interprets an event's data.

export interface SseEvent {
  /** The last event ID when the event was dispatched (`id:` persists until the stream sets another). */
  readonly id: string;
  /** The event carried an `id:` line of its own (else `id` is an earlier event's). */
  readonly hasOwnId: boolean;
  /** `event:`, or `message` when the event named none. */
  readonly event: string;
  /** The `data:` lines joined with `\n`. */
  readonly data: string;
}

/** How much one unfinished line or event may hold before the stream is judged broken. */
export const MAX_SSE_EVENT_CHARS = 1024 * 1024;

export class SseParser {
  /** The ID a reconnect sends as `Last-Event-ID`; carried over from the previous connection's parser. */
  lastEventId: string;
  private readonly decoder = new TextDecoder('utf-8');
  private line = '';
  /** The previous chunk ended in CR: an LF opening this one belongs to that line ending. */
  private afterCr = false;
  private isFirstText = true;
  private data = '';
  private hasData = false;
  private eventType = '';
  private idBuffer: string;
  private hasIdField = false;

  constructor(lastEventId = '', private readonly maxEventChars = MAX_SSE_EVENT_CHARS) {
    this.lastEventId = lastEventId;
    this.idBuffer = lastEventId;
  }

  /** Feeds one chunk; returns the events it completed, oldest first. Throws when an event outgrows the bound. */
  push(chunk: Uint8Array | string): SseEvent[] {
    // stream: true keeps a UTF-8 sequence split across chunks for the next call; the decoder drops a
    // leading byte order mark itself, and one given as text is dropped here.
    let text = typeof chunk === 'string' ? chunk : this.decoder.decode(chunk, { stream: true });
    if (text.length === 0) return [];
    if (this.isFirstText) {
      this.isFirstText = false;
      if (typeof chunk === 'string' && text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    const events: SseEvent[] = [];
    let start = 0;
    if (this.afterCr && text.charCodeAt(0) === 0x0a) start = 1;
    this.afterCr = false;
    for (let i = start; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c !== 0x0a && c !== 0x0d) continue;
      this.line += text.slice(start, i);
      this.processLine(events);
      if (c === 0x0d) {
        if (i + 1 === text.length) this.afterCr = true;
        else if (text.charCodeAt(i + 1) === 0x0a) i++;
      }
      start = i + 1;
    }
    this.line += text.slice(start);
    if (this.line.length + this.data.length > this.maxEventChars) {
      throw new Error(`an event of the stream is larger than ${this.maxEventChars} characters`);
    }
    return events;
  }

  private processLine(events: SseEvent[]): void {
    const line = this.line;
    this.line = '';
    if (line === '') {
      this.dispatch(events);
      return;
    }
    if (line.charCodeAt(0) === 0x3a) return; // `: keep-alive` and every other comment
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.charCodeAt(0) === 0x20) value = value.slice(1);
    switch (field) {
      case 'event':
        this.eventType = value;
        break;
      case 'data':
        this.data = this.hasData ? `${this.data}\n${value}` : value;
        this.hasData = true;
        break;
      case 'id':
        // An id with NULL is ignored, so that a stream cannot make the reconnect header unsendable.
        if (!value.includes('\0')) {
          this.idBuffer = value;
          this.hasIdField = true;
        }
        break;
      default:
        // `retry:` and unknown fields: the reconnect delay is the watcher's own bounded backoff.
        break;
    }
  }

  private dispatch(events: SseEvent[]): void {
    this.lastEventId = this.idBuffer;
    if (this.hasData) events.push({ id: this.lastEventId, hasOwnId: this.hasIdField, event: this.eventType === '' ? 'message' : this.eventType, data: this.data });
    this.hasIdField = false;
    this.data = '';
    this.hasData = false;
    this.eventType = '';
  }
}
