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

export interface FencedBlock {
  /** The text of the nearest heading above the block, without the leading `#`s. */
  readonly heading: string;
  /** What follows the opening fence (`yaml`, `sh`, or ''). */
  readonly info: string;
  readonly text: string;
  /** 1-based line of the opening fence, for messages. */
  readonly line: number;
}

/** Every fenced code block (```) of a markdown document; indented fences (inside list items) count too. */
export function readFencedBlocks(markdown: string): FencedBlock[] {
  const lines = markdown.split(/\r?\n/);
  const blocks: FencedBlock[] = [];
  let heading = '';
  for (let i = 0; i < lines.length; i += 1) {
    const line = lines[i] ?? '';
    const h = /^#{1,6}\s+(.*)$/.exec(line);
    if (h !== null) {
      heading = (h[1] ?? '').trim();
      continue;
    }
    const open = /^(\s*)```(.*)$/.exec(line);
    if (open === null) continue;
    const indent = open[1]?.length ?? 0;
    const body: string[] = [];
    let j = i + 1;
    while (j < lines.length && !/^\s*```\s*$/.test(lines[j] ?? '')) {
      body.push((lines[j] ?? '').slice(Math.min(indent, /^\s*/.exec(lines[j] ?? '')?.[0].length ?? 0)));
      j += 1;
    }
    blocks.push({ heading, info: (open[2] ?? '').trim(), text: body.join('\n'), line: i + 1 });
    i = j;
  }
  return blocks;
}
