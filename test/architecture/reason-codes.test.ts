// docs/reason-codes.md must match the Reasons and CloseReasons tables of src/core/reason.ts in both
// directions (fastify's errors.test pattern): every code documented once, with its status and message,
// and no documented code that the code does not know. The Proxy-Status error types are checked too, and
// the fix of each code (src/core/remedy.ts): documented as written, and naming only CLI commands and
// flags that main.ts declares and config keys that docs/configuration.md documents (never an invented one).
import { describe, expect, it } from 'vitest';
import { AuditOnlyReasons, CloseReasons, Reasons, Remedies, sentReason, UNGRANTABLE_CLASS_REMEDY, type ReasonCode } from '../../src/core/index.js';
import { proxyStatus } from '../../src/core/index.js';
import { codeSpan, readDoc, readTables, type MarkdownTable } from './markdown.js';

const DOC = 'docs/reason-codes.md';
const tables = readTables(readDoc(DOC));

function tableUnder(heading: string): MarkdownTable {
  const table = tables.find((t) => t.heading === heading);
  if (table === undefined) throw new Error(`${DOC} has no table under the heading "${heading}"`);
  return table;
}

/** Rows keyed by the code in their first cell; duplicates are reported, not merged. */
function rowsByCode(table: MarkdownTable): { rows: Map<string, readonly string[]>; duplicates: string[] } {
  const rows = new Map<string, readonly string[]>();
  const duplicates: string[] = [];
  for (const row of table.rows) {
    const code = codeSpan(row[0] ?? '');
    if (code === null) throw new Error(`${DOC} "${table.heading}": first cell is not a \`code\`: ${row.join(' | ')}`);
    if (rows.has(code)) duplicates.push(code);
    rows.set(code, row);
  }
  return { rows, duplicates };
}

describe('docs/reason-codes.md: decision reason codes', () => {
  const table = tableUnder('Decision reason codes');
  const { rows, duplicates } = rowsByCode(table);
  const statusColumn = table.header.indexOf('status');
  const meaningColumn = table.header.indexOf('meaning');

  it('has the columns code, status, meaning, stage', () => {
    expect(table.header).toEqual(['code', 'status', 'meaning', 'stage']);
  });

  it('documents each code once', () => {
    expect(duplicates).toEqual([]);
  });

  it('documents every code of Reasons', () => {
    const missing = Object.keys(Reasons).filter((code) => !rows.has(code));
    expect(missing, `codes missing from ${DOC}`).toEqual([]);
  });

  it('documents no code that Reasons does not have', () => {
    const unknown = [...rows.keys()].filter((code) => !Object.hasOwn(Reasons, code));
    expect(unknown, `codes in ${DOC} that src/core/reason.ts does not declare`).toEqual([]);
  });

  it.each(Object.entries(Reasons))('documents %s with its status and message', (code, spec) => {
    const row = rows.get(code);
    expect(row, `${code} is not documented`).toBeDefined();
    expect(row?.[statusColumn]).toBe(String(spec.status));
    expect(row?.[meaningColumn]).toContain(spec.message);
  });
});

describe('docs/reason-codes.md: close reasons', () => {
  const table = tableUnder('Close reasons');
  const { rows, duplicates } = rowsByCode(table);
  const meaningColumn = table.header.indexOf('meaning');

  it('documents each close reason once, and every one of CloseReasons', () => {
    expect(duplicates).toEqual([]);
    expect(Object.keys(CloseReasons).filter((code) => !rows.has(code))).toEqual([]);
  });

  it('documents no close reason that CloseReasons does not have', () => {
    expect([...rows.keys()].filter((code) => !Object.hasOwn(CloseReasons, code))).toEqual([]);
  });

  it.each(Object.entries(CloseReasons))('documents %s with its message', (code, message) => {
    expect(meaningColumn).toBeGreaterThan(0);
    expect(rows.get(code)?.[meaningColumn]).toContain(message);
  });

  it('keeps close reasons apart from decision reason codes', () => {
    expect(Object.keys(CloseReasons).filter((code) => Object.hasOwn(Reasons, code))).toEqual([]);
  });
});

