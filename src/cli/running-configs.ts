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
 * `guessDirs`: where to look for a relative config path when the process's cwd cannot be read (a
 * non-root caller and a Sluice of another user): every such directory that holds the file counts.
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
    const dirs = cwd !== null ? [cwd] : path.isAbsolute(file) ? ['/'] : guessDirs.filter((dir) => fs.existsSync(path.resolve(dir, file)));
    for (const dir of dirs) configs.set(path.resolve(dir, file), { file: path.resolve(dir, file), cwd: dir });
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
