// Appends lines to a file descriptor in batches, off the event loop. Each line is encoded at once into
// a preallocated batch buffer, from a string or by an encoder that writes its bytes in place (so nothing
// of it outlives the call: queued strings, concatenated from many pieces, survived young-generation
// collections and made them slow), and a batch is written asynchronously once `minBytes` have
// accumulated or every `flushEveryMs`, one write in flight at a time.
// ADR 0012 has the measurements behind this, which replaced pino's SonicBoom destination for the audit log.
import fs from 'node:fs';

export interface BatchWriterOptions {
  /** A write starts once a batch holds this many bytes (and otherwise on the next tick of the timer). */
  readonly minBytes: number;
  readonly flushEveryMs: number;
}

/**
 * Writes one line at `at` (at most the bytes it was given room for) and returns the offset after it.
 * Its arguments are passed beside it, so that no closure is made per line.
 */
export type LineEncoder<A, B, C, D> = (out: Buffer, at: number, a: A, b: B, c: C, d: D) => number;

export const DEFAULT_BATCH: BatchWriterOptions = { minBytes: 64 * 1024, flushEveryMs: 100 };

const EAGAIN_RETRY_MS = 5;
const MAX_SPARE_BATCHES = 2;
// UTF-8 takes at most 3 bytes per UTF-16 code unit.
const MAX_BYTES_PER_UNIT = 3;

export class BatchWriter {
  private batch: Buffer;
  private used = 0;
  /** Filled batches waiting for the write in flight, oldest first. */
  private ready: Buffer[] = [];
  /** Batch buffers whose write has finished, for reuse: no new 128 KiB of external memory per batch. */
  private spare: Buffer[] = [];
  private writing = false;
  /** Destinations to take up once `after` more queued batches are written (replaceDestination). */
  private readonly switches: { after: number; fd: number }[] = [];
  private closed = false;
  private idleWaiters: (() => void)[] = [];
  private readonly timer: NodeJS.Timeout;
  private readonly capacity: number;

  constructor(
    private fd: number,
    private readonly options: BatchWriterOptions,
    private readonly onError: (error: NodeJS.ErrnoException) => void,
  ) {
    this.capacity = Math.max(options.minBytes * 2, 4096);
    this.batch = Buffer.allocUnsafe(this.capacity);
    this.timer = setInterval(() => this.writeNext(true), options.flushEveryMs);
    this.timer.unref();
  }

  append(line: string): void {
    if (this.closed) return;
    const worst = line.length * MAX_BYTES_PER_UNIT;
    if (worst > this.capacity - this.used) {
      this.seal();
      if (worst > this.capacity) {
        this.ready.push(Buffer.from(line, 'utf8'));
        return this.writeNext(false);
      }
    }
    this.used += this.batch.write(line, this.used, 'utf8');
    // While a write is in flight batches queue up behind it: never a second writer, so lines cannot
    // interleave or reorder. The queue is bounded only by how fast the disk takes them.
    if (this.used >= this.options.minBytes) {
      this.seal();
      this.writeNext(false);
    }
  }

  /**
   * Appends one line that `encode` writes in place, in at most `maxBytes`: into the current batch, sealed
   * first when that much might not fit; a line that might not fit a whole batch is encoded into a buffer
   * of its own, queued in order like any batch. Nothing is appended when `encode` throws.
   */
  appendEncoded<A, B, C, D>(maxBytes: number, encode: LineEncoder<A, B, C, D>, a: A, b: B, c: C, d: D): void {
    if (this.closed) return;
    if (maxBytes > this.capacity - this.used) {
      this.seal();
      if (maxBytes > this.capacity) {
        const own = Buffer.allocUnsafe(maxBytes);
        this.ready.push(own.subarray(0, encode(own, 0, a, b, c, d)));
        return this.writeNext(false);
      }
    }
    this.used = encode(this.batch, this.used, a, b, c, d);
    if (this.used >= this.options.minBytes) {
      this.seal();
      this.writeNext(false);
    }
  }

  /** Resolves once every line appended so far has been handed to the kernel. */
  flush(): Promise<void> {
    this.writeNext(true);
    if (!this.writing) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Flushes, stops the timer and closes the descriptor unless it is stdout or stderr. */
  async close(): Promise<void> {
    await this.flush();
    this.switchIfDue();
    this.closed = true;
    clearInterval(this.timer);
    if (this.fd > 2) fs.closeSync(this.fd);
  }

  /** Moves the current batch (if any) to the ready queue and starts a new one. */
  private seal(): void {
    if (this.used === 0) return;
    this.ready.push(this.batch.subarray(0, this.used));
    this.batch = this.spare.pop() ?? Buffer.allocUnsafe(this.capacity);
    this.used = 0;
  }

  /** A written batch's buffer goes back to the spares (lines larger than a batch have their own). */
  private recycle(data: Buffer): void {
    if (data.buffer.byteLength === this.capacity && data.byteOffset === 0 && this.spare.length < MAX_SPARE_BATCHES) {
      this.spare.push(Buffer.from(data.buffer, 0, this.capacity));
    }
  }

  /**
   * Lines appended from now on go to `fd` (the audit file reopened after logrotate moved it, or another
   * destination); lines appended before still go to the old one, in order, which is then closed.
   */
  replaceDestination(fd: number): void {
    if (this.closed) {
      if (fd > 2) fs.closeSync(fd);
      return;
    }
    this.seal();
    this.switches.push({ after: this.ready.length, fd });
    this.writeNext(false);
  }

  private writeNext(sealPartial: boolean): void {
    if (this.writing) return;
    if (this.ready.length === 0 && sealPartial) this.seal();
    this.switchIfDue();
    const data = this.ready.shift();
    if (data === undefined) return this.settleIdle();
    for (const pending of this.switches) pending.after -= 1;
    this.writing = true;
    this.writeFrom(data, 0);
  }

  /** Takes up the next destination once every batch queued before it was written to the old one. */
  private switchIfDue(): void {
    while (this.switches.length > 0 && (this.switches[0]?.after ?? 1) <= 0) {
      const next = this.switches.shift();
      if (next === undefined) return;
      if (this.fd > 2 && this.fd !== next.fd) fs.closeSync(this.fd);
      this.fd = next.fd;
    }
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
      this.recycle(data);
      this.writeNext(this.idleWaiters.length > 0);
    });
  }

  private settleIdle(): void {
    if (this.writing || this.used > 0 || this.ready.length > 0) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const resolve of waiters) resolve();
  }
}
