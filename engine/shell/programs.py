"""What shell rules need to know of programs: the wrappers that run the command after them
(looked through, so `nice rm` is `rm`), and the programs that may run another program, or
write where their words say (so a glob such as `git *` or `*` never allows them).

engine/shell/words.py applies it. Pure functions, no I/O. The list is not complete: a
program not named here that runs others (a build tool's scripts, a test runner's plugins)
runs what it is given, and a rule reads only the command, never the files a program reads
(git's hooks and `.git/config`, a Makefile).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass

SHELLS = frozenset("sh bash dash zsh ksh mksh ash yash posh fish csh tcsh".split())
# Wrappers that run the command after them with other rights or other words: a glob
# allows nothing run through them.
RUNNING_WRAPPERS = frozenset({"env", "sudo", "doas", "xargs"})
# Programs that run what their words say, whatever the words.
ALWAYS_RUNS = frozenset(
    ". source trap eval ssh watch strace ltrace gdb valgrind flock nsenter unshare chroot su "
    "runuser script parallel taskset numactl prlimit unbuffer fakeroot faketime firejail "
    "bwrap screen tmux expect vi vim nvim view ex vimdiff emacs less more man".split()
)
# git's own commands that run nothing they are told to; any other may be an alias
GIT_COMMANDS = frozenset(
    "add am apply archive blame branch cat-file checkout cherry cherry-pick clean clone "
    "commit count-objects describe diff fetch for-each-ref format-patch fsck gc grep help "
    "init log ls-files ls-remote ls-tree merge merge-base mv name-rev notes pull push "
    "range-diff rebase reflog remote reset restore rev-list rev-parse revert rm shortlog "
    "show show-ref sparse-checkout stash status switch tag var verify-commit version "
    "whatchanged worktree".split()
)


@dataclass(frozen=True)
class Word:
    """A word as the shell gives it to a program."""

    text: str
    assign: bool = False  # NAME=VALUE, NAME unquoted
    dynamic: bool = False  # holds an expansion: its value is not known


def shell_string(args: Sequence[Word]) -> str | None:
    """The string `sh -c STRING` runs; None for a script or standard input."""
    has_c, i = False, 0
    while i < len(args) and args[i].text[:1] in ("-", "+") and len(args[i].text) > 1:
        a = args[i].text
        if a == "--":
            i += 1
            break
        has_c = has_c or (a[0] == "-" and a[1] != "-" and "c" in a)
        i += 1 + (a in ("--rcfile", "--init-file") or (a[1] != "-" and bool(set(a) & set("oO"))))
    return args[i].text if has_c and i < len(args) else None


_SAME_AGAIN = re.compile(r"[\w./,:@%+-]+")


def eval_string(args: Sequence[Word]) -> str | None:
    """What `eval` runs, to be parsed again; None when its words would read the same (then
    they are looked through with no depth spent, so `eval eval ... rm` is seen)."""
    if all(_SAME_AGAIN.fullmatch(w.text) for w in args):
        return None
    return " ".join(w.text for w in args)


def _skip(args: Sequence[Word], valued: str = "", long_valued: tuple[str, ...] = ()) -> list[Word]:
    """`args` past a wrapper's options (`valued`: short ones that take a value; `long_valued`:
    long ones that take the next word), past a `--`, and past NAME=VALUE words."""
    i = 0
    while i < len(args):
        a = args[i].text
        if a == "--":
            i += 1
            break
        if a.startswith("--"):
            i += 1 + (a in long_valued)
        elif a.startswith("-") and len(a) > 1:
            k = next((k for k, ch in enumerate(a) if k and ch in valued), 0)
            i += 1 + (k == len(a) - 1)
        else:
            break
    while i < len(args) and args[i].assign:
        i += 1
    return list(args[i:])


def _env(args: Sequence[Word]) -> list[Word]:
    rest = list(args)
    while rest:
        a = rest[0].text
        if a.startswith(("-S", "--split-string")):  # -S STRING: STRING split into words
            value, take = (a[2:] if a.startswith("-S") else a.partition("=")[2]), 1
            if not value and "=" not in a:
                value, take = (rest[1].text if len(rest) > 1 else ""), 2
            try:
                split = shlex.split(value)
            except ValueError:
                split = value.split()
            made = [Word(w, assign=bool(re.match(r"[A-Za-z_]\w*=", w))) for w in split]
            rest = made + rest[take:]
        elif a.startswith("-") and a != "-":
            rest = rest[1 + (a in ("-u", "-C", "-P", "-a", "--unset", "--chdir", "--argv0")) :]
        elif "=" in a:  # env takes any NAME=VALUE
            rest = rest[1:]
        else:
            break
    return rest


def _xargs(args: Sequence[Word]) -> list[Word]:
    long_valued = ("--arg-file", "--delimiter", "--max-args", "--max-procs", "--max-chars",
                   "--process-slot-var")  # fmt: skip
    rest = _skip(args, "adEILnPs", long_valued)
    return [*rest, Word("{}")] if rest else rest  # what it reads goes last


def _command(args: Sequence[Word]) -> list[Word]:
    options = [a.text for a in args[: len(args) - len(_skip(args))]]
    return [] if any("v" in o or "V" in o for o in options) else _skip(args)


def _then_number(rest: list[Word]) -> list[Word]:
    return rest[1:] if rest and rest[0].text.isdigit() else rest


_SUDO_LONG = ("--user", "--group", "--close-from", "--chdir", "--host", "--prompt", "--chroot",
              "--role", "--type", "--command-timeout", "--other-user")  # fmt: skip

# The wrappers looked through: each gives the words of the command it runs.
WRAPPERS: dict[str, Callable[[Sequence[Word]], list[Word]]] = {
    "env": _env,
    "nice": lambda a: _skip(a, "n", ("--adjustment",)),
    "command": _command,
    "builtin": _skip,
    "exec": lambda a: _skip(a, "a"),
    "sudo": lambda a: _skip(a, "ugCpRrtTUD", _SUDO_LONG),
    "doas": lambda a: _skip(a, "uC"),
    "xargs": _xargs,
    "timeout": lambda a: _skip(a, "ks", ("--kill-after", "--signal"))[1:],  # then a duration
    "nohup": _skip,
    "stdbuf": lambda a: _skip(a, "ioe", ("--input", "--output", "--error")),
    "time": lambda a: _skip(a, "fo", ("--format", "--output")),
    "ionice": lambda a: _skip(a, "cnpPu", ("--class", "--classdata", "--pid", "--pgid", "--uid")),
    "chrt": lambda a: _then_number(_skip(a, "TPD")),  # then a priority
    "setsid": _skip,
    "busybox": _skip,
}


def _cluster(args: list[str], letters: str, longs: tuple[str, ...] = ()) -> bool:
    """Whether a short option cluster (`-avze`) holds one of `letters`, or a long option
    (`--rsh=...`) is one of `longs`."""
    return any((re.fullmatch(r"-[A-Za-z]+", a) and set(a[1:]) & set(letters))
               or a.split("=", 1)[0] in longs for a in args)  # fmt: skip


_GIT_RUN_OPTIONS = ("--upload-pack", "--receive-pack", "--exec", "--extcmd", "--template")


def _git(args: list[str]) -> bool:
    i = 0
    while i < len(args) and args[i].startswith("-"):
        if args[i].startswith(("-c", "-C", "--config-env", "--exec-path", "--git-dir",
                               "--work-tree")):  # fmt: skip
            return True  # another configuration, or another repository's
        i += 1 + (args[i] in ("--namespace", "--super-prefix"))
    if i == len(args):
        return False
    sub, rest = args[i], args[i + 1 :]
    pager = sub == "grep" and any(a.startswith(("-O", "--open-files-in-pager")) for a in rest)
    return (sub not in GIT_COMMANDS or pager
            or (sub == "rebase" and _cluster(rest, "x", ("--exec",)))
            or (sub == "clone" and _cluster(rest, "uc", ("--config",)))
            or _cluster(rest, "", _GIT_RUN_OPTIONS))  # fmt: skip


def _sed(args: list[str]) -> bool:
    if "--sandbox" in args:  # e, w and r refused
        return False
    scripts = [a for p, a in zip(["", *args], args, strict=False) if p in ("-e", "--expression")]
    scripts += [a[2:] for a in args if a.startswith("-e") and len(a) > 2]
    scripts += [a.partition("=")[2] for a in args if a.startswith("--expression=")]
    if not scripts:
        scripts = [a for a in args if not a.startswith("-")][:1]
    return _cluster(args, "f", ("--file",)) or any(re.search("[ewW]", s) for s in scripts)


def _awk(args: list[str]) -> bool:
    return any(s in a for a in args for s in ("system", "|", "@load")) or _cluster(
        args, "fEl", ("--file", "--exec", "--load")
    )


_TAR_LONG = ("--to-command", "--use-compress-program", "--checkpoint-action", "--info-script",
             "--new-volume-script", "--rsh-command")  # fmt: skip
_FIND_RUNS = frozenset(
    "-exec -execdir -ok -okdir -delete -fprint -fprint0 -fprintf -fls".split()
)  # (-delete and -fprint... write)
_MAKE_LONG = ("--file", "--makefile", "--eval")
_NODE = ("--eval", "--print", "--require", "--import", "--loader")

# Programs that may run another program (or write where their words say), by their words.
RUNS_OTHERS: dict[str, Callable[[list[str]], bool]] = {
    "git": _git,
    "find": lambda a: bool(_FIND_RUNS.intersection(a)),
    "sed": _sed,
    "awk": _awk, "gawk": _awk, "mawk": _awk, "nawk": _awk,
    "tar": lambda a: _cluster(a, "IF", _TAR_LONG) or bool(a and re.fullmatch(r"\w*[IF]\w*", a[0])),
    "rsync": lambda a: _cluster(a, "e", ("--rsh", "--rsync-path")),
    "scp": lambda a: _cluster(a, "oSF"),
    "sftp": lambda a: _cluster(a, "oSF"),
    "make": lambda a: any("=" in w for w in a) or _cluster(a, "fE", _MAKE_LONG),
    "perl": lambda a: _cluster(a, "eE") or any(w.startswith(("-M", "-m")) for w in a),
    "ruby": lambda a: _cluster(a, "e"),
    "node": lambda a: _cluster(a, "epr", _NODE),
    "nodejs": lambda a: _cluster(a, "epr", _NODE),
    "bun": lambda a: _cluster(a, "epr", _NODE),
    "php": lambda a: _cluster(a, "rBRE"),
    "lua": lambda a: _cluster(a, "e"),
    "rscript": lambda a: _cluster(a, "e"),
    "julia": lambda a: _cluster(a, "eE"),
    "zip": lambda a: "-TT" in a or _cluster(a, "", ("--unzip-command",)),
}  # fmt: skip


def runs_others(name: str, args: Sequence[Word]) -> bool:
    """Whether program `name` (lower case) may run another program given `args`. A word
    of such a program that holds an expansion counts: a file named `-exec` is a word of
    `find *`."""
    if name in ALWAYS_RUNS or name in SHELLS or name in RUNNING_WRAPPERS:
        return True
    python = re.fullmatch(r"(python|pypy)[0-9.]*", name)
    test = (lambda a: _cluster(a, "c")) if python else RUNS_OTHERS.get(name)
    return test is not None and (any(a.dynamic for a in args) or test([a.text for a in args]))
