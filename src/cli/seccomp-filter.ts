// The seccomp filter `sluice run` hands to bubblewrap (`--seccomp FD`): a classic BPF program, built
// here because bwrap takes only compiled filters. It narrows the kernel surface a confined command can
// touch; the namespaces are the boundary, this is defence in depth. Never allows what it does not know:
// another architecture, or an x32 system call on x86_64, gets an error, not a pass; so does a number
// the table does not list (above `highestKnown`, or in an unallocated range), with ENOSYS as runc does
// for calls newer than its profile (opencontainers/runc#2151), so that libc falls back as for clone3.
// Denials follow what Flatpak (flatpak-run.c, setup_seccomp) and Docker's default profile
// (moby/profiles seccomp/default_linux.go, without the capabilities the command never has) refuse.

/** `struct seccomp_data`: nr at 0, arch at 4, args[i] at 16 + 8i (low 32 bits first: little-endian only). */
const OFFSET_NR = 0;
const OFFSET_ARCH = 4;
const offsetArg = (i: number): number => 16 + 8 * i;

const BPF_LD_W_ABS = 0x20;
const BPF_JEQ_K = 0x15;
const BPF_JGT_K = 0x25;
const BPF_JGE_K = 0x35;
const BPF_JSET_K = 0x45;
const BPF_RET_K = 0x06;

const RET_ALLOW = 0x7fff0000;
const retErrno = (errno: number): number => 0x00050000 | errno;
const EPERM = 1;
const EAFNOSUPPORT = 97;
const ENOSYS = 38;

/** Socket families a proxied command needs: Unix, IPv4, IPv6 (its own loopback), netlink (ip, getifaddrs). */
const ALLOWED_FAMILIES = [1, 2, 10, 16];
/** CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET: no new namespaces from inside (clone(2)). */
const CLONE_NEW_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000;
/** TIOCSTI pushes input into the caller's terminal (CVE-2017-5226); TIOCLINUX can too. */
const DENIED_IOCTLS = [0x5412, 0x541c];

export interface SyscallTable {
  readonly auditArch: number;
  /** System call numbers at or above this are another ABI (x32 on x86_64): denied. */
  readonly abiLimit: number | null;
  readonly socket: number;
  readonly clone: number;
  readonly clone3: number;
  readonly ioctl: number;
  /** The last number of the kernel's table (Linux 6.17) these were checked against: above it, ENOSYS. */
  readonly highestKnown: number;
  /** Numbers the kernel's table leaves unallocated below `highestKnown` (inclusive ranges): ENOSYS. */
  readonly unallocated: readonly (readonly [number, number])[];
  /** Denied with EPERM. */
  readonly denied: Readonly<Record<string, number>>;
}

// Besides the namespace, mount, module, keyring and tracing calls: open_tree_attr (open_tree's twin);
// pidfd_getfd, process_madvise, migrate_pages, move_pages (they reach another process's descriptors or
// memory: Docker wants CAP_SYS_PTRACE or CAP_SYS_NICE); modify_ldt (Flatpak: "a historic source of
// interesting information leaks"); memfd_secret (memory hidden from the host's own inspection);
// quotactl_fd, fanotify_init (Docker: CAP_SYS_ADMIN); ustat, sysfs (never in Docker's profile).
// Allowed on purpose: uretprobe (honoured only from the kernel's own trampoline; Docker allows it, as
// denying it kills a process a host tracer probes), pidfd_open and pidfd_send_signal (no more than kill).

const X86_64: SyscallTable = {
  auditArch: 0xc000003e,
  abiLimit: 0x40000000,
  socket: 41,
  clone: 56,
  clone3: 435,
  ioctl: 16,
  // arch/x86/entry/syscalls/syscall_64.tbl: 469 file_setattr; "don't use numbers 387 through 423"
  // and nothing after rseq (334) but uretprobe (335); 512-547 are x32's (with the x32 bit only).
  highestKnown: 469,
  unallocated: [[336, 423]],
  denied: {
    ptrace: 101, syslog: 103, uselib: 134, ustat: 136, sysfs: 139, modify_ldt: 154, pivot_root: 155, chroot: 161,
    acct: 163, mount: 165, umount2: 166, swapon: 167, swapoff: 168, reboot: 169, iopl: 172, ioperm: 173,
    init_module: 175, delete_module: 176, quotactl: 179, lookup_dcookie: 212, kexec_load: 246, add_key: 248,
    request_key: 249, keyctl: 250, migrate_pages: 256, unshare: 272, move_pages: 279, perf_event_open: 298,
    fanotify_init: 300, name_to_handle_at: 303, open_by_handle_at: 304, setns: 308, process_vm_readv: 310,
    process_vm_writev: 311, kcmp: 312, finit_module: 313, kexec_file_load: 320, bpf: 321, userfaultfd: 323,
    io_uring_setup: 425, io_uring_enter: 426, io_uring_register: 427, open_tree: 428, move_mount: 429, fsopen: 430,
    fsconfig: 431, fsmount: 432, fspick: 433, pidfd_getfd: 438, process_madvise: 440, mount_setattr: 442,
    quotactl_fd: 443, memfd_secret: 447, open_tree_attr: 467,
  },
};

