// What `sluice run` does with the descriptors it was started with (review 2026-12-04
// finding 1). exec(2) passes on every descriptor without close-on-exec, and neither Node's spawn, nor
// bubblewrap, nor the init closes them: a directory descriptor the caller's shell held (`exec 20</`)
// reached the command and read /etc/shadow through /proc/self/fd/20 from outside every namespace.
// So nothing crosses unless named: the command starts with 0-2 and nothing else.
import fs from 'node:fs';

/** O_CLOEXEC as /proc/<pid>/fdinfo/<fd> prints it: octal `flags:` (asm-generic/fcntl.h, 02000000). */
const O_CLOEXEC = 0o2000000;

/** The descriptors at or above 3 that exec(2) would pass on (no close-on-exec), lowest first. */
export function inheritableDescriptors(proc = '/proc/self'): number[] {
  let names: string[];
  try {
    names = fs.readdirSync(`${proc}/fd`);
  } catch {
    return [];
  }
  const found: number[] = [];
  for (const name of names) {
    const fd = Number(name);
    if (!Number.isInteger(fd) || fd < 3) continue;
    let info: string;
    try {
      info = fs.readFileSync(`${proc}/fdinfo/${fd}`, 'latin1');
    } catch {
      continue; // the directory listing's own descriptor, closed by now
    }
    const flags = /^flags:\s*([0-7]+)/m.exec(info)?.[1];
    if (flags !== undefined && (parseInt(flags, 8) & O_CLOEXEC) === 0) found.push(fd);
  }
  return found.sort((a, b) => a - b);
}

/**
 * Closes every descriptor at or above 3 that would cross exec(2), except `keep`. Node opens its own
 * with close-on-exec (libuv), so what this closes is what the process was handed and never uses.
 * Returns what stays inheritable afterwards: a caller that must start from nothing refuses unless
 * that is exactly `keep`.
 */
export function closeInheritedDescriptors(keep: readonly number[] = [], proc = '/proc/self'): number[] {
  for (const fd of inheritableDescriptors(proc)) {
    if (keep.includes(fd)) continue;
    try {
      fs.closeSync(fd);
    } catch {
      // EBADF: gone already
    }
  }
  return inheritableDescriptors(proc).filter((fd) => !keep.includes(fd));
}

/**
 * Why standard input, output or error cannot be handed to the command, or null. A directory there is
 * the same escape as any other (openat(0, "etc/shadow") and /proc/self/fd/0 both reach outside the mount
 * namespace); a pipe, a terminal, a socket or a file is what the caller means to share.
 */
export function stdioRefusal(): string | null {
  const names = ['standard input', 'standard output', 'standard error'];
  for (const fd of [0, 1, 2]) {
    let stat: fs.Stats;
    try {
      stat = fs.fstatSync(fd);
    } catch {
      continue; // closed: the command gets nothing there either
    }
    if (stat.isDirectory()) return `descriptor ${fd} (${names[fd] ?? ''}) is a directory, which would reach outside the sandbox's filesystem; redirect it from a file or /dev/null`;
  }
  return null;
}
