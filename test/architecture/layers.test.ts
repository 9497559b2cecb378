// Enforces the layering rule of docs/architecture.md by scanning the import specifiers of
// src/**/*.ts with a regex (type-only imports and re-exports included). No dependency, no TS compiler:
// 1. a file imports its own module, or the index.ts of a module in a strictly lower layer;
// 2. modules in the same layer never import each other;
// 3. only main.ts touches process; only egress/ opens outbound connections; only resolve/ uses node:dns;
//    only listen/ calls listen(), and only proxy/ and admin/ create servers; core/ does no I/O;
// 4. each third-party runtime package is imported by exactly one module;
// 5. a module's rooms (ROOMS) import only their own room and the rooms below it; no room imports the root.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { LAYERS, ROOMS } from './layers.js';
import { ROOT, codeSpan, readDoc, readTables } from './markdown.js';

const SRC = path.join(ROOT, 'src');

/** The process shells: the only files that touch process; sandbox-init.ts also listens and connects. */
const SHELLS = ['main.ts', 'sandbox-init.ts'];

/** Each third-party runtime package and the one module allowed to import it (docs/architecture.md). */
const PACKAGE_OWNERS: Readonly<Record<string, string>> = {
  yaml: 'yaml-text',
  zod: 'config',
  undici: 'relay',
  'pac-resolver': 'route',
  'quickjs-wasi': 'route',
  'ipaddr.js': 'resolve',
  'lru-cache': 'resolve',
  pino: 'audit',
  'prom-client': 'telemetry',
  commander: 'main',
  ioredis: 'ledger',
};

interface SourceFile {
  /** Path relative to src/, with forward slashes, e.g. `proxy/ingress/server.ts`. */
  readonly rel: string;
  readonly module: string;
  readonly text: string;
  /** The text without comment lines, for the string checks of rule 3. */
  readonly code: string;
}

function moduleOf(rel: string): string {
  const first = rel.split('/')[0] ?? '';
  return /\.(ts|js)$/.test(first) ? first.slice(0, -3) : first;
}

