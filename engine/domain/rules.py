"""Rules: allow, ask for or deny a tool's calls by their arguments, with no operator asked.

A rule is an effect (`allow`, `ask`, `deny`), a tool, an argument pattern and a scope
(`once`: the next call it decides, then it is spent; `thread`: one thread's calls; `room`:
every call), who made it and when, and an optional expiry. Rules come from execution.db
(a remembered decision, `agentdeck rules add`) and from agentdeck.toml's `[[rules]]`.

A call is decided by the first rule that matches it, deny rules first, then ask, then
allow; among rules of one effect the most specific first (an exact pattern before a glob,
a longer literal part before a shorter, a thread's or once rule before a room's, the newer
before the older). The rule that decided is recorded with the call (`rule_calls`).

Patterns, per tool (`check_pattern` refuses one that cannot be read):

- `shell`: a glob on the command as the shell reads it (`git status`, `git status*`,
  `pytest *`), matched on what engine/shell/words.py makes of it: each simple command's
  words after quoting, with single spaces between them, its program by its base name,
  leading assignments skipped and wrappers looked through (`env`, `nice`, `command`,
  `sudo`, `xargs`, `timeout`, `nohup`, `busybox`, ...; the strings of `sh -c`, `eval`).
  Deny and ask rules match if any command in it does, at any wrapper, or the raw text or a
  piece of it cut at CHAINING does: `/bin/rm`, `rm<TAB>-f`, `(rm ...)`, `'rm'`, `\\rm`,
  `r''m`, `env rm`, `sudo rm`, `sh -c 'rm ...'` are all `rm ...` to `rm *` (and to
  `/bin/rm *`: a deny or ask pattern's program named by a path stands for its name too). A
  command whose program cannot be known from its text (`$cmd`, `{rm,-rf,x}`, nested past
  the bounds) matches every deny and ask rule. An allow rule only ever matches a simple
  command: one that holds none of ``; & | < > ` $(`` nor a line break, anywhere, quoted or
  not, no parenthesis, and parses to its end (so `git status*` never covers
  `git status; rm -rf ~`). A glob matches its program as written (`git *` is not `./git`)
  and its words, and only when it is plain: it sets no variable, is not run through `env`,
  `sudo`, `doas` or `xargs`, and its program runs no other program with these words
  (engine/shell/programs.py: the shells, `eval`, `ssh`, `vim`, `git -c` or `config` or an
  alias, `find -exec` or `-delete`, `awk` with `system` or `|`, `sed` with an `e` or `w`,
  `python -c`, `perl -e`, `tar --to-command` or `-I`, `rsync -e`, `make VAR=...`, ...; or
  one of these whose words hold a glob or a variable, as `git *` would). Any other is
  allowed only by a pattern without wildcards that is exactly it: its text, or its words
  as shlex.join quotes them, or with single spaces.
- `read_file`, `write_file`, `list_dir`: a path glob inside the workspace (`notes/*.md`,
  `src/**`), matched against the call's path made relative and normalized; `*` and `?`
  stay within one folder, `**` crosses folders. A path out of the workspace matches none.
- `http_get`: a URL, or a prefix ending in `*` (`https://api.github.com/*`); scheme and
  host compare without case, the path without its dot segments (`/public/../admin` is
  not under `/public/`). The tool follows no redirect, so a prefix bounds what is fetched.
- any other tool: the exact arguments, as a JSON object.
- no pattern: any arguments (every rule made before patterns existed).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import posixpath
import re
import shlex
from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, model_validator

from engine.domain.decisions import Decision
from engine.shell import words as shell_words
from engine.shell.read import _parse, prepare, read_ahead  # noqa: F401  (also named here)

Effect = Literal["allow", "ask", "deny"]
Scope = Literal["once", "thread", "room"]
EFFECTS: tuple[Effect, ...] = ("deny", "ask", "allow")  # the order rules are asked in
SCOPES: tuple[Scope, ...] = ("once", "thread", "room")
FILE_TOOLS = frozenset({"read_file", "write_file", "list_dir"})
URL_TOOLS = frozenset({"http_get"})
# What makes a shell command more than one simple command (or a file's redirection).
CHAINING = re.compile(r";|&|\||<|>|`|\$\(|\n|\r")
WILDCARD = re.compile(r"[*?\[]")
_PROGRAM_PATH = re.compile(r"(\S*/)([^\s/]+)(?=\s|$)")  # a pattern's program named by a path
MAX_PATTERN = 4096


class RuleError(ValueError):
    """A rule or pattern that cannot be used; the text says why."""


class Rule(BaseModel):
    """One rule, as stored and as listed (`uses` and `last_used` as of the listing)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    tool: str = Field(min_length=1, max_length=200)
    effect: Effect
    pattern: str | None = None  # None: any arguments
    scope: Scope = "room"
    thread_id: str | None = None  # a thread rule's thread (a once rule's, if it has one)
    made_by: str = "operator"
    made_at: float | None = None
    expires_at: float | None = None
    reason: str = ""
    id: str = ""  # "12" in execution.db, "toml:3" (the file's third rule)
    source: Literal["db", "toml"] = "db"
    decision_id: str | None = None  # the remembered decision that made it
    uses: int = 0
    last_used: float | None = None
    # agentdeck.toml's allow rules of shell only: what it allows reaches the network from
    # the sandbox (engine/shell/sandbox.py). Never outside it: no rule makes that.
    network: bool = False

    @model_validator(mode="after")
    def _valid(self) -> Rule:
        if self.scope == "thread" and not self.thread_id:
            raise ValueError("a thread rule names its thread")
        if self.scope == "room" and self.thread_id:
            raise ValueError("a room rule names no thread")
        check_pattern(self.tool, self.pattern)
        return self

    @property
    def key(self) -> str:
        """What its uses are counted under: `db:<id>`, or `toml:<fingerprint>`, so that
        moving a rule in the file keeps its count and changing it starts a new one."""
        if self.source == "db":
            return f"db:{self.id}"
        what = [self.tool, self.effect, self.pattern, self.scope, self.thread_id, self.expires_at]
        return "toml:" + hashlib.sha256(json.dumps(what).encode()).hexdigest()[:12]

    def state(self, now: float) -> Literal["active", "expired", "spent"]:
        if self.scope == "once" and self.uses >= 1:
            return "spent"
        if self.expires_at is not None and now >= self.expires_at:
            return "expired"
        return "active"

    def covers(self, tool: str, thread_id: str) -> bool:
        """Whether calls of `tool` on `thread_id` are within its reach (its pattern aside)."""
        return self.tool == tool and (self.thread_id is None or self.thread_id == thread_id)

    def matches(self, args: Any, workspace: Path | None = None) -> bool:
        """Whether a call's arguments match its pattern."""
        return self.pattern is None or _matches(
            self.tool, self.pattern, self.effect, args, workspace
        )

    def specificity(self) -> tuple[int, int, int, float, int]:
        """Larger is more specific (see the module's docstring)."""
        exact = self.pattern is not None and _literal(self.tool, self.pattern)
        literal = len(WILDCARD.sub("", self.pattern or ""))
        narrow = 0 if self.scope == "room" else 1 + (self.scope == "once")
        number = int(self.id) if self.id.isdigit() else 0
        return (int(exact) + (self.pattern is not None), literal, narrow, self.made_at or 0.0,
                number)  # fmt: skip

    def shown_pattern(self) -> str:
        return "(any arguments)" if self.pattern is None else self.pattern

    def describe(self) -> str:
        """The rule in a few words, as a call's error or suspension names it."""
        where = "agentdeck.toml's" if self.source == "toml" else "a remembered"
        net = ", with the network" if self.network else ""
        return f"{where} {self.scope} rule {self.id} ({self.tool}: {self.shown_pattern()}{net})"