const AARCH64: SyscallTable = {
  auditArch: 0xc00000b7,
  abiLimit: null,
  socket: 198,
  clone: 220,
  clone3: 435,
  ioctl: 29,
  // scripts/syscall.tbl (the generic table): 469 file_setattr; 244-259 are for other architectures'
  // own calls, 403-423 are the time64 calls of 32-bit ABIs only, and nothing lies between 294 and 403.
  highestKnown: 469,
  unallocated: [[244, 259], [295, 423]],
  denied: {
    lookup_dcookie: 18, umount2: 39, mount: 40, pivot_root: 41, chroot: 51, quotactl: 60, acct: 89, unshare: 97,
    kexec_load: 104, init_module: 105, delete_module: 106, syslog: 116, ptrace: 117, reboot: 142, add_key: 217,
    request_key: 218, keyctl: 219, swapon: 224, swapoff: 225, migrate_pages: 238, move_pages: 239, perf_event_open: 241,
    fanotify_init: 262, name_to_handle_at: 264, open_by_handle_at: 265, setns: 268, process_vm_readv: 270,
    process_vm_writev: 271, kcmp: 272, finit_module: 273, bpf: 280, userfaultfd: 282, kexec_file_load: 294,
    io_uring_setup: 425, io_uring_enter: 426, io_uring_register: 427, open_tree: 428, move_mount: 429, fsopen: 430,
    fsconfig: 431, fsmount: 432, fspick: 433, pidfd_getfd: 438, process_madvise: 440, mount_setattr: 442,
    quotactl_fd: 443, memfd_secret: 447, open_tree_attr: 467,
  },
};

const TABLES: Readonly<Record<string, SyscallTable>> = { x64: X86_64, arm64: AARCH64 };

/** The architectures a filter can be built for (Node's `process.arch` names). */
export function isSeccompArchSupported(arch: string): boolean {
  return Object.hasOwn(TABLES, arch);
}

/** The table a filter for `arch` is built from, for tests to derive every verdict from. */
export function seccompSyscallTable(arch: string): SyscallTable | undefined {
  return TABLES[arch];
}

/** The names of the system calls the filter refuses outright, for docs and tests. */
export function deniedSyscalls(arch: string): readonly string[] {
  const table = TABLES[arch];
  return table === undefined ? [] : Object.keys(table.denied).sort();
}

type Instruction = { readonly code: number; readonly k: number; readonly jt: string | number; readonly jf: string | number } | { readonly label: string };

/** Builds the filter for `arch` as bwrap reads it: an array of `struct sock_filter`, 8 bytes each. */
export function buildSeccompFilter(arch: string): Buffer {
  const table = TABLES[arch];
  if (table === undefined) throw new Error(`no seccomp filter for architecture ${arch}`);
  const ld = (offset: number): Instruction => ({ code: BPF_LD_W_ABS, k: offset, jt: 0, jf: 0 });
  const jeq = (k: number, jt: string | number, jf: string | number = 0): Instruction => ({ code: BPF_JEQ_K, k, jt, jf });
  const ret = (k: number): Instruction => ({ code: BPF_RET_K, k, jt: 0, jf: 0 });
  const program: Instruction[] = [ld(OFFSET_ARCH), jeq(table.auditArch, 1), ret(retErrno(EPERM)), ld(OFFSET_NR)];
  if (table.abiLimit !== null) program.push({ code: BPF_JGE_K, k: table.abiLimit, jt: 'deny', jf: 0 });
  program.push({ code: BPF_JGT_K, k: table.highestKnown, jt: 'nosys', jf: 0 });
  for (const [low, high] of table.unallocated) {
    program.push({ code: BPF_JGE_K, k: low, jt: 0, jf: 1 }, { code: BPF_JGT_K, k: high, jt: 0, jf: 'nosys' });
  }
  for (const nr of Object.values(table.denied)) program.push(jeq(nr, 'deny'));
  // clone3 passes its flags in memory the filter cannot read: ENOSYS makes libc fall back to clone.
  program.push(jeq(table.clone3, 'nosys'), jeq(table.socket, 'socket'), jeq(table.clone, 'clone'), jeq(table.ioctl, 'ioctl'), ret(RET_ALLOW));
  program.push({ label: 'socket' }, ld(offsetArg(0)));
  for (const family of ALLOWED_FAMILIES) program.push(jeq(family, 'allow'));
  program.push(ret(retErrno(EAFNOSUPPORT)));
  program.push({ label: 'clone' }, ld(offsetArg(0)), { code: BPF_JSET_K, k: CLONE_NEW_NAMESPACES, jt: 'deny', jf: 'allow' });
  program.push({ label: 'ioctl' }, ld(offsetArg(1)));
  for (const request of DENIED_IOCTLS) program.push(jeq(request, 'deny'));
  program.push({ label: 'allow' }, ret(RET_ALLOW), { label: 'deny' }, ret(retErrno(EPERM)), { label: 'nosys' }, ret(retErrno(ENOSYS)));
  return assemble(program);
}

/** Resolves labels to forward jump offsets (BPF jumps only forward, at most 255 instructions). */
function assemble(program: readonly Instruction[]): Buffer {
  const labels = new Map<string, number>();
  const code: Exclude<Instruction, { label: string }>[] = [];
  for (const item of program) {
    if ('label' in item) labels.set(item.label, code.length);
    else code.push(item);
  }
  const out = Buffer.alloc(code.length * 8);
  code.forEach((insn, index) => {
    const offset = (target: string | number): number => {
      if (typeof target === 'number') return target;
      const at = labels.get(target);
      if (at === undefined) throw new Error(`seccomp filter: no label ${target}`);
      const jump = at - index - 1;
      if (jump < 0 || jump > 255) throw new Error(`seccomp filter: jump to ${target} out of range`);
      return jump;
    };
    out.writeUInt16LE(insn.code, index * 8);
    out.writeUInt8(offset(insn.jt), index * 8 + 2);
    out.writeUInt8(offset(insn.jf), index * 8 + 3);
    out.writeUInt32LE(insn.k >>> 0, index * 8 + 4);
  });
  return out;
}
