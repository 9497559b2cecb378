// ReusedReads and ReadBufferPool, driven the way Node drives `onread` (buffer() after the handle is made
// and after every read, the callback in between). Threat: a read buffer reused while a view of it is still
// queued for writing overwrites bytes not yet sent (silent corruption of a tunnel's stream); a pool
// without a bound keeps memory no tunnel uses.
import { describe, expect, it } from 'vitest';
import { ReadBufferPool, ReusedReads, SHRINK_BELOW_BYTES, type ReadTarget } from '../../../src/core/index.js';

const SHARED = 1024;
const OWN = 64 * 1024;

/** A target that records what it got and, per chunk, whether to hold it and what to answer. */
class Recorder implements ReadTarget {
  readonly chunks: { chunk: Buffer; lent: boolean }[] = [];
  hold = false;
  answer = true;

  readReused(chunk: Buffer, reads: ReusedReads, lent: boolean): boolean {
    this.chunks.push({ chunk, lent });
    if (this.hold && lent) reads.held = true;
    return this.answer;
  }
}

/** Fills the buffer Node would read into with `bytes` bytes of `fill`, calls the callback, asks for the next buffer. */
function readInto(reads: ReusedReads, buffer: Buffer, bytes: number, fill: number): { answer: boolean; next: Buffer } {
  buffer.fill(fill, 0, bytes);
  const answer = reads.read(bytes, buffer);
  return { answer, next: reads.buffer() };
}

function setup(maxFree = 4): { pool: ReadBufferPool; shared: Buffer; reads: ReusedReads; target: Recorder; first: Buffer } {
  const pool = new ReadBufferPool(OWN, maxFree);
  const shared = Buffer.alloc(SHARED);
  const reads = new ReusedReads(pool, shared);
  const target = new Recorder();
  reads.attach(target);
  return { pool, shared, reads, target, first: reads.buffer() };
}

describe('ReusedReads', () => {
  it('reads into the shared buffer until a full read, and never lends a view of it', () => {
    const { shared, target, reads, first } = setup();
    expect(first).toBe(shared);
    const { next } = readInto(reads, first, 100, 1);
    expect(next).toBe(shared);
    const got = target.chunks[0];
    expect(got?.lent).toBe(false);
    expect(got?.chunk.buffer).not.toBe(shared.buffer);
    shared.fill(9);
    expect(got?.chunk.equals(Buffer.alloc(100, 1))).toBe(true);
  });

  it('moves to an own pooled buffer after a full read of the shared one, and lends views of it', () => {
    const { shared, target, reads, first } = setup();
    const { next } = readInto(reads, first, SHARED, 1);
    expect(next).not.toBe(shared);
    expect(next.length).toBe(OWN);
    const again = readInto(reads, next, OWN, 2).next;
    expect(again).toBe(next);
    expect(target.chunks[1]?.lent).toBe(true);
    expect(target.chunks[1]?.chunk.buffer).toBe(next.buffer);
  });

  it('never reads into a held buffer again, nor gives it to the pool', () => {
    const { pool, target, reads, first } = setup();
    const own = readInto(reads, first, SHARED, 1).next;
    target.hold = true;
    const next = readInto(reads, own, OWN, 2).next;
    expect(next).not.toBe(own);
    expect(next.length).toBe(OWN);
    target.hold = false;
    reads.release();
    expect(pool.freeCount).toBe(1);
    expect(pool.take()).toBe(next);
    expect(pool.take()).not.toBe(own);
  });

  it('gives its own buffer back and reads into the shared one after a small read', () => {
    const { pool, shared, reads, first } = setup();
    const own = readInto(reads, first, SHARED, 1).next;
    const next = readInto(reads, own, SHRINK_BELOW_BYTES - 1, 2).next;
    expect(next).toBe(shared);
    expect(pool.freeCount).toBe(1);
  });

  it('a small read that is held drops the buffer instead of pooling it', () => {
    const { pool, shared, reads, target, first } = setup();
    const own = readInto(reads, first, SHARED, 1).next;
    target.hold = true;
    expect(readInto(reads, own, 10, 2).next).toBe(shared);
    expect(pool.freeCount).toBe(0);
  });

  it('copies what was read before a target attached, stops reading, and hands it over in order', () => {
    const pool = new ReadBufferPool(OWN, 4);
    const shared = Buffer.alloc(SHARED);
    const reads = new ReusedReads(pool, shared);
    const first = reads.buffer();
    expect(readInto(reads, first, 5, 0x61).answer).toBe(false);
    expect(readInto(reads, first, 3, 0x62).answer).toBe(false);
    shared.fill(0);
    expect(reads.attach(new Recorder())?.toString()).toBe('aaaaabbb');
    expect(reads.attach(new Recorder())).toBe(null);
  });

  it('passes the target’s answer on (false stops the socket reading)', () => {
    const { reads, target, first } = setup();
    target.answer = false;
    expect(readInto(reads, first, 10, 1).answer).toBe(false);
  });

  it('returns its own buffer to the pool on release, once', () => {
    const { pool, reads, first } = setup();
    readInto(reads, first, SHARED, 1);
    reads.release();
    reads.release();
    expect(pool.freeCount).toBe(1);
  });
});

describe('ReadBufferPool', () => {
  it('reuses a given buffer and keeps at most maxFree', () => {
    const pool = new ReadBufferPool(OWN, 2);
    const taken = [pool.take(), pool.take(), pool.take()];
    for (const b of taken) pool.give(b);
    expect(pool.freeCount).toBe(2);
    const again = pool.take();
    expect(taken).toContain(again);
  });

  it('refuses a buffer of another size', () => {
    const pool = new ReadBufferPool(OWN, 2);
    pool.give(Buffer.alloc(OWN - 1));
    expect(pool.freeCount).toBe(0);
  });
});
