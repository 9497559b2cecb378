// Appends lines to a file descriptor in batches, off the event loop: lines are queued as strings and
// joined into one asynchronous write once `minChars` have accumulated or every `flushEveryMs`, with one
// write in flight at a time. Queuing a line costs an array push: no per-line byte counting or string
// concatenation (ADR 0012 measures why this replaced pino's SonicBoom destination for the audit log).
import fs from 'node:fs';

export interface BatchWriterOptions {
  /** A write starts once this many characters are queued (and otherwise on the next tick of the timer). */
  readonly minChars: number;
  readonly flushEveryMs: number;
}

export const DEFAULT_BATCH: BatchWriterOptions = { minChars: 64 * 1024, flushEveryMs: 100 };

const EAGAIN_RETRY_MS = 5;

export class BatchWriter {
  private queue: string[] = [];
  private queuedChars = 0;
  private writing = false;
  private closed = false;
  private idleWaiters: (() => void)[] = [];
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly fd: number,
    private readonly options: BatchWriterOptions,
    private readonly onError: (error: NodeJS.ErrnoException) => void,
  ) {
    this.timer = setInterval(() => this.writeQueued(), options.flushEveryMs);
    this.timer.unref();
  }

  append(line: string): void {
    if (this.closed) return;
    this.queue.push(line);
    this.queuedChars += line.length;
    // While a write is in flight lines keep queuing (never a second writer: lines must not interleave or
    // reorder); the queue is bounded by how fast the disk takes them.
    if (this.queuedChars >= this.options.minChars && !this.writing) this.writeQueued();
  }

  /** Resolves once every line appended so far has been handed to the kernel. */
  flush(): Promise<void> {
    this.writeQueued();
    if (!this.writing) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Flushes, stops the timer and closes the descriptor unless it is stdout or stderr. */
  async close(): Promise<void> {
    await this.flush();
    this.closed = true;
    clearInterval(this.timer);
    if (this.fd > 2) fs.closeSync(this.fd);
  }

  private take(): Buffer | null {
    if (this.queuedChars === 0) return null;
    const data = Buffer.from(this.queue.length === 1 ? this.queue[0]! : this.queue.join(''), 'utf8');
    this.queue = [];
    this.queuedChars = 0;
    return data;
  }

  private writeQueued(): void {
    if (this.writing) return;
    const data = this.take();
    if (data === null) return this.settleIdle();
    this.writing = true;
    this.writeFrom(data, 0);
  }

  private writeFrom(data: Buffer, offset: number): void {
    fs.write(this.fd, data, offset, data.length - offset, null, (error, written) => {
      if (error !== null) {
        // A non-blocking pipe (stdout) that is full: try again shortly, keeping the order.
        if (error.code === 'EAGAIN') return void setTimeout(() => this.writeFrom(data, offset), EAGAIN_RETRY_MS);
        this.onError(error);
      } else if (offset + written < data.length) {
        return this.writeFrom(data, offset + written);
      }
      this.writing = false;
      if (this.queuedChars >= this.options.minChars || this.idleWaiters.length > 0) this.writeQueued();
      else this.settleIdle();
    });
  }

  private settleIdle(): void {
    if (this.writing || this.queuedChars > 0) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const resolve of waiters) resolve();
  }
}
