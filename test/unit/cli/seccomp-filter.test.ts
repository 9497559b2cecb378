// The seccomp filter handed to bubblewrap, run through a classic-BPF interpreter over seccomp_data:
// what it denies (namespace and mount calls, keyrings, ptrace, raw and exotic socket families, TIOCSTI,
// another ABI or architecture), that every number the table does not know is ENOSYS (review
// 2026-12-04 finding 8: calls newer than the table passed), and what a proxied command needs (TCP,
// Unix sockets, threads, fork). The verdict for every number is derived from the declared table.
import { describe, expect, it } from 'vitest';
import { buildSeccompFilter, deniedSyscalls, isSeccompArchSupported, seccompSyscallTable } from '../../../src/cli/index.js';

const ALLOW = 0x7fff0000;
const errno = (n: number): number => 0x00050000 | n;
const X86_64 = 0xc000003e;
const AARCH64 = 0xc00000b7;

/** Evaluates a classic BPF program (the subset the filter uses) on one system call. */
function evaluate(filter: Buffer, arch: number, nr: number, args: readonly number[] = []): number {
  const data = Buffer.alloc(64);
  data.writeInt32LE(nr, 0);
  data.writeUInt32LE(arch, 4);
  args.forEach((a, i) => data.writeUInt32LE(a >>> 0, 16 + 8 * i));
  let acc = 0;
  for (let pc = 0, steps = 0; pc * 8 < filter.length && steps < 1000; pc++, steps++) {
    const code = filter.readUInt16LE(pc * 8);
    const jt = filter.readUInt8(pc * 8 + 2);
    const jf = filter.readUInt8(pc * 8 + 3);
    const k = filter.readUInt32LE(pc * 8 + 4);
    if (code === 0x20) acc = data.readUInt32LE(k);
    else if (code === 0x06) return k;
    else if (code === 0x15) pc += acc === k ? jt : jf;
    else if (code === 0x25) pc += acc > k ? jt : jf;
    else if (code === 0x35) pc += acc >= k ? jt : jf;
    else if (code === 0x45) pc += (acc & k) !== 0 ? jt : jf;
    else throw new Error(`unexpected opcode ${code.toString(16)} at ${pc}`);
  }
  throw new Error('the filter fell off its end');
}

describe('seccomp filter (x86_64)', () => {
  const filter = buildSeccompFilter('x64');

  it.each([
    ['mount', 165], ['umount2', 166], ['pivot_root', 155], ['unshare', 272], ['setns', 308], ['ptrace', 101],
    ['keyctl', 250], ['add_key', 248], ['bpf', 321], ['perf_event_open', 298], ['userfaultfd', 323],
    ['open_by_handle_at', 304], ['init_module', 175], ['finit_module', 313], ['kexec_load', 246], ['io_uring_setup', 425],
    ['fsopen', 430], ['move_mount', 429], ['process_vm_writev', 311],
    ['open_tree_attr', 467], ['pidfd_getfd', 438], ['modify_ldt', 154], ['memfd_secret', 447], ['process_madvise', 440],
    ['migrate_pages', 256], ['move_pages', 279], ['quotactl_fd', 443], ['fanotify_init', 300],
  ])('denies %s (%i) with EPERM', (_name, nr) => {
    expect(evaluate(filter, X86_64, nr)).toBe(errno(1));
  });

  it.each([
    ['read', 0], ['write', 1], ['openat', 257], ['connect', 42], ['accept4', 288], ['execve', 59], ['wait4', 61],
    ['exit_group', 231], ['mmap', 9], ['futex', 202], ['epoll_wait', 232], ['personality', 135],
    ['pidfd_open', 434], ['pidfd_send_signal', 424], ['rseq', 334], ['uretprobe', 335], ['close_range', 436],
    ['openat2', 437], ['faccessat2', 439], ['map_shadow_stack', 453], ['file_setattr', 469],
  ])('allows %s (%i)', (_name, nr) => {
    expect(evaluate(filter, X86_64, nr)).toBe(ALLOW);
  });

  it.each([
    ['AF_UNIX', 1, ALLOW], ['AF_INET', 2, ALLOW], ['AF_INET6', 10, ALLOW], ['AF_NETLINK', 16, ALLOW],
    ['AF_PACKET', 17, errno(97)], ['AF_VSOCK', 40, errno(97)], ['AF_BLUETOOTH', 31, errno(97)], ['AF_ALG', 38, errno(97)],
  ])('socket(%s) → %s', (_name, family, expected) => {
    expect(evaluate(filter, X86_64, 41, [family, 1, 0])).toBe(expected);
  });

  it('allows clone for threads and fork, refuses clone with any CLONE_NEW* flag, and makes clone3 ENOSYS', () => {
    const threads = 0x00010000 | 0x00000100 | 0x00000200 | 0x00000400 | 0x00000800 | 0x00080000 | 0x00100000 | 0x00200000 | 0x01000000;
    expect(evaluate(filter, X86_64, 56, [threads])).toBe(ALLOW);
    expect(evaluate(filter, X86_64, 56, [17])).toBe(ALLOW); // SIGCHLD: fork
    for (const flag of [0x10000000, 0x40000000, 0x20000, 0x20000000, 0x04000000, 0x08000000, 0x02000000]) {
      expect(evaluate(filter, X86_64, 56, [17 | flag])).toBe(errno(1));
    }
    expect(evaluate(filter, X86_64, 435)).toBe(errno(38));
  });

  it('refuses TIOCSTI and TIOCLINUX, allows other ioctls (CVE-2017-5226)', () => {
    expect(evaluate(filter, X86_64, 16, [0, 0x5412])).toBe(errno(1));
    expect(evaluate(filter, X86_64, 16, [0, 0x541c])).toBe(errno(1));
    expect(evaluate(filter, X86_64, 16, [0, 0x5401])).toBe(ALLOW); // TCGETS
  });

  it('makes numbers above the table (file_setattr, 469) and the unallocated 336-423 ENOSYS, so libc falls back', () => {
    for (const nr of [470, 471, 548, 1000, 0x3fffffff, 336, 387, 423]) expect(evaluate(filter, X86_64, nr)).toBe(errno(38));
    expect(evaluate(filter, X86_64, 512)).toBe(errno(38)); // an x32-only number without the x32 bit
  });

  it('refuses x32 system calls and any other architecture instead of passing them unchecked', () => {
    expect(evaluate(filter, X86_64, 0x40000000 + 165)).toBe(errno(1));
    expect(evaluate(filter, X86_64, 0x40000000)).toBe(errno(1));
    expect(evaluate(filter, 0x40000003, 0)).toBe(errno(1)); // i386
  });
});

