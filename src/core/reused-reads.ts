// Read buffers for a tunnel's dialed socket that are reused instead of allocated per read (ADR 0022).
// Node's default read path allocates a fresh ArrayBuffer for every read; at 64 KiB a read that is
// external memory, which forces a scavenge about every 32 MiB relayed and, with a heap of Sluice's size,
// a full mark-compact with it (performance review 2026-12-04 §2.2). Node's documented `onread` option of
// net.connect() reads into memory the caller gives instead. Memory only: no I/O, no node: import.
//
// The rule that keeps it correct: a buffer is never read into again while any view of it may still be
// referenced. Views of the shared buffer never leave `read()` (they are copied); a view of a socket's
// own buffer may go to the write queue of the other socket, and the reader then marks it `held`, after
// which the buffer is dropped (left to the garbage collector) and never given back to the pool.

/**
 * How much a socket buffers before write() reports backpressure (and, for accepted sockets, how much it
 * reads ahead). Node's 16 KiB default is smaller than one 64 KiB read, so every relayed chunk paused the
 * reading side and resumed it on 'drain': measured in bench/ (bulk, one stream down) at 0.6-0.8x the
 * Node floor, against 1.1-1.5x with 128 KiB (ADR 0012). The cost is memory only under backpressure: at
 * most this much plus one read per direction of a tunnel whose reader is slow.
 */
export const SOCKET_HIGH_WATER_MARK = 128 * 1024;

/** Size of the one buffer every socket reads into until it moves bulk: Node's own read size. */
export const SHARED_READ_BYTES = 64 * 1024;
/** Size of a socket's own buffer once it moves bulk (one full read of the shared buffer). */
export const OWN_READ_BYTES = 256 * 1024;
/** A read smaller than this into a socket's own buffer gives the buffer back: the burst is over. */
export const SHRINK_BELOW_BYTES = 16 * 1024;
/** Free own buffers kept for the next bulk socket: at most 4 MiB held while nothing moves. */
export const MAX_FREE_READ_BUFFERS = 16;

/** A bounded free list of equal-sized read buffers. */
export class ReadBufferPool {
  private readonly free: Buffer[] = [];

  constructor(
    readonly bytes: number,
    readonly maxFree: number,
  ) {}

  get freeCount(): number {
    return this.free.length;
  }

  take(): Buffer {
    return this.free.pop() ?? Buffer.allocUnsafeSlow(this.bytes);
  }

  /** Only a buffer no view of which can still be referenced may be given back. */
  give(buffer: Buffer): void {
    if (buffer.length === this.bytes && this.free.length < this.maxFree) this.free.push(buffer);
  }
}

/** Where a socket's reads go once its tunnel attached; false stops reading until the tunnel resumes it. */
export interface ReadTarget {
  /** `lent`: the chunk is a view of the socket's own buffer (set `held` if it outlives the call). */
  readReused(chunk: Buffer, reads: ReusedReads, lent: boolean): boolean;
}

export const REUSED_READS = Symbol('sluice.reusedReads');
type ReusedReadsSocket = object & { [REUSED_READS]?: ReusedReads };

export const defaultReadPool = new ReadBufferPool(OWN_READ_BYTES, MAX_FREE_READ_BUFFERS);
let defaultShared: Buffer | null = null;
function sharedBuffer(): Buffer {
  return (defaultShared ??= Buffer.allocUnsafeSlow(SHARED_READ_BYTES));
}

/** `onread.callback` for net.connect(): Node calls it with the socket as `this`. */
export function onReusedRead(this: ReusedReadsSocket, bytes: number, buffer: Uint8Array): boolean {
  const reads = this[REUSED_READS];
  return reads === undefined ? false : reads.read(bytes, buffer);
}

/** The reused-read state a dial gave `socket`, if any. */
export function reusedReadsOf(socket: object): ReusedReads | undefined {
  return (socket as ReusedReadsSocket)[REUSED_READS];
}

/**
 * One socket's reads: into the shared buffer while it is idle or moves little (each chunk copied, as
 * small as today's), into its own pooled buffer after a full read (chunks lent as views, no copy).
 */
export class ReusedReads {
  /** Set by the target when a lent chunk is still referenced after readReused() returned. */
  held = false;
  private own: Buffer | null = null;
  private grow = false;
  private shrink = false;
  private target: ReadTarget | null = null;
  private early: Buffer | null = null;
  /** `onread.buffer`: Node calls it once when the handle is made and again after every read. */
  readonly buffer = (): Buffer => this.next();

  constructor(
    private readonly pool: ReadBufferPool = defaultReadPool,
    private readonly shared: Buffer = sharedBuffer(),
  ) {}

  /** Bytes read before a target attached, waiting for it. */
  get earlyBytes(): number {
    return this.early?.length ?? 0;
  }

  /** Registers this state on `socket` so onReusedRead finds it. */
  bind(socket: object): this {
    (socket as ReusedReadsSocket)[REUSED_READS] = this;
    return this;
  }

  read(bytes: number, buffer: Uint8Array): boolean {
    const own = this.own;
    if (own === null || buffer !== own) {
      // The shared buffer is read into by every socket: nothing may keep a view of it past this call.
      if (bytes === buffer.length) this.grow = true;
      return this.deliver(Buffer.from(buffer.subarray(0, bytes)), false);
    }
    if (bytes < SHRINK_BELOW_BYTES) this.shrink = true;
    return this.deliver(own.subarray(0, bytes), true);
  }

  /**
   * Attaches the tunnel: later reads go to `target`. Returns what was read before (a copy), which the
   * tunnel relays first; reading stopped after it and starts again when the tunnel resumes the socket.
   */
  attach(target: ReadTarget): Buffer | null {
    this.target = target;
    const early = this.early;
    this.early = null;
    return early;
  }

  /** The socket is closed (no read can come): its own buffer goes back to the pool unless held. */
  release(): void {
    const own = this.own;
    this.own = null;
    this.target = null;
    this.early = null;
    if (own !== null && !this.held) this.pool.give(own);
    this.held = false;
  }

  private deliver(chunk: Buffer, lent: boolean): boolean {
    const target = this.target;
    if (target !== null) return target.readReused(chunk, this, lent);
    // Before the tunnel attached: keep a copy and stop reading (returning false stops the handle).
    const copy = lent ? Buffer.from(chunk) : chunk;
    this.early = this.early === null ? copy : Buffer.concat([this.early, copy]);
    return false;
  }

  private next(): Buffer {
    let own = this.own;
    if (own !== null && this.held) {
      // A view of it is still queued: it is never read into or pooled again.
      own = this.shrink ? null : this.pool.take();
      this.held = false;
    } else if (own !== null && this.shrink) {
      this.pool.give(own);
      own = null;
    } else if (own === null && this.grow) {
      own = this.pool.take();
    }
    this.grow = false;
    this.shrink = false;
    this.own = own;
    return own ?? this.shared;
  }
}
