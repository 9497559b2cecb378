#!/bin/sh
# What a hostile command tries from inside `sluice run`: one attempt per line, judged inside where it
# can be and on the host by the test (test/support/sandbox.ts). Never run it unconfined by hand: it
# signals and ptrace-attaches the pids it is given. POSIX sh (dash); every attempt is time-bounded.
#
# Output lines:
#   ATTACK <name> BLOCKED|ESCAPED|ERROR [detail]   ERROR: the attempt could not be made (a test bug)
#   ATTACK <name> TRIED [detail]                   the host decides (it looks at what changed)
#   CHECK <name> OK|FAIL [detail]                  something the command must still be able to do
#   DUMP <text>                                    environments and command lines the host greps for secrets
# Input (from `--env`): T_GROUPS (space-separated: sockets net env files proc priv state workdirs) and
# the T_* values each group names below; T_NODE is the host's Node binary (bound alone at its path).

PY=/usr/bin/python3
T=5

attack() { printf 'ATTACK %s %s\n' "$1" "$2"; }
check() { printf 'CHECK %s %s\n' "$1" "$2"; }
one_line() { printf '%s' "$1" | head -c 160 | tr '\n\r' '  '; }
has_group() { case " $T_GROUPS " in *" $1 "*) return 0 ;; esac; return 1; }

# succeeds NAME CMD...: the attempt escaped when CMD exits 0 (126/127: the tool is missing).
succeeds() {
  name=$1; shift
  out=$(timeout "$T" "$@" 2>&1 </dev/null); rc=$?
  case $rc in
    0) attack "$name" "ESCAPED $(one_line "$out")" ;;
    126|127) attack "$name" "ERROR rc=$rc $(one_line "$out")" ;;
    *) attack "$name" "BLOCKED rc=$rc $(one_line "$out")" ;;
  esac
}

# http_code NAME CURL-ARGS...: the attempt escaped when curl got any HTTP answer.
http_code() {
  name=$1; shift
  out=$(timeout "$T" curl -sS -m 3 -o /dev/null -w '%{http_code}' "$@" 2>&1 </dev/null); rc=$?
  code=$(printf '%s' "$out" | tail -c 3)
  case $code in
    000) attack "$name" "BLOCKED curl rc=$rc $(one_line "$out")" ;;
    [1-5][0-9][0-9]) attack "$name" "ESCAPED http=$code" ;;
    *) attack "$name" "ERROR curl rc=$rc $(one_line "$out")" ;;
  esac
}

# py NAME SUBCOMMAND ARGS...: the helper below prints BLOCKED or ESCAPED itself; SIGSYS (159) is a
# seccomp kill, which blocks too.
py() {
  name=$1; shift
  out=$(timeout "$T" "$PY" -c "$PYCODE" "$@" 2>&1 </dev/null); rc=$?
  first=$(printf '%s\n' "$out" | head -n 1)
  case $first in
    BLOCKED*|ESCAPED*) attack "$name" "$(one_line "$first")" ;;
    *) if [ "$rc" -eq 159 ]; then attack "$name" "BLOCKED killed by SIGSYS"; else attack "$name" "ERROR rc=$rc $(one_line "$out")"; fi ;;
  esac
}

PYCODE=$(cat <<'PY'
import ctypes, errno, mmap, os, socket, struct, sys
def say(verdict, detail=''):
    print(verdict + (' ' + detail if detail else ''))
    sys.exit(0)
def name(e):
    return errno.errorcode.get(e, str(e)) if e else 'timeout'
libc = ctypes.CDLL(None, use_errno=True)
cmd, args = sys.argv[1], sys.argv[2:]
if cmd == 'unix':            # connect to a Unix socket path; a leading @ means the abstract namespace
    path = '\0' + args[0][1:] if args[0].startswith('@') else args[0]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.settimeout(3)
    try: s.connect(path)
    except OSError as e: say('BLOCKED', name(e.errno))
    say('ESCAPED', 'connected')
elif cmd == 'tcp':
    try: socket.create_connection((args[0], int(args[1])), timeout=3).close()
    except OSError as e: say('BLOCKED', name(e.errno))
    say('ESCAPED', 'connected')
elif cmd == 'dns':           # one A query for example.test over UDP; any answer is an escape
    q = struct.pack('>HHHHHH', 0x5151, 0x0100, 1, 0, 0, 0) + b'\x07example\x04test\x00' + struct.pack('>HH', 1, 1)
    fam = socket.AF_INET6 if ':' in args[0] else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM); s.settimeout(1.5)
    try:
        s.connect((args[0], int(args[1]))); s.send(q); data = s.recv(512)
    except OSError as e: say('BLOCKED', name(e.errno))
    say('ESCAPED', '%d-byte answer' % len(data))