def check_pattern(tool: str, pattern: str | None) -> None:
    """Raise RuleError unless `pattern` can be read as `tool`'s argument pattern."""
    if pattern is None:
        return
    if not pattern or len(pattern) > MAX_PATTERN or "\x00" in pattern:
        raise RuleError(f"a pattern is 1 to {MAX_PATTERN} characters, without NUL")
    if tool in FILE_TOOLS:
        if pattern.startswith("/") or ".." in pattern.split("/"):
            raise RuleError(
                f"{tool} pattern {pattern!r}: a path glob inside the workspace, relative, "
                "without '..'"
            )
    elif tool in URL_TOOLS:
        if not re.match(r"(?i)https?://[^/?#*]", pattern):
            raise RuleError(f"{tool} pattern {pattern!r}: a URL (or prefix ending in *) "
                            "starting http:// or https:// and a host")  # fmt: skip
    elif tool != "shell":
        try:
            value = json.loads(pattern)
        except (ValueError, RecursionError):
            value = None
        if not isinstance(value, dict):
            raise RuleError(f"{tool} pattern {pattern!r}: the exact arguments, a JSON object "
                            "(globs are for shell, the file tools and http_get)")  # fmt: skip


def narrowest(tool: str, args: Any) -> str:
    """The narrowest pattern that matches a call of `tool` with `args`: for shell its exact
    command, for a file tool its path, for http_get its URL, else its exact arguments."""
    if isinstance(args, dict):
        if tool == "shell" and isinstance(args.get("command"), str):
            return _escape(args["command"].strip())
        if tool in FILE_TOOLS and isinstance(args.get("path", "."), str):
            return _escape(posixpath.normpath(args.get("path", ".") or "."))
        if tool in URL_TOOLS and isinstance(args.get("url"), str):
            return _url(args["url"])
    return json.dumps(args, sort_keys=True, ensure_ascii=False)