describe('seccomp filter (aarch64)', () => {
  const filter = buildSeccompFilter('arm64');
  it('denies mount, unshare, setns and ptrace by the generic numbers, and allows read and connect', () => {
    for (const nr of [40, 97, 268, 117, 219]) expect(evaluate(filter, AARCH64, nr)).toBe(errno(1));
    for (const nr of [63, 203]) expect(evaluate(filter, AARCH64, nr)).toBe(ALLOW);
    expect(evaluate(filter, AARCH64, 198, [17])).toBe(errno(97));
    expect(evaluate(filter, X86_64, 63)).toBe(errno(1));
  });

  it.each([
    ['open_tree_attr', 467], ['pidfd_getfd', 438], ['memfd_secret', 447], ['process_madvise', 440], ['migrate_pages', 238],
    ['move_pages', 239], ['quotactl_fd', 443], ['fanotify_init', 262], ['lookup_dcookie', 18],
  ])('denies %s (%i) with EPERM', (_name, nr) => {
    expect(evaluate(filter, AARCH64, nr)).toBe(errno(1));
  });

  it('allows read, write, openat, execve, exit_group, pidfd_open and clone without CLONE_NEW*, and Unix sockets', () => {
    for (const nr of [63, 64, 56, 221, 94, 434, 424]) expect(evaluate(filter, AARCH64, nr)).toBe(ALLOW);
    expect(evaluate(filter, AARCH64, 220, [17])).toBe(ALLOW);
    expect(evaluate(filter, AARCH64, 198, [1])).toBe(ALLOW);
  });

  it('makes numbers above the table (469) , the unallocated 244-259 and 295-423, and clone3 ENOSYS', () => {
    for (const nr of [470, 1000, 0x3fffffff, -1, 244, 259, 295, 403, 423, 435]) expect(evaluate(filter, AARCH64, nr)).toBe(errno(38));
  });
});

describe('seccomp filter: the verdict for every number follows the declared table', () => {
  const ZERO_ARGS = [0, 0, 0, 0, 0, 0];
  it.each([
    ['x64', X86_64],
    ['arm64', AARCH64],
  ] as const)('%s: 0 to highestKnown + 50, with all-zero arguments', (arch, auditArch) => {
    const table = seccompSyscallTable(arch)!;
    const denied = new Set(Object.values(table.denied));
    const unallocated = (nr: number): boolean => nr > table.highestKnown || table.unallocated.some(([lo, hi]) => nr >= lo && nr <= hi);
    const expected = (nr: number): number => {
      if (denied.has(nr)) return errno(1);
      if (unallocated(nr) || nr === table.clone3) return errno(38);
      if (nr === table.socket) return errno(97); // family 0: only Unix, IPv4, IPv6 and netlink pass
      return ALLOW; // clone with no flags, ioctl 0: the argument checks are tested above
    };
    const filter = buildSeccompFilter(arch);
    const wrong: string[] = [];
    for (let nr = 0; nr <= table.highestKnown + 50; nr++) {
      const got = evaluate(filter, auditArch, nr, ZERO_ARGS);
      if (got !== expected(nr)) wrong.push(`${nr}: ${got.toString(16)} not ${expected(nr).toString(16)}`);
    }
    expect(wrong).toEqual([]);
    // A denial the range checks would shadow, or a special case in an unallocated range, is a table error.
    for (const nr of [...denied, table.socket, table.clone, table.clone3, table.ioctl]) expect(unallocated(nr)).toBe(false);
    expect(deniedSyscalls(arch)).toHaveLength(denied.size);
  });
});

describe('seccomp filter: architectures', () => {
  it('is built for x64 and arm64 only; another architecture is refused, not run unfiltered', () => {
    expect(isSeccompArchSupported('x64')).toBe(true);
    expect(isSeccompArchSupported('arm64')).toBe(true);
    expect(isSeccompArchSupported('ia32')).toBe(false);
    expect(() => buildSeccompFilter('riscv64')).toThrow(/riscv64/);
    expect(deniedSyscalls('x64')).toContain('setns');
  });
});