describe('docs/reason-codes.md: Proxy-Status error types', () => {
  const table = tableUnder('What the client sees');
  const rowsOfDecisionTable = rowsByCode(tableUnder('Decision reason codes')).rows;

  /** error type → codes, as the doc lists them. */
  const documented = new Map<ReasonCode, string>();
  for (const row of table.rows) {
    const type = codeSpan(row[0] ?? '');
    if (type === null) continue;
    for (const match of (row[1] ?? '').matchAll(/`([a-z_]+)`/g)) documented.set(match[1] as ReasonCode, type);
  }

  const sent = (Object.keys(Reasons) as ReasonCode[]).filter((code) => sentReason(code) === code);

  it.each(sent)('documents the Proxy-Status of %s', (code) => {
    const header = proxyStatus(code);
    expect(header).toContain(`details="${code}"`);
    const type = /; error=([a-z_]+);/.exec(header)?.[1];
    expect(documented.get(code), `${code} sends ${header}`).toBe(type);
  });

  it.each(Object.entries(AuditOnlyReasons))('lists no audit-only code (%s is sent as %s), whose row says so', (code, sentAs) => {
    expect(documented.has(code as ReasonCode)).toBe(false);
    expect(Reasons[code as ReasonCode].status).toBe(Reasons[sentAs].status);
    expect(sentReason(sentAs)).toBe(sentAs);
    expect(rowsOfDecisionTable.get(code)?.join(' ')).toMatch(/Audit-only: never sent to a client/);
  });
});

describe('docs/reason-codes.md: how to fix a denial', () => {
  const table = tableUnder('How to fix a denial');
  const { rows, duplicates } = rowsByCode(table);

  it('has the columns code, fix, and documents each code once, every one of Reasons and no other', () => {
    expect(table.header).toEqual(['code', 'fix']);
    expect(duplicates).toEqual([]);
    expect(Object.keys(Reasons).filter((code) => !rows.has(code))).toEqual([]);
    expect([...rows.keys()].filter((code) => !Object.hasOwn(Reasons, code))).toEqual([]);
  });

  it.each(Object.entries(Remedies))('documents the fix of %s as written', (code, fix) => {
    expect(rows.get(code)?.[1]).toContain(`\`${fix}\``);
  });

  it('documents the fix for classes no grant can allow', () => {
    expect(readDoc(DOC)).toContain(`\`${UNGRANTABLE_CLASS_REMEDY}\``);
  });
});

describe('src/core/remedy.ts names only commands, flags and config keys that exist', () => {
  const fixes = [...Object.values(Remedies), UNGRANTABLE_CLASS_REMEDY];
  const main = readDoc('src/main.ts');
  const flags = new Set([...main.matchAll(/\.(?:option|requiredOption)\('(--[a-z-]+)/g)].map((m) => m[1]));
  const commands = new Set([...main.matchAll(/\.command\('([a-z-]+)'\)/g)].map((m) => m[1]));
  const documented = new Set(
    readTables(readDoc('docs/configuration.md'))
      .flatMap((t) => t.rows.map((r) => codeSpan(r[0] ?? '')))
      .filter((k): k is string => k !== null),
  );
  // A grant key is named relative to the grant (`limits.maxBytes on the grant`), as run-time grants spell it.
  const isKey = (key: string): boolean => documented.has(key) || documented.has(`grants[].${key}`);

  it('main.ts and docs/configuration.md were read (the checks below have something to check against)', () => {
    expect(flags.has('--allow-class')).toBe(true);
    expect(commands.has('run')).toBe(true);
    expect(isKey('allowAddressClasses')).toBe(true);
  });

  it.each(fixes)('%s', (fix) => {
    const unknownFlags = [...fix.matchAll(/(?<![\w-])--[a-z][a-z-]*/g)].map((m) => m[0]).filter((flag) => !flags.has(flag));
    expect(unknownFlags, 'flags main.ts does not declare').toEqual([]);
    const unknownCommands = [...fix.matchAll(/\bsluice ([a-z][a-z-]*)(?: ([a-z]+))?/g)]
      .filter((m) => !commands.has(m[1] ?? '') || (m[1] === 'grant' && !commands.has(m[2] ?? '')))
      .map((m) => m[0]);
    expect(unknownCommands, 'sluice commands main.ts does not declare').toEqual([]);
    const dotted = [...fix.matchAll(/\b[a-z][A-Za-z]*(?:\[\])?(?:\.[a-z][A-Za-z]*(?:\[\])?)+/g)].map((m) => m[0]);
    const bare = [...fix.replace(/\b[a-z][A-Za-z]*(?:\[\])?(?:\.[a-z][A-Za-z]*(?:\[\])?)+/g, ' ').matchAll(/\b[a-z]+[A-Z][A-Za-z]*\b/g)].map((m) => m[0]);
    expect([...dotted, ...bare].filter((key) => !isKey(key)), 'config keys docs/configuration.md does not document').toEqual([]);
  });
});