def _escape(text: str) -> str:
    """`text` as a glob that matches only itself."""
    return re.sub(r"([*?\[])", r"[\1]", text)


def _literal(tool: str, pattern: str) -> bool:
    """Whether `pattern` matches one value only."""
    if tool in URL_TOOLS:
        return not pattern.endswith("*")
    if tool == "shell" or tool in FILE_TOOLS:
        return WILDCARD.search(re.sub(r"\[[*?\[]\]", "", pattern)) is None
    return True


def simple_command(command: str) -> bool:
    """Whether `command` is one simple command: none of CHAINING's characters, quoted or
    not, no parenthesis, and parsed to its end (engine/shell/words.py)."""
    return CHAINING.search(command) is None and _parse(command).single


def _shell_matches(pattern: str, effect: str, command: str) -> bool:
    """See the module's docstring: deny and ask rules match any spelling of any command
    in `command`; an allow rule one simple command, by a glob only if it runs no other."""
    parsed = _parse(command)
    if effect == "allow":
        if CHAINING.search(command) or not parsed.single:
            return False  # a chained command is never allowed by accident
        one = next(c for c in parsed.commands if not c.inner)
        if _literal("shell", pattern) and any(
            fnmatch.fnmatchcase(text, pattern) for text in _exact_texts(command, one)
        ):
            return True
        return one.plain and fnmatch.fnmatchcase(one.spelled, pattern)
    if parsed.opaque:  # what runs cannot be known: it may be what the rule names
        return True
    texts = [command, *(p.strip() for p in CHAINING.split(command))]
    texts += [view for c in parsed.commands for view in c.views]
    patterns = [pattern]
    named = _PROGRAM_PATH.match(pattern)  # `/bin/rm *` denies `rm x` too; `/bin/* *` stays
    if named and not WILDCARD.search(named[2]):
        patterns.append(pattern[named.start(2) :])
    return any(fnmatch.fnmatchcase(text, p) for text in texts if text for p in patterns)


def _exact_texts(command: str, one: shell_words.Command) -> list[str]:
    """The texts an exact pattern names `command` by: itself, and unless a word's value is
    unknown its words (all of them, wrappers and assignments too) as shlex.join quotes
    them, or with single spaces when no word is empty or holds a space."""
    if one.dynamic or one.opaque:
        return [command]
    texts = [command, shlex.join(one.words)]
    if all(w and not any(c.isspace() for c in w) for w in one.words):
        texts.append(" ".join(one.words))
    return texts


def _matches(tool: str, pattern: str, effect: str, args: Any, workspace: Path | None) -> bool:
    if tool == "shell":
        command = args.get("command") if isinstance(args, dict) else None
        return isinstance(command, str) and _shell_matches(pattern, effect, command.strip())
    if tool in FILE_TOOLS:
        path = args.get("path", ".") if isinstance(args, dict) else None
        inside = _inside(path, workspace) if isinstance(path, str) else None
        return inside is not None and _path_glob(pattern).match(inside) is not None
    if tool in URL_TOOLS:
        url = args.get("url") if isinstance(args, dict) else None
        if not isinstance(url, str):
            return False
        if pattern.endswith("*"):
            return _url(url).startswith(_url(pattern[:-1]))
        return _url(url) == _url(pattern)
    try:
        return json.loads(pattern) == args
    except (ValueError, RecursionError):
        return False


def _inside(path: str, workspace: Path | None) -> str | None:
    """`path` relative to the workspace and normalized; None when it leads out."""
    norm = posixpath.normpath(path or ".")
    if norm.startswith("/"):
        roots = {os.path.abspath(workspace), os.path.realpath(workspace)} if workspace else set()
        for root in roots:
            if norm == root or norm.startswith(root.rstrip("/") + "/"):
                norm = posixpath.relpath(norm, root)
                break
        else:
            return None
    return None if norm == ".." or norm.startswith("../") else norm