elif cmd == 'socket':        # family type proto, by name
    fam = getattr(socket, args[0], None); typ = getattr(socket, args[1]); proto = int(args[2])
    if fam is None: say('BLOCKED', args[0] + ' unknown to this Python')
    try: socket.socket(fam, typ, proto).close()
    except OSError as e: say('BLOCKED', name(e.errno))
    say('ESCAPED', 'socket created')
elif cmd == 'ptrace':        # PTRACE_ATTACH, and detach again at once if it worked
    pid = int(args[0])
    if libc.ptrace(16, pid, None, None) == 0:
        try: os.waitpid(pid, 0x40000000)
        except OSError: pass
        libc.ptrace(17, pid, None, None)
        say('ESCAPED', 'attached to %d' % pid)
    say('BLOCKED', name(ctypes.get_errno()))
elif cmd == 'mount':         # tmpfs on an empty directory of our own, unmounted at once if it worked
    target = args[0].encode()
    if libc.mount(b'none', target, b'tmpfs', 0, None) == 0:
        libc.umount2(target, 2)
        say('ESCAPED', 'mounted')
    say('BLOCKED', name(ctypes.get_errno()))
elif cmd == 'syscall':       # EPERM or ENOSYS is the filter (EACCES: keyctl's refusal); any other answer came from the kernel
    machine = os.uname().machine
    nrs = {'x86_64': dict(keyctl=250, bpf=321, modify_ldt=154), 'aarch64': dict(keyctl=219, bpf=280)}.get(machine)
    if nrs is None: print('unknown architecture'); sys.exit(3)
    nrs.update(process_madvise=440, memfd_secret=447, open_tree_attr=467)  # the same in every table
    if args[0] not in nrs: say('BLOCKED', 'n/a: no %s on %s' % (args[0], machine))
    nr = nrs[args[0]]
    page = mmap.mmap(-1, 4096)
    at = ctypes.addressof(ctypes.c_char.from_buffer(page))
    if args[0] == 'keyctl':
        r = libc.syscall(nr, 0, ctypes.c_long(-3), 1)                 # KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, create
    elif args[0] == 'bpf':
        r = libc.syscall(nr, 0, ctypes.c_void_p(at), 128)             # BPF_MAP_CREATE with an all-zero attribute
    elif args[0] == 'modify_ldt':
        r = libc.syscall(nr, 0, ctypes.c_void_p(at), 16)              # read the LDT (0 bytes: there is none)
    elif args[0] == 'open_tree_attr':
        r = libc.syscall(nr, -100, b'/', 0x80000, None, 0)            # AT_FDCWD, O_CLOEXEC, no clone: an O_PATH descriptor
    elif args[0] == 'memfd_secret':
        r = libc.syscall(nr, 0x80000)
    else:                                                             # process_madvise(MADV_COLD) on a page of our own
        pidfd = libc.syscall(434, os.getpid(), 0)
        if pidfd < 0: print('pidfd_open: ' + name(ctypes.get_errno())); sys.exit(3)
        iov = (ctypes.c_size_t * 2)(at, 4096)
        r = libc.syscall(nr, pidfd, iov, 1, 20, 0)
    e = ctypes.get_errno()
    if r >= 0: say('ESCAPED', 'returned %d' % r)
    if e in (errno.EPERM, errno.ENOSYS, errno.EACCES): say('BLOCKED', name(e))
    say('ESCAPED', 'reached the kernel: ' + name(e))
elif cmd == 'pidfd_getfd':   # descriptors 0-64 of every process we see (ourselves included, which the kernel allows)
    got, errors, opened = [], set(), 0
    for pid in sorted(int(p) for p in os.listdir('/proc') if p.isdigit()):
        pidfd = libc.syscall(434, pid, 0)                             # pidfd_open: allowed, no more than kill
        if pidfd < 0: continue
        opened += 1
        for fd in range(65):
            r = libc.syscall(438, pidfd, fd, 0)
            if r >= 0: got.append('%d:%d' % (pid, fd)); os.close(r)
            else: errors.add(name(ctypes.get_errno()))
        os.close(pidfd)
    if opened == 0: print('pidfd_open failed for every pid'); sys.exit(3)
    if got: say('ESCAPED', 'took ' + ' '.join(got[:8]))
    say('BLOCKED', '%d processes: %s' % (opened, ','.join(sorted(errors))))
