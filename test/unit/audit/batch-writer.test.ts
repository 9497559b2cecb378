import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BatchWriter } from '../../../src/audit/batch-writer.js';

const dirs: string[] = [];
function tempFile(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-batch-'));
  dirs.push(dir);
  return path.join(dir, 'audit.jsonl');
}
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

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
});
