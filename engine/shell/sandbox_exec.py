"""The shell sandbox's launcher: confine this process, then exec the command.

Run as `python -I -S sandbox_exec.py POLICY -- COMMAND...` (isolated, no site: it imports
only `os`, `sys` and `ctypes`, and starts in the time Python takes to start: json, struct
and signal would each add milliseconds to every command). `anyio.open_process` has no
pre-exec hook, and a hook run in a forked copy of a threaded runtime is unsafe, so the
confinement happens here, in a process of its own, which then becomes the command (`exec`
keeps its pid, so the process group the runtime records is the command's).

POLICY is one argument of lines: `net` (the network is reachable), then `r PATH` (read and
run), `w PATH` (write as well), `d PATH` (a device such as /dev/null: read and write). The confinement is Linux's Landlock, which grants access instead of
denying it: what the policy does not name cannot be opened at all, by the command or
anything it starts. Its network rules cover TCP only, so without `net` the process also
enters a network namespace of its own (as root directly, else inside a user namespace),
where no interface but a down loopback exists: no TCP, UDP or DNS reaches anywhere.
Signals and abstract UNIX sockets are scoped to the sandbox where the kernel can (ABI 6).

Anything that cannot be applied ends the process with exit code 126 and a line on stderr
starting `agentdeck-sandbox:`: it never runs a command unconfined. `--probe` applies the
policy and reports what held instead of running anything.
"""

import _signal  # (the `signal` module imports enum: milliseconds a command)
import ctypes
import os
import sys

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446  # every architecture
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38
CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REFER, TRUNCATE = 1 << 13, 1 << 14
FS_V1 = (1 << 13) - 1  # execute .. make_sym
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def fail(message: str) -> None:
    os.write(2, f"agentdeck-sandbox: {message}\n".encode(errors="replace"))
    os._exit(126)


def _errno() -> str:
    return os.strerror(ctypes.get_errno())


def abi() -> int:
    """The kernel's Landlock ABI version (0: none)."""
    version = _libc.syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0),
                            ctypes.c_uint32(CREATE_RULESET_VERSION))  # fmt: skip
    return max(int(version), 0)


def handled_fs(version: int) -> int:
    rights = FS_V1
    if version >= 2:
        rights |= REFER
    if version >= 3:
        rights |= TRUNCATE
    return rights


def isolate_network() -> str:
    """A network namespace of our own: as root directly, else inside a user namespace
    (this uid and gid mapped to themselves). Returns how, or "" when neither is allowed."""
    if _libc.unshare(CLONE_NEWNET) == 0:
        return "netns"
    uid, gid = os.getuid(), os.getgid()
    if _libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0:
        return ""
    try:
        for name, text in (("uid_map", f"{uid} {uid} 1"), ("setgroups", "deny"),
                           ("gid_map", f"{gid} {gid} 1")):  # fmt: skip
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
    except OSError as exc:
        fail(f"cannot map the user namespace: {exc}")
    return "userns+netns"


def parse(text: str) -> dict:
    """The policy's lines (see the module)."""
    policy: dict = {"read": [], "write": [], "devices": [], "net": False}
    keys = {"r": "read", "w": "write", "d": "devices"}
    for line in text.split("\n"):
        if line == "net":
            policy["net"] = True
        elif line[:2] in ("r ", "w ", "d "):
            policy[keys[line[0]]].append(line[2:])
        elif line:
            fail(f"bad policy line: {line!r}")
    return policy


def _u64(*values: int) -> bytes:
    return b"".join(v.to_bytes(8, sys.byteorder) for v in values)


def confine(policy: dict, version: int) -> dict:
    """Apply `policy` to this process; what held, for --probe."""
    fs = handled_fs(version)
    net = 0 if policy.get("net") or version < 4 else NET_BIND_TCP | NET_CONNECT_TCP
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if version >= 6 else 0
    if version >= 6:
        attr = _u64(fs, net, scoped)
    elif version >= 4:
        attr = _u64(fs, net)
    else:
        attr = _u64(fs)
    buf = ctypes.create_string_buffer(attr, len(attr))
    ruleset = _libc.syscall(SYS_CREATE_RULESET, buf, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if ruleset < 0:
        fail(f"landlock_create_ruleset: {_errno()}")
    read = READ_FILE | READ_DIR | EXECUTE
    file_rights = EXECUTE | WRITE_FILE | READ_FILE | (TRUNCATE if version >= 3 else 0)
    granted = []
    for key, rights in (("read", read), ("write", fs), ("devices", READ_FILE | WRITE_FILE)):
        for path in policy.get(key, ()):
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # not on this machine: nothing to grant
            try:
                allowed = rights if os.path.isdir(path) else rights & file_rights
                packed = _u64(allowed) + fd.to_bytes(4, sys.byteorder, signed=True)
                rule = ctypes.create_string_buffer(packed, 12)
                if _libc.syscall(SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH),
                                 rule, ctypes.c_uint32(0)) != 0:  # fmt: skip
                    fail(f"landlock_add_rule {path}: {_errno()}")
            finally:
                os.close(fd)
            granted.append(path)
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        fail(f"prctl(NO_NEW_PRIVS): {_errno()}")
    if _libc.syscall(SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
        fail(f"landlock_restrict_self: {_errno()}")
    os.close(ruleset)
    return {"abi": version, "granted": granted, "tcp": net == 0, "scoped": bool(scoped)}


def main(argv: list) -> None:
    probe = argv[1:2] == ["--probe"]
    args = argv[2:] if probe else argv[1:]
    if not args:
        fail("usage: sandbox_exec.py [--probe] POLICY [-- COMMAND...]")
    policy = parse(args[0])
    command = args[2:] if args[1:2] == ["--"] else []
    if not probe and not command:
        fail("no command to run")
    version = abi()
    if version < 1:
        fail("Landlock is not available in this kernel")
    network = "open" if policy.get("net") else isolate_network()
    if not network and version < 4:
        fail("cannot isolate the network: no network namespace and Landlock before ABI 4")
    held = confine(policy, version)
    held["network"] = network or "tcp-only"
    if probe:
        os.write(1, repr(held).encode())
        os._exit(0)
    # Python starts with SIGPIPE and SIGXFSZ ignored, and an ignored signal stays ignored
    # across exec: the command gets them as any command does (`yes | head` ends quietly)
    _signal.signal(_signal.SIGPIPE, _signal.SIG_DFL)
    _signal.signal(_signal.SIGXFSZ, _signal.SIG_DFL)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        fail(f"cannot run {command[0]}: {exc.strerror}")


if __name__ == "__main__":
    main(sys.argv)
