// The files of one running Sluice that no sandbox may see or hold (review 2026-12-04 finding
// 5): its config, state directory, audit file, secrets, TLS keys, admin socket directory and every
// listener's socket, resolved against that Sluice's working directory (ADR 0006), wherever its config
// lies. Read from the YAML directly, not through the config module: `sluice run` does this for every
// running Sluice on every start, and loading the validator costs about 100 ms of a 300 ms budget. A
// config that cannot lie under a shown tree is not parsed at all.
import fs from 'node:fs';
import path from 'node:path';
import { isWithin } from './paths.js';

/** What the YAML says, as far as paths go; anything of another shape is ignored (the file is Sluice's, validated when it loaded). */
interface ConfigPaths {
  state?: unknown;
  audit?: { file?: unknown };
  admin?: { listen?: unknown };
  listeners?: { listen?: unknown; tls?: { certFile?: unknown; keyFile?: unknown; clientCaFile?: unknown; crlFile?: unknown } }[];
  route?: { proxy?: unknown; pac?: { file?: unknown; credentialsFile?: unknown } };
}

const DEFAULT_STATE = './state';

/** Absolute paths of the running Sluice's files; empty when none of them can lie under `trees`. */
export async function sluiceFilesOf(file: string, cwd: string, trees: readonly string[]): Promise<string[]> {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch {
    // Another user's 0600 config: its state is at least where the default puts it.
    return [file, path.resolve(cwd, DEFAULT_STATE)];
  }
  const isRelated = (p: string): boolean => trees.some((t) => isWithin(p, t) || isWithin(t, p));
  // Relative paths land under cwd (or above it with ..); absolute ones are spelled out in the text.
  const mayBeShown = isRelated(cwd) || isRelated(file) || text.includes('..') || trees.some((t) => text.includes(t)) || text.includes('~');
  if (!mayBeShown) return [file];
  const { parseYaml: parse } = await import('../yaml-text/index.js');
  let doc: ConfigPaths;
  try {
    doc = (parse(text) ?? {}) as ConfigPaths;
  } catch {
    return [file, path.resolve(cwd, DEFAULT_STATE)];
  }
  const found: unknown[] = [doc.state ?? DEFAULT_STATE, doc.audit?.file];
  const unix = (listen: unknown): string | undefined => (typeof listen === 'string' && listen.startsWith('unix:') ? listen.slice('unix:'.length) : undefined);
  const adminSocket = unix(doc.admin?.listen);
  if (adminSocket !== undefined) found.push(path.dirname(path.resolve(cwd, adminSocket)));
  for (const l of Array.isArray(doc.listeners) ? doc.listeners : []) found.push(unix(l?.listen), l?.tls?.keyFile, l?.tls?.certFile, l?.tls?.clientCaFile, l?.tls?.crlFile);
  const proxy = doc.route?.proxy;
  for (const p of Array.isArray(proxy) ? proxy : [proxy]) found.push((p as { credentialsFile?: unknown } | undefined)?.credentialsFile);
  found.push(doc.route?.pac?.file, doc.route?.pac?.credentialsFile);
  const state = path.resolve(cwd, typeof doc.state === 'string' ? doc.state : DEFAULT_STATE);
  const paths = found.filter((p): p is string => typeof p === 'string' && p !== '' && p !== 'stdout' && p !== 'stderr').map((p) => path.resolve(cwd, p));
  return [file, ...paths, ...runtimeSocketPaths(state)];
}

/** The `unix:` listen paths of grants issued at run time, as the ledger file holds them (absolute). */
function runtimeSocketPaths(state: string): string[] {
  try {
    const ledger = JSON.parse(fs.readFileSync(path.join(state, 'ledger.json'), 'utf8')) as { runtime?: { spec?: { listen?: unknown } }[] };
    return (ledger.runtime ?? []).flatMap((r) => (typeof r.spec?.listen === 'string' && r.spec.listen.startsWith('unix:/') ? [r.spec.listen.slice('unix:'.length)] : []));
  } catch {
    return []; // no ledger, another user's (0600), or the Redis store: /proc/net/unix and the walk still find them
  }
}
