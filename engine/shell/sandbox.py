"""The shell's sandbox: what a shell command may read, write and reach.

`[sandbox] shell` in agentdeck.toml: `workspace-write` (the default where the kernel has
Landlock), `read-only`, or `off`; `network` (default false) lets commands reach the
network. The policy is an allow-list, as Landlock grants rather than denies:

- read and run: the system (`/usr`, `/bin`, `/lib*`, `/etc`, `/opt`, ...) and the workspace;
- write: the workspace (not with `read-only`) and a private temporary directory of the run
  (`TMPDIR` names it; removed when the run ends);
- read and write: /dev/null, /dev/zero, /dev/full, /dev/random, /dev/urandom;
- nothing else: the room outside `workspace/` (execution.db, the API's token, logs), the
  operator's home, /proc, /sys and /run cannot be opened by the command or anything it
  starts; without `network`, no TCP, UDP or DNS leaves the command's network namespace.

Each command starts through the launcher (engine/shell/sandbox_exec.py, a few
milliseconds of Python that confines itself and execs the command). At start the runtime
asks the kernel for Landlock's ABI: where it is missing the runtime says so (at start, in
`agentdeck info`, the status bar and every shell decision card) and every shell call asks,
whatever the rules say. A call an operator approves "outside the sandbox" (a decision of
its own, never made by a rule) runs unconfined; "with the network", confined but online.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

LAUNCHER = Path(__file__).with_name("sandbox_exec.py")
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
Mode = Literal["workspace-write", "read-only", "off"]
# How a decision runs a shell call: as the room's sandbox says, in it with the network,
# or outside it (engine.domain.decisions.Decision.sandbox).
Choice = Literal["default", "network", "outside"]
# What a command prints when the sandbox refused it something (said to the model and the
# operator beside the command's own error).
DENIALS = ("Permission denied", "Operation not permitted", "Network is unreachable",
           "Read-only file system", "Temporary failure in name resolution",
           "Could not resolve host", "agentdeck-sandbox:")  # fmt: skip


@dataclass
class Sandbox:
    """The sandbox of one run: its mode, whether the kernel can apply it (`available`),
    and what it is, in words (`state`)."""

    mode: Mode
    network: bool
    workspace: Path
    available: bool = False
    state: str = "not probed"
    tmp: Path | None = None
    _policies: dict[bool, str] = field(default_factory=dict, repr=False)

    @property
    def on(self) -> bool:
        return self.mode != "off" and self.available

    @property
    def missing(self) -> bool:
        """Asked for and not possible here: every shell call then asks."""
        return self.mode != "off" and not self.available

    def policy(self, network: bool) -> str:
        """The launcher's policy (JSON), for a command with or without the network."""
        if network not in self._policies:
            ws = str(self.workspace.resolve())
            write = [ws] if self.mode == "workspace-write" else []
            if self.tmp is not None:
                write.append(str(self.tmp))
            read = [*SYSTEM, *([ws] if self.mode == "read-only" else [])]
            lines = [*(["net"] if network else []), *(f"r {p}" for p in read),
                     *(f"w {p}" for p in write), *(f"d {p}" for p in DEVICES)]  # fmt: skip
            self._policies[network] = "\n".join(lines)  # (sandbox_exec.py reads it)
        return self._policies[network]

    def wrap(self, argv: list[str], choice: Choice = "default") -> list[str] | None:
        """`argv` as it runs under the sandbox for `choice`; None: it runs as it is."""
        if not self.on or choice == "outside":
            return None
        network = self.network or choice == "network"
        return [sys.executable, "-I", "-S", str(LAUNCHER), self.policy(network), "--", *argv]

    def env(self, env: dict[str, str], choice: Choice = "default") -> dict[str, str]:
        """A sandboxed command's environment: its temporary directory is the run's."""
        if self.on and choice != "outside" and self.tmp is not None:
            return {**env, "TMPDIR": str(self.tmp)}
        return env

    def describe(self) -> str:
        """The sandbox in a few words, for info, the status bar and decision cards."""
        if self.mode == "off":
            return "off (agentdeck.toml)"
        if not self.available:
            return f"unavailable: {self.state}"
        net = "network on" if self.network else "no network"
        return f"{self.mode}, {net} ({self.state})"

    def start(self, *, temporary: bool = True) -> None:
        """Ask the kernel for Landlock (its ABI, in this process: no process is started)
        and make the run's temporary directory (`temporary`: a run's, not `info`'s). The launcher applies the policy to each
        command, and fails closed (exit 126) where it cannot."""
        if self.mode == "off":
            self.state = "off"
            return
        version = probe_abi()
        if version < 1:
            self.state = (f"no Landlock on {sys.platform}" if not sys.platform.startswith("linux")
                          else "this kernel has no Landlock (Linux 5.13+, enabled as an LSM)")  # fmt: skip
            return
        if not LAUNCHER.is_file():
            self.state = f"the launcher {LAUNCHER} is missing"
            return
        if temporary:
            self.tmp = Path(tempfile.mkdtemp(prefix="agentdeck-sandbox-"))
        self.available = True
        net = "TCP blocked by Landlock, the rest by a network namespace" if version >= 4 else (
            "a network namespace")  # fmt: skip
        self.state = f"Landlock ABI {version}; network: {net}"

    def stop(self) -> None:
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None


def denied(stderr: str) -> bool:
    """Whether a failed command's error reads like the sandbox refusing it something."""
    return any(word in stderr for word in DENIALS)


def probe_abi() -> int:
    """This kernel's Landlock ABI (0: none), asked in this process (for `agentdeck info`
    without a runtime)."""
    if not sys.platform.startswith("linux"):
        return 0
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return max(int(libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))), 0)
