// Checks docs/admin-api.md against the admin registries in both directions: every route template has a
// section, and the error table lists exactly the admin error codes (plus the ProxyControl reasons it documents).
import { describe, expect, it } from 'vitest';
import { ADMIN_ROUTES, AdminErrors } from '../../../src/admin/index.js';
import { codeSpan, readDoc, readTables } from '../../architecture/markdown.js';

const doc = readDoc('docs/admin-api.md');
/** Reasons that ProxyControl (not admin/) answers with; documented beside the admin codes. */
const CONTROL_REASONS = ['listen_in_use', 'listen_failed', 'config_invalid', 'grant_from_config', 'ledger_unavailable', 'client_certificate_in_use'];

describe('docs/admin-api.md', () => {
  it('has a section heading for every route', () => {
    const headings = doc.split('\n').filter((line) => line.startsWith('### ')).join('\n');
    for (const route of ADMIN_ROUTES) expect(headings, `${route.method} ${route.template}`).toContain(`\`${route.method} ${route.template}\``);
  });

  it('lists every admin error code with its status, and nothing else', () => {
    const table = readTables(doc).find((t) => t.header[0] === 'error');
    expect(table, 'an error table').toBeDefined();
    const documented = Object.fromEntries((table?.rows ?? []).map((row) => [codeSpan(row[0] ?? '') ?? '', Number(row[1])]));
    const expected: Record<string, number> = Object.fromEntries(Object.entries(AdminErrors).map(([code, spec]) => [code, spec.status]));
    for (const reason of CONTROL_REASONS) expected[reason] = documented[reason] ?? -1;
    expect(documented).toEqual(expected);
  });
});
