// Every YAML example in the README and docs/ must pass the real config validation, and keep passing:
// an example with `expiresAt: 2026-12-31T00:00:00Z` would be refused by check-config after that date,
// since a config grant whose expiresAt has passed is an error. So they are also validated on a clock
// 20 years ahead.
// A block with `listeners` is a whole config file: it gets every check `sluice check-config` runs
// (loadCheckedConfig: schema, cross-checks, host checks), with the variables it names set. Any other
// block is a fragment of one: it is added to a minimal listener and gets the schema and cross-checks
// (the files it names, such as credentialsFile, exist only on the reader's machine). A whole example's
// TLS listener files (listeners[].tls certFile, keyFile, clientCaFile), which check-config loads, are
// written at the relative paths it names from a throwaway test PKI, so it gets the TLS checks too.
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadCheckedConfig } from '../../src/app.js';
import { parseConfigText } from '../../src/config/index.js';
import { ROOT, readDoc, readFencedBlocks } from './markdown.js';
import { createTestPki } from '../support/pki.js';

const DOCS = ['README.md', ...readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
const FUTURE_MS = Date.now() + 20 * 365 * 24 * 3600 * 1000;
const MINIMAL_LISTENER = 'listeners:\n  - name: shared\n    listen: 127.0.0.1:0\n    identify: token\n';

const examples = DOCS.flatMap((doc) =>
  readFencedBlocks(readDoc(doc))
    .filter((block) => block.info === 'yaml')
    .map((block) => ({ name: `${doc}:${block.line}`, text: block.text, whole: /^listeners:/m.test(block.text) })),
);

/** Each variable the example names (`tokenEnv: X`, `urlEnv: Y`, …), set to a value of the right shape. */
function envFor(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const match of text.matchAll(/\b(\w*Env):\s*([A-Za-z_][A-Za-z0-9_]*)/g)) {
    env[match[2] ?? ''] = match[1] === 'urlEnv' ? 'redis://127.0.0.1:6379/0' : 'example-secret-value';
  }
  return env;
}

/** Writes the TLS files a whole example names by a path inside `dir`; an absolute path is left as written. */
function writeTlsFiles(text: string, dir: string): void {
  const pki = createTestPki(['localhost']);
  const pem: Record<string, string> = { certFile: pki.certPem, keyFile: pki.keyPem, clientCaFile: pki.caPem };
  for (const match of text.matchAll(/\b(certFile|keyFile|clientCaFile):\s*([^\s,}#]+)/g)) {
    const file = path.resolve(dir, match[2] ?? '');
    if (!file.startsWith(dir + path.sep)) continue;
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, pem[match[1] ?? ''] ?? '');
  }
}

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('YAML examples in the README and docs/', () => {
  it('finds the example config of docs/configuration.md (parser sanity check)', () => {
    expect(examples.filter((e) => e.name.startsWith('docs/configuration.md:') && e.whole)).toHaveLength(1);
  });

  it.each(examples.filter((e) => e.whole))('$name is a config file that check-config accepts, today and in 20 years', async ({ text }) => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'sluice-doc-example-'));
    dirs.push(dir);
    const file = path.join(dir, 'sluice.yaml');
    writeFileSync(file, text);
    writeTlsFiles(text, dir);
    for (const nowMs of [Date.now(), FUTURE_MS]) {
      const result = await loadCheckedConfig(file, { env: envFor(text), cwd: dir, nowMs });
      expect(result.ok ? [] : result.issues).toEqual([]);
    }
  });

  it.each(examples.filter((e) => !e.whole))('$name is a config fragment the schema and cross-checks accept, today and in 20 years', ({ text }) => {
    for (const nowMs of [Date.now(), FUTURE_MS]) {
      const result = parseConfigText(MINIMAL_LISTENER + text, 'example.yaml', os.tmpdir(), { nowMs });
      expect(result.ok ? [] : result.issues).toEqual([]);
    }
  });
});