function stripComments(text: string): string {
  return text
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .split('\n')
    .map((line) => (/^\s*\/\//.test(line) ? '' : line))
    .join('\n');
}

const files: SourceFile[] = readdirSync(SRC, { recursive: true, encoding: 'utf8' })
  .map((entry) => entry.split(path.sep).join('/'))
  .filter((rel) => rel.endsWith('.ts') && !rel.endsWith('.d.ts'))
  .sort()
  .map((rel) => {
    const text = readFileSync(path.join(SRC, rel), 'utf8');
    return { rel, module: moduleOf(rel), text, code: stripComments(text) };
  });

// `import … from '…'`, `import type … from '…'`, `export … from '…'` (statements start a line; the
// clause may span lines), side-effect `import '…'`, and `import('…')` in types or dynamic imports.
const SPECIFIER_PATTERNS = [
  /^\s*(?:import|export)\s[^;'"]*?\sfrom\s*['"]([^'"]+)['"]/gm,
  /^\s*import\s*['"]([^'"]+)['"]/gm,
  /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g,
];

function specifiers(text: string): string[] {
  const found: string[] = [];
  for (const pattern of SPECIFIER_PATTERNS) for (const m of text.matchAll(pattern)) found.push(m[1] ?? '');
  return found;
}

function packageName(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : (parts[0] ?? specifier);
}

interface Edge {
  readonly from: SourceFile;
  readonly specifier: string;
}

const edges: Edge[] = files.flatMap((from) => specifiers(from.code).map((specifier) => ({ from, specifier })));

/** Checks one relative import against rules 1 and 2; returns the violation, or null. */
function relativeViolation(edge: Edge): string | null {
  const { from, specifier } = edge;
  const target = path.posix.normalize(path.posix.join(path.posix.dirname(from.rel), specifier));
  if (target.startsWith('../')) return `${from.rel} imports ${specifier}, outside src/`;
  const targetModule = moduleOf(target);
  if (targetModule === from.module) return null;
  const fromLayer = LAYERS[from.module];
  const toLayer = LAYERS[targetModule];
  if (fromLayer === undefined || toLayer === undefined) return `${from.rel} → ${specifier}: module without a layer`;
  if (toLayer === fromLayer) return `${from.rel} imports ${specifier}: ${from.module} and ${targetModule} are both layer ${fromLayer}`;
  if (toLayer > fromLayer) return `${from.rel} (layer ${fromLayer}) imports ${specifier} (layer ${toLayer}): imports go downward only`;
  // app.ts and main.ts are single-file modules: the file is the module's face.
  const isFace = target === `${targetModule}/index.js` || target === `${targetModule}.js`;
  if (!isFace) return `${from.rel} imports ${specifier}: import another module only through its index.ts`;
  return null;
}

describe('layering (docs/architecture.md)', () => {
  it('scans the sources', () => {
    expect(files.length).toBeGreaterThan(10);
    expect(edges.length).toBeGreaterThan(20);
  });

  it('gives every module under src/ a layer', () => {
    expect([...new Set(files.map((f) => f.module))].filter((m) => LAYERS[m] === undefined)).toEqual([]);
  });

  it('rules 1-2: imports go to the own module or to the index.ts of a strictly lower layer', () => {
    const violations = edges
      .filter((e) => e.specifier.startsWith('.'))
      .map(relativeViolation)
      .filter((v): v is string => v !== null);
    expect(violations).toEqual([]);
  });

  it('rule 4: each third-party package is imported only by the module that owns it', () => {
    const violations = edges
      .filter((e) => !e.specifier.startsWith('.') && !e.specifier.startsWith('node:'))
      .flatMap((e) => {
        const name = packageName(e.specifier);
        const owner = PACKAGE_OWNERS[name];
        if (owner === undefined) return [`${e.from.rel} imports ${e.specifier}: not a declared runtime package (or a builtin without node:)`];
        return owner === e.from.module ? [] : [`${e.from.rel} imports ${name}, which only ${owner} may import`];
      });
    expect(violations).toEqual([]);
  });

  it('rule 4: package.json runtime dependencies are exactly the owned packages', () => {
    const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> };
    expect(Object.keys(pkg.dependencies ?? {}).sort()).toEqual(Object.keys(PACKAGE_OWNERS).sort());
  });

  it('rule 4: docs/architecture.md records the same owner for each package', () => {
    const table = readTables(readDoc('docs/architecture.md')).find((t) => t.header[0] === 'package');
    expect(table, 'docs/architecture.md has a package table').toBeDefined();
    const documented = Object.fromEntries(
      (table?.rows ?? []).map((row) => [codeSpan(row[0] ?? '') ?? '', (codeSpan(row[1] ?? '') ?? '').replace(/\/$|\.ts$/, '')]),
    );
    expect(documented).toEqual(PACKAGE_OWNERS);
  });

  it('sandbox-init.ts imports only node: builtins (it must start in one Node boot, without the proxy)', () => {
    const imports = edges.filter((e) => e.from.rel === 'sandbox-init.ts').map((e) => e.specifier);
    expect(imports.length).toBeGreaterThan(0);
    expect(imports.filter((s) => !s.startsWith('node:'))).toEqual([]);
  });

  it('rule 3: only the process shells (main.ts, sandbox-init.ts) touch process', () => {
    // Exceptions: process.hrtime is a read of the monotonic clock for hop timings (src/proxy/hop/hop.ts), and
    // process.versions the running Node's version (relay/adopt-reused-reads.ts switches only on tested
    // majors), not argv, env, signals or exit; they are allowed anywhere. Anything else named process is reported.
    const violations = files
      .filter((f) => !SHELLS.includes(f.rel))
      .flatMap((f) =>
        f.code
          .split('\n')
          .map((line, i) => ({ line, n: i + 1 }))
          .filter(({ line }) => /\bprocess\b(?!\.(?:hrtime|versions)\b)/.test(line) || /['"]node:process['"]/.test(line))
          .map(({ line, n }) => `${f.rel}:${n}: ${line.trim()}`),
      );
    expect(violations).toEqual([]);
  });

  it('rule 3: only egress/ opens outbound connections (net.connect)', () => {
    const violations = files.filter((f) => f.module !== 'egress' && f.rel !== 'sandbox-init.ts' && f.code.includes('net.connect(')).map((f) => f.rel);
    expect(violations).toEqual([]);
  });

  it('rule 3: only resolve/ talks to node:dns (everything else goes through the LookupAll port)', () => {
    const violations = edges.filter((e) => e.specifier.startsWith('node:dns') && e.from.module !== 'resolve').map((e) => e.from.rel);
    expect(violations).toEqual([]);
  });

  it('rule 3: only listen/ calls listen() (binding a TCP address, or a Unix socket with the mode Sluice chose)', () => {
    const violations = files.filter((f) => f.module !== 'listen' && f.rel !== 'sandbox-init.ts' && /\.listen\(/.test(f.code)).map((f) => f.rel);
    expect(violations).toEqual([]);
  });

  it('rule 3: only proxy/ and admin/ create servers (listen/ binds the servers they create)', () => {
    const violations = files
      .filter((f) => f.module !== 'proxy' && f.module !== 'admin' && f.rel !== 'sandbox-init.ts' && /\bcreateServer\(/.test(f.code))
      .map((f) => f.rel);
    expect(violations).toEqual([]);
  });

  it('rule 3: core/ does no I/O (imports no node: module)', () => {
    const violations = edges.filter((e) => e.from.module === 'core' && e.specifier.startsWith('node:')).map((e) => `${e.from.rel} → ${e.specifier}`);
    expect(violations).toEqual([]);
  });
});

describe('rule 5: the rooms of a module (docs/architecture.md)', () => {
  /** The room of a file relative to src/: `proxy/hop/hop.ts` → `hop`; a file at the module's root → null. */
  const roomOf = (rel: string): string | null => {
    const parts = rel.split('/');
    return parts.length > 2 ? (parts[1] ?? null) : null;
  };

  for (const [module, rooms] of Object.entries(ROOMS)) {
    const inModule = files.filter((f) => f.module === module);

    it(`${module}/ holds only its rooms (${rooms.join(', ')}) and index.ts at its root`, () => {
      expect(inModule.length).toBeGreaterThan(rooms.length);
      const stray = inModule.filter((f) => {
        const room = roomOf(f.rel);
        return room === null ? f.rel !== `${module}/index.ts` : !rooms.includes(room) || f.rel.split('/').length > 3;
      });
      expect(stray.map((f) => f.rel)).toEqual([]);
      for (const room of rooms) expect(inModule.some((f) => roomOf(f.rel) === room), `${module}/${room}/ has files`).toBe(true);
    });

    it(`${module}/'s rooms import only their own room and the rooms below (${rooms.join(' < ')})`, () => {
      const violations = edges
        .filter((e) => e.from.module === module && e.specifier.startsWith('.'))
        .flatMap((e) => {
          const target = path.posix.normalize(path.posix.join(path.posix.dirname(e.from.rel), e.specifier));
          if (moduleOf(target) !== module) return [];
          const fromRoom = roomOf(e.from.rel);
          const toRoom = roomOf(target);
          if (fromRoom === null) return []; // the face imports any room
          if (toRoom === null) return [`${e.from.rel} imports ${e.specifier}: a room never imports the module's root`];
          return rooms.indexOf(toRoom) > rooms.indexOf(fromRoom) ? [`${e.from.rel} (room ${fromRoom}) imports ${e.specifier} (room ${toRoom}): rooms import downward only`] : [];
        });
      expect(violations).toEqual([]);
    });
  }

  it('docs/architecture.md draws the same rooms', () => {
    const doc = readDoc('docs/architecture.md');
    for (const [module, rooms] of Object.entries(ROOMS)) for (const room of rooms) expect(doc).toContain(`${module}/${room}/`);
  });
});
