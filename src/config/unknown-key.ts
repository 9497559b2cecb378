// Names an unknown config key the way an operator can fix it: the keys allowed at that place, read from
// the schema itself (so the suggestion never drifts from what is accepted), and the closest one.
import { configSchema } from './schema.js';

/** The part of a zod schema's internals walked here (zod 4: every schema carries `_zod.def`). */
interface SchemaNode {
  readonly _zod: { readonly def: SchemaDef };
}
interface SchemaDef {
  readonly type: string;
  readonly innerType?: SchemaNode;
  readonly in?: SchemaNode;
  readonly shape?: Readonly<Record<string, SchemaNode>>;
  readonly element?: SchemaNode;
  readonly valueType?: SchemaNode;
}

const WRAPPERS = new Set(['optional', 'default', 'prefault', 'nullable', 'readonly', 'catch', 'nonoptional']);

function unwrap(node: SchemaNode): SchemaNode {
  let current = node;
  for (;;) {
    const def = current._zod.def;
    if (WRAPPERS.has(def.type) && def.innerType !== undefined) current = def.innerType;
    else if (def.type === 'pipe' && def.in !== undefined) current = def.in;
    else return current;
  }
}

/** The keys the config schema allows in the object at `path` (`['grants', 1]` → a grant's keys); [] if none. */
export function knownKeysAt(path: readonly PropertyKey[], root: SchemaNode = configSchema as unknown as SchemaNode): string[] {
  let node: SchemaNode | undefined = root;
  for (const part of path) {
    const def: SchemaDef = unwrap(node)._zod.def;
    if (def.type === 'object') node = def.shape?.[String(part)];
    else if (def.type === 'array') node = def.element;
    else if (def.type === 'record') node = def.valueType;
    else return [];
    if (node === undefined) return [];
  }
  const def = unwrap(node)._zod.def;
  return def.type === 'object' && def.shape !== undefined ? Object.keys(def.shape) : [];
}

/** Edit distance, case-insensitive (`timeoutMz` → `timeoutMs` is 1, `TimeoutMs` is 0). */
function distance(a: string, b: string): number {
  const x = a.toLowerCase();
  const y = b.toLowerCase();
  let previous = Array.from({ length: y.length + 1 }, (_, j) => j);
  for (let i = 1; i <= x.length; i++) {
    const row = [i];
    for (let j = 1; j <= y.length; j++) row.push(Math.min((previous[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (previous[j - 1] ?? 0) + (x[i - 1] === y[j - 1] ? 0 : 1)));
    previous = row;
  }
  return previous[y.length] ?? 0;
}

/** The closest allowed key within a third of its length (at least 2 edits), or null. */
export function closestKey(key: string, known: readonly string[]): string | null {
  let best: string | null = null;
  let bestDistance = Math.max(2, Math.floor(key.length / 3)) + 1;
  for (const candidate of known) {
    const d = distance(key, candidate);
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

export function unknownKeyMessage(key: string, known: readonly string[]): string {
  const closest = closestKey(key, known);
  if (closest !== null) return `unknown key; did you mean "${closest}"?`;
  return known.length === 0 ? 'unknown key' : `unknown key; expected one of ${known.join(', ')}`;
}