def _url(url: str) -> str:
    """A URL as a rule compares it: its scheme and host lower case, its path without dot
    segments (`/public/../admin` is `/admin`, also spelled `%2e%2e`, or with `%2f` or `\\`
    for a slash, as servers may read them), and a trailing `*` not taken for a prefix
    mark."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    text = urlunsplit(parts._replace(scheme=parts.scheme.lower(), netloc=parts.netloc.lower(),
                                     path=_dot_free(parts.path)))  # fmt: skip
    return text[:-1] + "%2A" if text.endswith("*") else text


_SLASH_DOT = re.compile(r"%2[eEfF]|\\")


def _dot_free(path: str) -> str:
    """`path` with its `.` and `..` segments resolved (RFC 3986 5.2.4), a trailing slash
    kept."""
    path = _SLASH_DOT.sub(lambda m: "." if m[0] in ("%2e", "%2E") else "/", path)
    out: list[str] = []
    segments = path.split("/")
    for segment in segments:
        if segment == "..":
            if len(out) > 1:
                out.pop()
        elif segment != ".":
            out.append(segment)
    if segments[-1] in (".", ".."):
        out.append("")  # `/a/b/..` is the folder `/a/`
    return "/".join(out)


@lru_cache(maxsize=512)
def _path_glob(glob: str) -> re.Pattern[str]:
    """A path glob as a regular expression: `*`, `?` within a folder, `**` across."""
    out, i = [], 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        elif glob[i] == "[" and (end := glob.find("]", i + 2)) != -1:
            inner = glob[i + 1 : end].replace("\\", "\\\\")
            out.append("[" + ("^" + inner[1:] if inner.startswith("!") else inner) + "]")
            i = end + 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return re.compile("".join(out) + r"\Z", re.DOTALL)


class RuleBook:
    """The rules a runtime applies, with their uses: agentdeck.toml's and execution.db's.
    Rules are looked at in memory; their changes are written by the caller."""

    def __init__(self, rules: Iterable[Rule] = (), workspace: Path | None = None) -> None:
        self.workspace = workspace
        self._rules: dict[str, Rule] = {}
        self._next = 1
        for rule in rules:
            self.add(rule)

    def load(self, rules: Iterable[Rule], last_id: int = 0) -> None:
        """Hold `rules` (and no other); new ids go past `last_id`. A rule held already
        keeps the uses counted here that the store does not have yet (a call it decided
        whose checkpoint is still being written), so a once rule is never used twice."""
        held = {rule.key: rule for rule in self._rules.values()}
        self._rules.clear()
        self._next = last_id + 1
        for rule in rules:
            mine = held.get(rule.key)
            if mine is not None and mine.uses > rule.uses:
                rule = rule.model_copy(update={"uses": mine.uses, "last_used": mine.last_used})
            self.add(rule)

    def add(self, rule: Rule) -> None:
        self._rules[rule.id] = rule
        if rule.id.isdigit():
            self._next = max(self._next, int(rule.id) + 1)

    def new_id(self) -> str:
        """The id the next rule made in execution.db gets."""
        self._next += 1
        return str(self._next - 1)

    def get(self, rule_id: str) -> Rule | None:
        return self._rules.get(rule_id)

    def remove(self, rule_id: str) -> Rule | None:
        return self._rules.pop(rule_id, None)

    def listed(self) -> list[Rule]:
        """Every rule: agentdeck.toml's in the file's order, then execution.db's by id."""
        return sorted(self._rules.values(), key=lambda r: (r.source == "db", _number(r.id)))

    def decide(
        self, tool: str, args: Any, thread_id: str, clock: Callable[[], float]
    ) -> Rule | None:
        """The rule that decides a call, its use counted (as the returned copy says); None
        when no rule does. The clock is read only when a rule may decide."""
        found = [r for r in self._rules.values()
                 if r.covers(tool, thread_id) and r.matches(args, self.workspace)]  # fmt: skip
        if not found:
            return None
        now = clock()
        live = [r for r in found if r.state(now) == "active"]
        if not live:
            return None
        best = min(live, key=lambda r: (EFFECTS.index(r.effect), _negated(r.specificity())))
        used = best.model_copy(update={"uses": best.uses + 1, "last_used": now})
        self._rules[best.id] = used
        return used

    def remembered(
        self, decision: Decision, tool: str, args: Any, thread_id: str, now: float, rule_id: str
    ) -> Rule:
        """The rule a remembered decision makes (and keeps), numbered `rule_id`: allow for
        an approval, deny for a cancel, with the decision's pattern or else the narrowest
        for the call."""
        assert decision.remember is not None
        pattern = decision.pattern
        try:
            check_pattern(tool, pattern)
        except RuleError:  # checked when it was decided; a room from elsewhere may differ
            pattern = None
        rule = Rule(
            id=rule_id, tool=tool, effect="allow" if decision.action == "resume" else "deny",
            pattern=pattern if pattern is not None else narrowest(tool, args),
            scope=decision.remember, thread_id=None if decision.remember == "room" else thread_id,
            made_by=decision.decided_by, made_at=now, decision_id=decision.id,
        )  # fmt: skip
        self.add(rule)
        return rule


def _number(rule_id: str) -> int:
    tail = rule_id.rpartition(":")[2]
    return int(tail) if tail.isdigit() else 0


def _negated(key: tuple[float, ...]) -> tuple[float, ...]:
    return tuple(-part for part in key)
