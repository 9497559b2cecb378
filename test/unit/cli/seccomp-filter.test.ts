// The seccomp filter handed to bubblewrap, run through a classic-BPF interpreter over seccomp_data:
// what it denies (namespace and mount calls, keyrings, ptrace, raw and exotic socket families, TIOCSTI,
// another ABI or architecture) and what a proxied command needs (TCP, Unix sockets, threads, fork).
import { describe, expect, it } from 'vitest';
import { buildSeccompFilter, deniedSyscalls, isSeccompArchSupported } from '../../../src/cli/index.js';

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
  ])('denies %s (%i) with EPERM', (_name, nr) => {
    expect(evaluate(filter, X86_64, nr)).toBe(errno(1));
  });

  it.each([
    ['read', 0], ['write', 1], ['openat', 257], ['connect', 42], ['accept4', 288], ['execve', 59], ['wait4', 61],
    ['exit_group', 231], ['mmap', 9], ['futex', 202], ['epoll_wait', 232], ['personality', 135],
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
