// Threat: other local users read or forge the audit log (review 2026-12, finding 9). The audit file
// names every principal, destination and pinned address, and it is the record operators trust. Before
// the fix it was opened with the umask's mode (0666 under `umask 000`), and an existing world-readable
// or group/world-writable file was used as it was. Runs with umask 0 on purpose.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildRuntime } from '../../src/app.js';
import { createFileSink } from '../../src/audit/index.js';
import { parseConfigText } from '../../src/config/index.js';
import { stringify } from 'yaml';

let dir: string;
let savedUmask: number;
const warnings: { message: string; fields: object }[] = [];
const hooks = { onError: (): void => undefined, onWarning: (message: string, fields: object): number => warnings.push({ message, fields }) };

beforeEach(() => {
  savedUmask = process.umask(0);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-auditmode-'));
  warnings.length = 0;
});

afterEach(() => {
  process.umask(savedUmask);
  fs.rmSync(dir, { recursive: true, force: true });
});

const modeOf = (file: string): number => fs.statSync(file).mode & 0o7777;

describe('audit.file mode', () => {
  it('creates a new audit file 0600, and its missing directory 0700', async () => {
    const file = path.join(dir, 'logs', 'audit.jsonl');
    const sink = createFileSink(file, hooks);
    await sink.flush();
    expect(modeOf(file)).toBe(0o600);
    expect(modeOf(path.dirname(file))).toBe(0o700);
    expect(warnings).toEqual([]);
  });

  it.each([
    ['0666', 0o666, 'world-writable'],
    ['0644', 0o644, 'world-readable'],
    ['0620', 0o620, 'group-writable'],
    ['0602', 0o602, 'world-writable'],
  ])('narrows an existing %s file to 0600 and warns (%s)', async (_octal, mode, what) => {
    const file = path.join(dir, 'audit.jsonl');
    fs.writeFileSync(file, 'earlier line\n', { mode });
    fs.chmodSync(file, mode);
    const sink = createFileSink(file, hooks);
    await sink.flush();
    expect(modeOf(file)).toBe(0o600);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.message).toContain(file);
    expect(warnings[0]?.message).toContain(what);
    // Appended to, never truncated.
    expect(fs.readFileSync(file, 'utf8')).toBe('earlier line\n');
  });

  it('leaves an existing 0640 file (group may read, nobody else) as it is', async () => {
    const file = path.join(dir, 'audit.jsonl');
    fs.writeFileSync(file, '');
    fs.chmodSync(file, 0o640);
    await createFileSink(file, hooks).flush();
    expect(modeOf(file)).toBe(0o640);
    expect(warnings).toEqual([]);
  });

  it('never changes the mode of a device such as /dev/null', async () => {
    const before = modeOf('/dev/null');
    await createFileSink('/dev/null', hooks).flush();
    expect(modeOf('/dev/null')).toBe(before);
    expect(warnings).toEqual([]);
  });

  it('warns through the operational log when the runtime opens the file', async () => {
    const file = path.join(dir, 'audit.jsonl');
    fs.writeFileSync(file, '');
    fs.chmodSync(file, 0o666);
    const text = stringify({ state: dir, listeners: [{ name: 'shared', listen: '127.0.0.1:0' }], audit: { file } });
    const parsed = parseConfigText(text, path.join(dir, 'c.yaml'), dir);
    if (!parsed.ok) throw new Error('config invalid');
    const logged: { obj: object; msg: string }[] = [];
    const log = { info: () => undefined, warn: (obj: object, msg: string) => void logged.push({ obj, msg }), error: () => undefined };
    const built = await buildRuntime(parsed.config, { env: {}, log });
    if (!built.ok) throw new Error('runtime not built');
    await built.value.runtime.audit.flush();
    built.value.runtime.routes.close();
    await built.value.runtime.forwardAgent.close();
    await built.value.runtime.upstreamAgent.close();
    expect(modeOf(file)).toBe(0o600);
    expect(logged).toEqual([{ obj: expect.objectContaining({ file }), msg: expect.stringContaining('0600') }]);
  });
});
