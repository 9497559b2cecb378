// Finds the config files of the Sluice processes running on this host (`sluice start --config FILE`,
// read from /proc/<pid>/cmdline and resolved against /proc/<pid>/cwd), so that `sluice run` can hide
// them and the files they name even when the caller did not pass --config. Reads /proc only. cmdline is
// world-readable; cwd is not (another user's process, for a non-root caller), and then a relative path
// is looked for in the directories the caller is about to show.
import fs from 'node:fs';
import path from 'node:path';

const ENTRY_NAMES = new Set(['sluice', 'sluice.js', 'main.js']);

export interface RunningConfig {
  readonly file: string;
  /** The process's working directory: its config's relative paths resolve against it (ADR 0006). */
  readonly cwd: string;
}

/**
 * `guessDirs`: the trees the sandbox will show, standing for a working directory that cannot be read (a
 * non-root caller and a Sluice of another user): each that holds a relative config path counts, and for
 * an absolute one each of them, since the config's relative paths resolve against that directory.
 */
export function findRunningConfigs(proc = '/proc', guessDirs: readonly string[] = []): RunningConfig[] {
  let pids: string[];
  try {
    pids = fs.readdirSync(proc).filter((name) => /^\d+$/.test(name));
  } catch {
    return [];
  }
  const configs = new Map<string, RunningConfig>();
  for (const pid of pids) {
    let argv: string[];
    try {
      argv = fs.readFileSync(`${proc}/${pid}/cmdline`, 'utf8').split('\0');
    } catch {
      continue;
    }
    const entry = argv.findIndex((arg) => ENTRY_NAMES.has(path.basename(arg)));
    if (entry === -1 || argv[entry + 1] !== 'start') continue;
    const file = configArgument(argv.slice(entry + 2));
    if (file === null) continue;
    let cwd: string | null = null;
    try {
      cwd = fs.readlinkSync(`${proc}/${pid}/cwd`);
    } catch {
      cwd = null;
    }
    // An unreadable cwd: its relative paths (./state, ./audit.jsonl) may lie in any shown tree, so each
    // is taken as the working directory it could be (review 2026-12-04 finding 5, unprivileged caller).
    const dirs = cwd !== null ? [cwd] : path.isAbsolute(file) ? guessDirs : guessDirs.filter((dir) => fs.existsSync(path.resolve(dir, file)));
    for (const dir of dirs) configs.set(`${path.resolve(dir, file)}\0${dir}`, { file: path.resolve(dir, file), cwd: dir });
  }
  return [...configs.values()];
}

function configArgument(args: readonly string[]): string | null {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] ?? '';
    if (arg === '--config') return args[i + 1] ?? null;
    if (arg.startsWith('--config=')) return arg.slice('--config='.length);
  }
  return null;
}
