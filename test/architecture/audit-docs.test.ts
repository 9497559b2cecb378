// docs/audit-log.md documents AuditRecordV1: its two field tables must list exactly DECISION_FIELDS and
// CLOSE_FIELDS of src/audit/record.ts, in the same order, so the published record shape cannot drift.
import { describe, expect, it } from 'vitest';
import { CLOSE_FIELDS, DECISION_FIELDS } from '../../src/audit/index.js';
import { codeSpan, readDoc, readTables } from './markdown.js';

const DOC = 'docs/audit-log.md';
const tables = readTables(readDoc(DOC));

function documentedFields(heading: string): string[] {
  const table = tables.find((t) => t.heading === heading);
  if (table === undefined) throw new Error(`${DOC} has no table under the heading "${heading}"`);
  expect(table.header[0]).toBe('field');
  return table.rows.map((row) => {
    const field = codeSpan(row[0] ?? '');
    if (field === null) throw new Error(`${DOC} "${heading}": first cell is not a \`field\`: ${row.join(' | ')}`);
    return field;
  });
}

describe('docs/audit-log.md', () => {
  it('documents every decision record field, in order', () => {
    expect(documentedFields('Decision record')).toEqual([...DECISION_FIELDS]);
  });

  it('documents every close record field, in order', () => {
    expect(documentedFields('Close record')).toEqual([...CLOSE_FIELDS]);
  });

  it('shows example records that have exactly the documented fields', () => {
    const examples = [...readDoc(DOC).matchAll(/^\{"v":1,.*\}$/gm)].map((m) => JSON.parse(m[0]) as Record<string, unknown>);
    expect(examples.length).toBeGreaterThan(0);
    for (const record of examples) {
      const fields = record['kind'] === 'decision' ? DECISION_FIELDS : CLOSE_FIELDS;
      expect(Object.keys(record)).toEqual([...fields]);
    }
  });
});
