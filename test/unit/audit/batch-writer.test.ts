import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { BatchWriter } from '../../../src/audit/batch-writer.js';

const dirs: string[] = [];
function tempFile(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-batch-'));
  dirs.push(dir);
  return path.join(dir, 'audit.jsonl');
}
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
  vi.restoreAllMocks();
});

/** A line encoder as the sink's are: writes `line` (ASCII) at `at`, returns the offset after it. */
function writeAscii(out: Buffer, at: number, line: string): number {
  for (let i = 0; i < line.length; i++) out[at + i] = line.charCodeAt(i);
  return at + line.length;
}

/** Each write(2) the writer makes, as the text it wrote: one a batch (or a line of its own). */
function recordWrites(): string[] {
  const writes: string[] = [];
  const write = fs.write.bind(fs) as (...args: unknown[]) => void;
  vi.spyOn(fs, 'write').mockImplementation(((...args: unknown[]) => {
    const [, data, offset, length] = args as [number, Buffer, number, number];
    writes.push(data.subarray(offset, offset + length).toString('latin1'));
    write(...args);
  }) as typeof fs.write);
  return writes;
}

describe('BatchWriter', () => {
  it('keeps every line, in order, across many batches, and flush waits for the last', async () => {
    const file = tempFile();
    const errors: Error[] = [];
    const writer = new BatchWriter(fs.openSync(file, 'a'), { minBytes: 1000, flushEveryMs: 10_000 }, (e) => errors.push(e));
    const lines = Array.from({ length: 5000 }, (_, i) => `{"n":${i},"pad":"${'x'.repeat(i % 50)}"}\n`);
    for (const line of lines) writer.append(line);
    await writer.close();
    expect(errors).toEqual([]);
    expect(fs.readFileSync(file, 'utf8')).toBe(lines.join(''));
  });

  it('writes a small batch within the flush interval without being asked', async () => {
    const file = tempFile();
    const writer = new BatchWriter(fs.openSync(file, 'a'), { minBytes: 1 << 20, flushEveryMs: 20 }, () => undefined);
    writer.append('one line\n');
    const deadline = Date.now() + 2_000;
    while (fs.readFileSync(file, 'utf8') === '' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    expect(fs.readFileSync(file, 'utf8')).toBe('one line\n');
    await writer.close();
  });

  it('writes multi-byte text whole (a batch is sized for the worst case of UTF-8)', async () => {
    const file = tempFile();
    const writer = new BatchWriter(fs.openSync(file, 'a'), { minBytes: 10, flushEveryMs: 10_000 }, () => undefined);
    const lines = Array.from({ length: 200 }, (_, i) => `{"host":"bücher-${i}.例え.jp"}\n`);
    for (const line of lines) writer.append(line);
    await writer.close();
    expect(fs.readFileSync(file, 'utf8')).toBe(lines.join(''));
  });

  it('keeps order when a line is larger than a whole batch', async () => {
    const file = tempFile();
    const writer = new BatchWriter(fs.openSync(file, 'a'), { minBytes: 100, flushEveryMs: 10_000 }, () => undefined);
    const lines = Array.from({ length: 60 }, (_, i) => `${i}:${'y'.repeat(i % 3 === 0 ? 9000 : 20)}\n`);
    for (const line of lines) writer.append(line);
    await writer.close();
    expect(fs.readFileSync(file, 'utf8')).toBe(lines.join(''));
  });

  it('reports a failing write and keeps accepting lines', async () => {
    const file = tempFile();
    fs.writeFileSync(file, '');
    const errors: NodeJS.ErrnoException[] = [];
    const writer = new BatchWriter(fs.openSync(file, 'r'), { minBytes: 1, flushEveryMs: 10_000 }, (e) => errors.push(e));
    writer.append('lost\n');
    await writer.flush();
    writer.append('also lost\n');
    await writer.close();
    expect(errors.length).toBeGreaterThanOrEqual(1);
    expect(errors[0]?.code).toBe('EBADF');
  });

  it('drops lines appended after close instead of throwing', async () => {
    const file = tempFile();
    const writer = new BatchWriter(fs.openSync(file, 'a'), { minBytes: 1, flushEveryMs: 10_000 }, () => undefined);
    writer.append('kept\n');
    await writer.close();
    expect(() => writer.append('late\n')).not.toThrow();
    expect(fs.readFileSync(file, 'utf8')).toBe('kept\n');
  });

  describe('appendEncoded (a line written in place by an encoder)', () => {
    // minBytes 3000: a batch holds 6000 bytes (twice minBytes) and is written once it holds 3000.
    const options = { minBytes: 3000, flushEveryMs: 10_000 };

    it('a line whose bound does not fit the rest of the batch goes whole into the next; its bound, not its length, decides', async () => {
      const writes = recordWrites();
      const file = tempFile();
      const writer = new BatchWriter(fs.openSync(file, 'a'), options, () => undefined);
      // Filled in place to 2900 bytes (append would reserve 3 bytes a character).
      const first = `${'a'.repeat(2899)}\n`;
      writer.appendEncoded(first.length, writeAscii, first, undefined, undefined, undefined);
      // 100 bytes written, but 3200 reserved: more than the 3100 left, so the batch is sealed first.
      const second = `${'b'.repeat(99)}\n`;
      writer.appendEncoded(3200, writeAscii, second, undefined, undefined, undefined);
      // Reserved 2000 and it fits the 5900 left in the second batch.
      const third = `${'c'.repeat(49)}\n`;
      writer.appendEncoded(2000, writeAscii, third, undefined, undefined, undefined);
      await writer.close();
      expect(writes).toEqual([first, second + third]);
      expect(fs.readFileSync(file, 'latin1')).toBe(first + second + third);
    });

    it('a line that fits exactly the room left joins the batch', async () => {
      const writes = recordWrites();
      const file = tempFile();
      const writer = new BatchWriter(fs.openSync(file, 'a'), options, () => undefined);
      // Filled in place to 2900 bytes (append would reserve 3 bytes a character).
      const first = `${'a'.repeat(2899)}\n`;
      writer.appendEncoded(first.length, writeAscii, first, undefined, undefined, undefined);
      const second = `${'b'.repeat(3099)}\n`;
      writer.appendEncoded(3100, writeAscii, second, undefined, undefined, undefined);
      await writer.close();
      expect(writes).toEqual([first + second]);
    });

    it('a line whose bound is larger than a batch is written whole, on its own, in order', async () => {
      const writes = recordWrites();
      const file = tempFile();
      const writer = new BatchWriter(fs.openSync(file, 'a'), options, () => undefined);
      const before = 'before\n';
      const big = `${'x'.repeat(7999)}\n`;
      const small = 'small but reserved big\n';
      const after = 'after\n';
      writer.append(before);
      writer.appendEncoded(big.length, writeAscii, big, undefined, undefined, undefined);
      writer.appendEncoded(6001, writeAscii, small, undefined, undefined, undefined);
      writer.append(after);
      await writer.close();
      expect(writes).toEqual([before, big, small, after]);
      expect(fs.readFileSync(file, 'latin1')).toBe(before + big + small + after);
    });

    it('keeps every line in order among string lines across many batches', async () => {
      const file = tempFile();
      const writer = new BatchWriter(fs.openSync(file, 'a'), { minBytes: 1000, flushEveryMs: 10_000 }, () => undefined);
      const lines = Array.from({ length: 3000 }, (_, i) => `{"n":${i},"pad":"${'x'.repeat((i * 7) % 300)}"}\n`);
      lines.forEach((line, i) => {
        if (i % 3 === 0) writer.append(line);
        else writer.appendEncoded(i % 3 === 1 ? line.length : line.length * 6, writeAscii, line, undefined, undefined, undefined);
      });
      await writer.close();
      expect(fs.readFileSync(file, 'latin1')).toBe(lines.join(''));
    });

    it('writes a batch once it holds minBytes, as append does', async () => {
      const writes = recordWrites();
      const writer = new BatchWriter(fs.openSync(tempFile(), 'a'), options, () => undefined);
      const line = `${'z'.repeat(2999)}\n`;
      writer.appendEncoded(line.length, writeAscii, line, undefined, undefined, undefined);
      expect(writes).toEqual([line]);
      await writer.close();
    });

    it('an encoder that throws appends nothing, and the writer goes on', async () => {
      const file = tempFile();
      const writer = new BatchWriter(fs.openSync(file, 'a'), options, () => undefined);
      writer.append('one\n');
      const failing = (out: Buffer, at: number): number => {
        out.write('half a line', at, 'latin1');
        throw new Error('encoder exploded');
      };
      expect(() => writer.appendEncoded(100, failing, undefined, undefined, undefined, undefined)).toThrow('encoder exploded');
      expect(() => writer.appendEncoded(10_000, failing, undefined, undefined, undefined, undefined)).toThrow('encoder exploded');
      writer.appendEncoded(100, writeAscii, 'two\n', undefined, undefined, undefined);
      await writer.close();
      expect(fs.readFileSync(file, 'latin1')).toBe('one\ntwo\n');
    });

    it('drops lines after close, never calling the encoder', async () => {
      const file = tempFile();
      const writer = new BatchWriter(fs.openSync(file, 'a'), options, () => undefined);
      await writer.close();
      const encode = vi.fn(writeAscii);
      writer.appendEncoded(100, encode, 'late\n', undefined, undefined, undefined);
      expect(encode).not.toHaveBeenCalled();
      expect(fs.readFileSync(file, 'latin1')).toBe('');
    });
  });
});

describe('BatchWriter.replaceDestination (logrotate, a reload naming another file)', () => {
  it('lines appended before go to the old descriptor, in order, then it is closed; lines after go to the new one', async () => {
    const oldFile = tempFile();
    const newFile = tempFile();
    const oldFd = fs.openSync(oldFile, 'a');
    const writer = new BatchWriter(oldFd, { minBytes: 64, flushEveryMs: 10_000 }, (e) => {
      throw e;
    });
    // Enough for several sealed batches queued behind a write in flight.
    for (let i = 0; i < 20; i++) writer.append(`before ${i} ${'x'.repeat(20)}\n`);
    writer.replaceDestination(fs.openSync(newFile, 'a'));
    for (let i = 0; i < 5; i++) writer.append(`after ${i}\n`);
    await writer.close();
    const before = fs.readFileSync(oldFile, 'utf8').trim().split('\n');
    expect(before.map((l) => l.split(' ').slice(0, 2).join(' '))).toEqual(Array.from({ length: 20 }, (_, i) => `before ${i}`));
    expect(fs.readFileSync(newFile, 'utf8').trim().split('\n')).toEqual(Array.from({ length: 5 }, (_, i) => `after ${i}`));
    // The old descriptor was closed by the writer.
    expect(() => fs.fstatSync(oldFd)).toThrow();
  });

  it('after close, a new descriptor is closed at once and nothing is written', async () => {
    const file = tempFile();
    const writer = new BatchWriter(fs.openSync(tempFile(), 'a'), { minBytes: 64, flushEveryMs: 10_000 }, () => undefined);
    await writer.close();
    const fd = fs.openSync(file, 'a');
    writer.replaceDestination(fd);
    expect(() => fs.fstatSync(fd)).toThrow();
  });
});