elif cmd == 'unknown':       # numbers the filter's table does not know: ENOSYS (or EPERM) before the kernel sees them
    seen = []
    for nr in map(int, args):
        r = libc.syscall(ctypes.c_long(nr), 0, 0, 0, 0, 0, 0); e = ctypes.get_errno()
        if r >= 0: say('ESCAPED', '%d returned %d' % (nr, r))
        if e not in (errno.ENOSYS, errno.EPERM): say('ESCAPED', '%d reached the kernel: %s' % (nr, name(e)))
        seen.append('%d:%s' % (nr, name(e)))
    say('BLOCKED', ' '.join(seen))
elif cmd == 'traceme':       # a child asks to be traced by us: the filter must refuse ptrace itself
    pid = os.fork()
    if pid == 0:
        os._exit(0 if libc.ptrace(0, 0, None, None) == 0 else 1)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status): say('BLOCKED', 'child killed by signal %d' % os.WTERMSIG(status))
    say('ESCAPED' if os.WEXITSTATUS(status) == 0 else 'BLOCKED', 'PTRACE_TRACEME')
elif cmd == 'session':       # 0: our session's leader is outside our PID namespace (no --new-session);
                             # without a PID namespace of our own this cannot tell (the namespace attempts do)
    sid = os.getsid(0)
    say('ESCAPED' if sid == 0 else 'BLOCKED', 'sid=%d' % sid)
elif cmd == 'interfaces':
    names = [n for _, n in socket.if_nameindex()]
    say('BLOCKED' if names == ['lo'] else 'ESCAPED', ','.join(names))
else:
    print('unknown subcommand ' + cmd); sys.exit(3)
PY
)

# ---------------------------------------------------------------------------------------------------
# Can the attempts be made at all? A missing tool would make every attempt that needs it look blocked.
for tool in curl timeout nsenter unshare /usr/bin/kill cat "$PY"; do
  if command -v "$tool" >/dev/null 2>&1; then check "tool-$(basename "$tool")" OK; else check "tool-$(basename "$tool")" FAIL; fi
done
if [ -n "$T_DIR" ] && [ -n "$T_GROUPS" ]; then check env-passthrough OK; else check env-passthrough "FAIL T_DIR/T_GROUPS not passed by --env"; fi
for v in HTTP_PROXY HTTPS_PROXY ALL_PROXY http_proxy https_proxy all_proxy; do
  eval "val=\${$v-unset}"
  [ "$val" = "http://127.0.0.1:${T_PORT:-3128}" ] && check "proxy-env-$v" OK || check "proxy-env-$v" "FAIL $v=$val"
done
# Only the sandbox's own loopback bypasses the bridge (issue 17 item 8); anything wider would be a way around the grant.
for v in NO_PROXY no_proxy; do
  eval "val=\${$v-unset}"
  [ "$val" = "localhost,127.0.0.1,::1" ] && check "proxy-env-$v" OK || check "proxy-env-$v" "FAIL $v=$val"
done
tmp=$(mktemp -d 2>/dev/null) || tmp=
[ -n "$tmp" ] && check tmp-writable OK || check tmp-writable FAIL

# ---------------------------------------------------------------------------------------------------
if has_group state; then
  # Finding 4: the ledger (grant ids, token hashes, run-time grants) and a config Sluice reloads.
  succeeds ledger-read sh -c 'test -s "$1" && cat "$1"' sh "$T_DIR/state/ledger.json"
  succeeds config-read sh -c 'test -s "$1" && head -c 80 "$1"' sh "$T_DIR/sluice.yaml"
  # A write that works inside may land in the sandbox's own scratch space: the host judges it.
  printf '\n# written from inside the sandbox\n' 2>/dev/null >> "$T_DIR/sluice.yaml"
  attack config-write "TRIED rc=$?"
  succeeds audit-read sh -c 'test -s "$1" && head -c 80 "$1"' sh "$T_DIR/audit.jsonl"
fi

if has_group sockets; then
  # Finding 2: issue ourselves an unrestricted grant with loopback through Sluice's admin socket.
  http_code admin-socket --unix-socket "$T_DIR/state/admin.sock" -H 'content-type: application/json' \
    -d '{"unrestricted":true,"allowAddressClasses":["loopback","private","link_local"]}' http://sluice/v1/grants
  # Finding 3: act with grant b's authority through its dedicated socket (b may reach the loopback origin).
  http_code other-grant-socket --unix-socket "$T_DIR/state/b.sock" "http://127.0.0.1:$T_SECRET_PORT/"
  # Finding 12: a token-less dedicated TCP listener of another grant, on the host's loopback.
  py other-grant-tcp-listener tcp 127.0.0.1 "$T_DEDICATED_PORT"
  # Abstract Unix sockets are scoped by network namespace, not by the filesystem.
  py abstract-socket unix "@$T_ABSTRACT"
