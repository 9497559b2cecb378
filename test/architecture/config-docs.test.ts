// docs/configuration.md must document every key of the config schema and nothing else: the key paths
// are read off the zod schema itself (objects by their shape; optional, default, prefault, nullable and
// pipe unwrapped; arrays of objects as `key[]`), so a new key without docs fails here.
import { describe, expect, it } from 'vitest';
import { configSchema } from '../../src/config/index.js';
import { codeSpan, readDoc, readTables } from './markdown.js';

const DOC = 'docs/configuration.md';

/** The slice of zod 4's internal definition (`schema._zod.def`) that the walk needs. */
interface ZodDef {
  readonly type: string;
  readonly shape?: Readonly<Record<string, unknown>>;
  readonly innerType?: unknown;
  readonly element?: unknown;
  readonly in?: unknown;
  readonly options?: readonly unknown[];
  readonly defaultValue?: unknown;
}

function defOf(schema: unknown): ZodDef {
  const def = (schema as { _zod?: { def?: ZodDef } })._zod?.def;
  if (def === undefined) throw new Error('not a zod 4 schema');
  return def;
}

const WRAPPERS = new Set(['optional', 'default', 'prefault', 'nullable', 'readonly', 'nonoptional', 'catch']);

/** Strips wrappers; returns the inner schema and the first default found on the way, if any. */
function unwrap(schema: unknown): { inner: unknown; hasDefault: boolean; defaultValue: unknown } {
  let current = schema;
  let hasDefault = false;
  let defaultValue: unknown;
  for (let depth = 0; depth < 16; depth += 1) {
    const def = defOf(current);
    if ((def.type === 'default' || def.type === 'prefault') && !hasDefault) {
      hasDefault = true;
      defaultValue = def.defaultValue;
    }
    if (WRAPPERS.has(def.type)) current = def.innerType;
    else if (def.type === 'pipe') current = def.in;
    else return { inner: current, hasDefault, defaultValue };
  }
  throw new Error('schema wrappers nested too deeply');
}

interface SchemaKey {
  readonly path: string;
  readonly hasDefault: boolean;
  readonly defaultValue: unknown;
}

/** Every key path of an object schema, parents before children. */
function keyPaths(objectSchema: unknown, prefix = ''): SchemaKey[] {
  const shape = defOf(objectSchema).shape ?? {};
  const out: SchemaKey[] = [];
  for (const [name, child] of Object.entries(shape)) {
    const path = prefix === '' ? name : `${prefix}.${name}`;
    const { inner, hasDefault, defaultValue } = unwrap(child);
    out.push({ path, hasDefault, defaultValue });
    out.push(...childPaths(inner, path));
  }
  return out;
}

function childPaths(inner: unknown, path: string): SchemaKey[] {
  const def = defOf(inner);
  if (def.type === 'object') return keyPaths(inner, path);
  if (def.type === 'array') {
    const element = unwrap(def.element).inner;
    return defOf(element).type === 'object' ? keyPaths(element, `${path}[]`) : [];
  }
  if (def.type === 'union') {
    // A union that includes an object contributes that object's keys under the same path.
    return (def.options ?? []).flatMap((option) => childPaths(unwrap(option).inner, path));
  }
  return []; // scalars, enums, literals, records (documented as one key), arrays of scalars
}

const schemaKeys = keyPaths(configSchema);
const schemaPaths = new Set(schemaKeys.map((k) => k.path));

const docRows = new Map<string, readonly string[]>();
const docDefaultColumn = new Map<string, number>();
const duplicateRows: string[] = [];
for (const table of readTables(readDoc(DOC))) {
  if (table.header[0] !== 'key') continue;
  for (const row of table.rows) {
    const key = codeSpan(row[0] ?? '');
    if (key === null) throw new Error(`${DOC} "${table.heading}": first cell is not a \`key\`: ${row.join(' | ')}`);
    if (docRows.has(key)) duplicateRows.push(key);
    docRows.set(key, row);
    docDefaultColumn.set(key, table.header.indexOf('default'));
  }
}

describe('docs/configuration.md', () => {
  it('finds the schema keys (walk sanity check)', () => {
    expect(schemaPaths).toContain('dns.timeoutMs');
    expect(schemaPaths).toContain('listeners[].listen');
    expect(schemaPaths).toContain('grants[].limits.maxConcurrent');
    expect(schemaPaths).toContain('route.proxy.url');
  });

  it('documents each key once', () => {
    expect(duplicateRows).toEqual([]);
  });

  it('documents every key of the schema', () => {
    const missing = [...schemaPaths].filter((p) => !docRows.has(p));
    expect(missing, `keys missing from ${DOC}`).toEqual([]);
  });

  it('documents no key that the schema does not have', () => {
    const unknown = [...docRows.keys()].filter((p) => !schemaPaths.has(p));
    expect(unknown, `keys in ${DOC} that src/config/schema.ts does not accept`).toEqual([]);
  });

  const scalarDefaults = schemaKeys.filter(
    (k) => k.hasDefault && (typeof k.defaultValue !== 'object' || (Array.isArray(k.defaultValue) && k.defaultValue.length === 0)),
  );
  it.each(scalarDefaults.map((k) => [k.path, k.defaultValue] as const))('documents the default of %s as %j', (path, value) => {
    const row = docRows.get(path);
    const column = docDefaultColumn.get(path) ?? -1;
    expect(column, 'the table has a default column').toBeGreaterThan(0);
    const cell = (row?.[column] ?? '').replace(/`/g, '');
    expect(cell).toBe(Array.isArray(value) ? '[]' : String(value));
  });
});
