// Reads the pipe tables of a markdown document so architecture tests can check docs against code
// registries. Understands only what our docs use: `#` headings, pipe tables, and `\|` inside cells.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export interface MarkdownTable {
  /** The text of the nearest heading above the table, without the leading `#`s. */
  readonly heading: string;
  readonly header: readonly string[];
  readonly rows: readonly (readonly string[])[];
}

export function readDoc(relativePath: string): string {
  return readFileSync(path.join(ROOT, relativePath), 'utf8');
}

function splitRow(line: string): string[] {
  const inner = line.trim().replace(/^\|/, '').replace(/\|$/, '');
  return inner.split(/(?<!\\)\|/).map((cell) => cell.trim().replace(/\\\|/g, '|'));
}

const DELIMITER = /^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?$/;

export function readTables(markdown: string): MarkdownTable[] {
  const lines = markdown.split(/\r?\n/);
  const tables: MarkdownTable[] = [];
  let heading = '';
  let inFence = false;
  for (let i = 0; i < lines.length; i += 1) {
    const line = lines[i] ?? '';
    if (line.startsWith('```')) inFence = !inFence;
    if (inFence) continue;
    const h = /^#{1,6}\s+(.*)$/.exec(line);
    if (h !== null) {
      heading = (h[1] ?? '').trim();
      continue;
    }
    if (!line.trim().startsWith('|') || !DELIMITER.test((lines[i + 1] ?? '').trim())) continue;
    const header = splitRow(line);
    const rows: string[][] = [];
    i += 2;
    while (i < lines.length && (lines[i] ?? '').trim().startsWith('|')) {
      rows.push(splitRow(lines[i] ?? ''));
      i += 1;
    }
    i -= 1;
    tables.push({ heading, header, rows });
  }
  return tables;
}

/** The text inside a cell that is exactly one code span, e.g. "`dns.timeoutMs`" → "dns.timeoutMs"; else null. */
export function codeSpan(cell: string): string | null {
  const match = /^`([^`]+)`$/.exec(cell.trim());
  return match === null ? null : (match[1] ?? null);
}