fi


if has_group workdirs; then
  if printf 'from-sandbox\n' > "$T_DIR/work/out.txt" 2>/dev/null; then check write-work OK; else check write-work FAIL; fi
  if [ "$(cat "$T_DIR/input/in.txt" 2>/dev/null)" = "input" ]; then check read-input OK; else check read-input FAIL; fi
  succeeds write-input sh -c 'printf x >> "$1"' sh "$T_DIR/input/in.txt"
  printf x 2>/dev/null > "$T_DIR/cwd-write.txt"
  attack write-outside-write-dirs "TRIED rc=$?"
fi

# ---------------------------------------------------------------------------------------------------
if has_group net; then
  out=$(timeout "$T" curl -sS -m 5 "http://$T_ALLOWED_HOST:$T_ALLOWED_PORT/through-bridge" 2>&1); rc=$?
  [ "$out" = "origin:GET:/through-bridge" ] && check granted-request OK || check granted-request "FAIL rc=$rc $(one_line "$out")"
  # Ignore the proxy: straight to the host's loopback origin.
  http_code direct-loopback --noproxy '*' "http://127.0.0.1:$T_SECRET_PORT/"
  py network-interfaces interfaces
  for ns in $T_HOST_NAMESERVERS; do py "dns-host-resolver-$ns" dns "$ns" 53; done
  py dns-127.0.0.53 dns 127.0.0.53 53
  py dns-test-server dns 127.0.0.1 "$T_DNS_PORT"
  py raw-socket socket AF_INET SOCK_RAW 1
  py packet-socket socket AF_PACKET SOCK_RAW 0
  py vsock-socket socket AF_VSOCK SOCK_STREAM 0
fi

if has_group env; then
  # Finding 5: the caller's secrets. Names here; the host greps the DUMP lines for the values.
  found=
  for v in $T_SECRET_NAMES; do eval "[ -n \"\${$v+x}\" ]" && found="$found $v"; done
  for v in $(env | sed -n 's/^\(SLUICE_[A-Za-z0-9_]*\)=.*/\1/p'); do found="$found $v"; done
  [ -z "$found" ] && attack env-secrets BLOCKED || attack env-secrets "ESCAPED$found"
  env | sed 's/^/DUMP env /'
  for p in /proc/[0-9]*; do
    { tr '\0' ' ' < "$p/environ"; echo; } 2>/dev/null | sed "s|^|DUMP environ ${p#/proc/} |"
    { tr '\0' ' ' < "$p/cmdline"; echo; } 2>/dev/null | sed "s|^|DUMP cmdline ${p#/proc/} |"
  done
  if [ -n "$HOME" ] && [ "$HOME" != / ] && [ -d "$HOME" ] && [ -z "$(ls -A "$HOME" 2>/dev/null)" ]; then check home-empty OK; else check home-empty "FAIL HOME=$HOME: $(ls -A "$HOME" 2>&1 | head -c 80)"; fi
fi

