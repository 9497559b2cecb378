// Persists the ledger's state file atomically: write a temporary file (mode 0600), fsync it, rename it
// over the old one, fsync the directory. A crash (kill -9) at any point leaves the old or the new file,
// never a torn one. Holds token hashes only, never a token. Read back only while still 0600 and
// Sluice's own (read-state-file.ts).
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { readStateFile } from './read-state-file.js';

export const LEDGER_FILE = 'ledger.json';
/** What each grant used (budgets across restarts on the file store; usage-file.ts). */
export const USAGE_FILE = 'usage.json';

export class LedgerStore {
  private queue: Promise<void> = Promise.resolve();

  /** `owner`: Sluice's (effective) uid, the owner of the files it writes; any other owner is refused. */
  constructor(
    readonly dir: string,
    private readonly owner: number,
    private readonly name: string = LEDGER_FILE,
  ) {}

  get file(): string {
    return path.join(this.dir, this.name);
  }

  /** The parsed file, or null when there is none; ERR_LEDGER_FILE_UNSAFE when someone else could have written it. */
  async read(): Promise<unknown> {
    const text = await readStateFile(this.file, this.owner);
    return text === null ? null : (JSON.parse(text) as unknown);
  }

  /** Writes are serialized: each one sees the state after the previous one. */
  write(state: unknown): Promise<void> {
    const text = `${JSON.stringify(state, null, 1)}\n`;
    const next = this.queue.then(() => this.writeNow(text));
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async writeNow(text: string): Promise<void> {
    await fs.mkdir(this.dir, { recursive: true, mode: 0o700 });
    const tmp = `${this.file}.tmp-${randomBytes(6).toString('hex')}`;
    const handle = await fs.open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC, 0o600);
    try {
      await handle.writeFile(text, 'utf8');
      await handle.sync();
    } finally {
      await handle.close();
    }
    await fs.rename(tmp, this.file);
    const dir = await fs.open(this.dir, constants.O_RDONLY);
    try {
      await dir.sync();
    } finally {
      await dir.close();
    }
  }
}
