// Tries a Unix socket as another local user: a node child started through `setpriv` with its own uid,
// gid and supplementary groups. Needs root (the tests run as root) and setpriv; `canSwitchUid` says so.
import { spawn, spawnSync } from 'node:child_process';

/** Outside the ranges the container's own users take; nothing runs as these. */
export const OTHER_UID = 21002;
export const THIRD_UID = 21003;

export function canSwitchUid(): boolean {
  return process.getuid?.() === 0 && spawnSync('setpriv', ['--version'], { stdio: 'ignore' }).status === 0;
}

const CONNECT_SCRIPT = `
const s = require('node:net').connect(process.argv[1]);
s.once('connect', () => { process.stdout.write('connected'); s.destroy(); });
s.once('error', (e) => process.stdout.write(e.code ?? String(e)));
`;

/** Connects to `socketPath` as `uid` (gid = uid, plus `groups`): 'connected', or the errno code (EACCES…). */
export function connectAs(uid: number, socketPath: string, groups: readonly number[] = []): Promise<string> {
  const groupArgs = groups.length === 0 ? ['--clear-groups'] : [`--groups=${groups.join(',')}`];
  const child = spawn('setpriv', [`--reuid=${uid}`, `--regid=${uid}`, ...groupArgs, process.execPath, '-e', CONNECT_SCRIPT, socketPath], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (chunk: Buffer) => void (out += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => void (err += chunk.toString()));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => (out === '' ? reject(new Error(`connect child exited ${code}: ${err}`)) : resolve(out)));
  });
}