if has_group files; then
  succeeds caller-home-file cat "$T_CALLER_HOME/.netrc"
  succeeds host-marker cat "$T_MARKER"
  succeeds proc1-root-marker cat "/proc/1/root$T_MARKER"
  succeeds proc-sluice-root-marker cat "/proc/$T_SLUICE_PID/root$T_MARKER"
  succeeds etc-shadow cat /etc/shadow
  succeeds proc1-root-etc-shadow cat /proc/1/root/etc/shadow
  shown=
  for d in /root /home /var /opt /srv /mnt /media /boot /work; do
    entries=$(ls -A "$d" 2>/dev/null)
    # Node outside /usr (Node 24 unpacked, nvm) is bound alone at its own path, so that the command can
    # run it: the directories leading to that one file are not host content.
    case "$T_NODE" in "$d"/*) rest=${T_NODE#"$d"/}; entries=$(printf '%s\n' "$entries" | grep -vxF "${rest%%/*}") ;; esac
    [ -n "$entries" ] && shown="$shown $d"
  done
  [ -z "$shown" ] && attack host-directories BLOCKED || attack host-directories "ESCAPED$shown"
fi

# ---------------------------------------------------------------------------------------------------
if has_group proc; then
  # Findings 1 and 4: Sluice's own process, and a host process of the caller's own uid (the victim).
  succeeds signal-sluice kill -0 "$T_SLUICE_PID"
  succeeds signal-victim kill -0 "$T_VICTIM_PID"
  # /proc files report size 0: read them to see whether anything comes back.
  succeeds environ-sluice sh -c 'v=$(tr "\0" " " < "$1") && [ -n "$v" ] && printf "%s" "$v" | head -c 60' sh "/proc/$T_SLUICE_PID/environ"
  succeeds environ-victim sh -c 'v=$(tr "\0" " " < "$1") && [ -n "$v" ] && printf "%s" "$v" | head -c 60' sh "/proc/$T_VICTIM_PID/environ"
  succeeds nsenter-sluice-net nsenter -t "$T_SLUICE_PID" -n true
  succeeds nsenter-victim-net-mnt nsenter -t "$T_VICTIM_PID" -n -m true
  succeeds nsenter-victim-user nsenter -t "$T_VICTIM_PID" -U --preserve-credentials true
  py ptrace-sluice ptrace "$T_SLUICE_PID"
  py ptrace-victim ptrace "$T_VICTIM_PID"
  py session-leader-outside session
  # SIGHUP last: the victim dies of it (the host sees that); Sluice here counts it instead.
  succeeds hup-sluice kill -HUP "$T_SLUICE_PID"
  succeeds hup-victim kill -HUP "$T_VICTIM_PID"
fi

if has_group priv; then
  st=$(cat /proc/self/status)
  field() { printf '%s\n' "$st" | sed -n "s/^$1:[[:space:]]*//p"; }
  caps=
  for c in CapInh CapPrm CapEff CapBnd CapAmb; do v=$(field $c); case $v in *[1-9a-f]*|'') caps="$caps $c=$v" ;; esac; done
  [ -z "$caps" ] && attack capabilities "BLOCKED all zero" || attack capabilities "ESCAPED$caps"
  [ "$(field NoNewPrivs)" = 1 ] && attack no-new-privs-unset "BLOCKED NoNewPrivs=1" || attack no-new-privs-unset "ESCAPED NoNewPrivs=$(field NoNewPrivs)"
  [ "$(field Seccomp)" = 2 ] && attack seccomp-missing "BLOCKED Seccomp=2" || attack seccomp-missing "ESCAPED Seccomp=$(field Seccomp)"
  # The same namespace as the host (ids passed in as T_HOST_NS="net:[…] pid:[…] …") is no namespace.
  for ns in user pid mnt ipc uts net; do
    mine=$(readlink "/proc/self/ns/$ns" 2>/dev/null)
    case " $T_HOST_NS " in
      *" $mine "*) attack "namespace-$ns" "ESCAPED shares $mine with the host" ;;
      *) [ -n "$mine" ] && attack "namespace-$ns" "BLOCKED $mine" || attack "namespace-$ns" "ERROR cannot read /proc/self/ns/$ns" ;;
    esac
  done
  if [ -n "$tmp" ] && mkdir "$tmp/mnt" 2>/dev/null; then py mount-tmpfs mount "$tmp/mnt"; else attack mount-tmpfs "ERROR no directory to mount on"; fi
  succeeds unshare-user unshare -U true
  succeeds unshare-net unshare -n true
  succeeds unshare-user-net unshare -Urn true
  py seccomp-keyctl syscall keyctl
  py seccomp-bpf syscall bpf
  # Review 2026-12-04 finding 8: calls the deny-list missed, and numbers newer than its table.
  py seccomp-open-tree-attr syscall open_tree_attr
  py seccomp-pidfd-getfd pidfd_getfd
  py seccomp-modify-ldt syscall modify_ldt
  py seccomp-memfd-secret syscall memfd_secret
  py seccomp-process-madvise syscall process_madvise
  # 470: highestKnown (469, file_setattr, in src/cli/seccomp-filter.ts) + 1, listns from Linux 6.18 on.
  py seccomp-unknown-syscall unknown 470 1000
  py ptrace-traceme traceme
fi

# ---------------------------------------------------------------------------------------------------
# Last, because they would spoil the attempts above if they worked: deleting or moving Sluice's
# sockets and state is a denial of service for every principal (and the admin CLI).
if has_group sockets; then
  rm -f "$T_DIR/state/admin.sock" "$T_DIR/state/b.sock" 2>/dev/null
  attack unlink-sockets "TRIED rm rc=$?"
  if mv "$T_DIR/state" "$T_DIR/state.moved" 2>/dev/null; then
    mv "$T_DIR/state.moved" "$T_DIR/state" 2>/dev/null
    attack rename-state-dir "ESCAPED moved and moved back"
  else
    attack rename-state-dir "BLOCKED"
  fi
fi

echo "END"
exit 0
