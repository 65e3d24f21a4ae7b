"""A shell command as the shell will run it, so that a rule bounds what runs and not how it
is spelled (engine/domain/rules.py matches shell patterns on what `parse` gives).

`parse` cuts a command into its simple commands (at `;`, `&`, `|`, `&&`, `||`, line breaks,
parentheses, `$(...)` and backticks), takes each one's words after quoting (`\\rm`, `'rm'`,
`r''m`, `$'\\x72m'` are all `rm`; tabs are spaces), drops its redirections, skips leading
assignments (`A=1 rm`) and keywords (`!`, `if`, `do`, ...), names its program by its base
name (`/bin/rm` is `rm`) and looks through the wrappers engine/shell/programs.py names
(`env`, `nice`, `sudo`, `xargs`, `timeout`, ...) to the program they run. The strings run
by `sh -c`, `bash -c`, `eval`, backticks and git aliases (`!cmd`) are parsed again, up to
MAX_DEPTH deep; the commands of `find -exec` are read too. A program word whose value is
unknown (a variable, a glob, a brace expansion, a substitution), or nesting past the
bounds, makes the command opaque. Here-document bodies are read as commands (a deny rule
may match a line of one); the shell's grammar is read as bash's, so what dash would not
expand (`$'...'`, `{a,b}`) is read as more than it is, never less.

A command is `plain` when a glob may stand for it: no assignment, no keyword, not opaque,
run by none of RUNNING_WRAPPERS, and a program that runs no other program with these
words (`runs_others`). Pure functions, no I/O.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from engine.shell.programs import (
    RUNNING_WRAPPERS,
    SHELLS,
    WRAPPERS,
    Word,
    eval_string,
    runs_others,
    shell_string,
)

MAX_DEPTH = 8  # strings parsed again within strings before a command is opaque
# A longer command is not read at all (opaque): reading one costs about 20 µs a word on
# this machine's Python, and a rule is checked on the event loop; 16 KiB takes ~50 ms.
MAX_READ = 16 * 1024
MAX_NESTING = 64  # parentheses, substitutions and -exec within one another, at all depths
MAX_WRAPPERS = 16  # programs looked through in one command (`sudo env nice ... rm`), or
# commands read from within one another's words (`find -exec find -exec ...`)
KEYWORDS = frozenset("! { } if then elif else fi do done while until coproc".split())
_PARAM = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-]")
_ORDINARY = re.compile(r"[^\s;&|()<>'\"\\$`*?\[\]{},.=]+")  # read as they are
_REDIRECT = re.compile(r"&>>?|<<<|<<-?|<>|<&|>>|>&|>\||[<>]")
_ANSI = re.compile(r"\\(x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{1,4}|U[0-9a-fA-F]{1,8}|[0-7]{1,3}|c.|.)",
                   re.DOTALL)  # fmt: skip
_ESCAPES = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r",
            "t": "\t", "v": "\v"}  # fmt: skip


@dataclass(frozen=True)
class Command:
    """One simple command: `words` as the shell gives them (assignments and wrappers
    included); `views`, its text at each wrapper, the program named by its base name and
    the words after it with single spaces (the last is the program it runs: `canonical`);
    `spelled`, that last one with the program as written."""

    words: tuple[str, ...]
    views: tuple[str, ...] = ()
    spelled: str = ""
    plain: bool = False
    opaque: bool = False  # what it runs cannot be known from its text
    dynamic: bool = False  # a word holds an expansion: the exact words are not known
    inner: bool = False  # read from within another command's words (sh -c, find -exec, ...)

    @property
    def canonical(self) -> str:
        return self.views[-1] if self.views else ""


@dataclass(frozen=True)
class Parse:
    """What `parse` makes of a command: its simple commands, whether it was read to the end
    (every quote, parenthesis and substitution closed, nesting within MAX_DEPTH), and
    whether it holds any operator, parenthesis, redirection or substitution."""

    commands: tuple[Command, ...]
    ok: bool
    compound: bool

    @property
    def single(self) -> bool:
        """Parsed, nothing chained, redirected or substituted, one command with words."""
        top = [c for c in self.commands if not c.inner]
        return self.ok and not self.compound and len(top) == 1 and bool(top[0].words)

    @property
    def opaque(self) -> bool:
        return any(c.opaque for c in self.commands)


def parse(command: str) -> Parse:
    """`command`'s simple commands; never raises (what cannot be read is `ok=False`)."""
    return _parse(command, 0, 0)


def _parse(command: str, depth: int, level: int) -> Parse:
    reader = _Reader(command, depth, level)
    if len(command) > MAX_READ:
        reader.deep = True  # too long to read here: what it runs is not known
    elif depth <= MAX_DEPTH:
        reader.read_list("")
        for words in reader.found:
            reader.commands += reader.resolve(words)
    if depth > MAX_DEPTH or reader.deep:  # nested past the bounds: what runs is not known
        reader.ok = False
        reader.commands.append(Command((command,), opaque=True, inner=True))
    return Parse(tuple(reader.commands), reader.ok, reader.compound)


@dataclass
class _Word:
    """A word being read."""

    parts: list[str] = field(default_factory=list)
    started: bool = False
    bare: bool = True  # no quoting or expansion in it so far
    dynamic: bool = False
    assign: bool = False  # NAME=... with NAME unquoted
    bracket: bool = False
    brace: int = 0  # 1: an unquoted `{` seen, 2: then a `,` or `..`

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def add(self, text: str) -> None:
        self.parts.append(text)


@dataclass
class _Line:
    """The simple command being read: its words and the word being read."""

    sink: list[list[Word]]
    words: list[Word] = field(default_factory=list)
    word: _Word = field(default_factory=_Word)
    redirect: bool = False  # the next word is a redirection's target, not a word

    def end_word(self) -> None:
        if self.word.started:
            if self.redirect:
                self.redirect = False
            else:
                w = self.word
                self.words.append(Word(w.text, w.assign, w.dynamic))
        self.word = _Word()

    def end(self) -> None:
        self.end_word()
        self.redirect = False
        if self.words:
            self.sink.append(self.words)
        self.words = []


class _Reader:
    def __init__(self, text: str, depth: int, level: int) -> None:
        self.text, self.depth, self.level, self.pos = text, depth, level, 0
        self.found: list[list[Word]] = []
        self.commands: list[Command] = []
        self.ok, self.compound, self.deep = True, False, False

    def deeper(self, read: Callable[..., None], *args: Any) -> None:
        """`read(*args)` one level of nesting deeper, or stop reading past MAX_NESTING."""
        self.level += 1
        if self.level > MAX_NESTING:
            self.deep, self.pos = True, len(self.text)
        else:
            read(*args)
        self.level -= 1

    def peek(self, ahead: int = 0) -> str:
        return self.text[self.pos + ahead : self.pos + ahead + 1]

    def read_list(self, closer: str) -> None:
        """Read simple commands up to `closer` (")", or "" for the end), consumed."""
        line = _Line(self.found)
        while self.pos < len(self.text):
            c = self.text[self.pos]
            if c == closer:
                self.pos += 1
                line.end()
                return
            if c in " \t":
                line.end_word()
                self.pos += 1
            elif c in ";|\n()" or (c == "&" and self.peek(1) != ">"):
                line.end()
                self.compound = True
                self.pos += 1
                if c == "(":
                    self.deeper(self.read_list, ")")
            elif c in "<>&":
                w = line.word
                if w.started and w.bare and w.text.isdigit():
                    line.word = _Word()  # `2>`: a descriptor, not a word
                else:
                    line.end_word()
                m = _REDIRECT.match(self.text, self.pos)
                self.pos, self.compound = m.end() if m else self.pos + 1, True
                line.redirect = self.peek() != "("  # `<(...)`: what it reads is a command
            elif c == "#" and not line.word.started:
                end = self.text.find("\n", self.pos)
                self.pos = len(self.text) if end == -1 else end
            elif c == "\\" and self.peek(1) == "\n":
                self.pos += 2  # a line continuation
            else:
                self.read_part(line.word)
        line.end()
        if closer:
            self.ok = False

    def read_part(self, word: _Word) -> None:
        """One character of a word, or one quoted or expanded part of it."""
        text, c = self.text, self.text[self.pos]
        word.started = True
        if c == "\\":
            word.add(self.peek(1) or "\\")
            word.bare = False
            self.pos += 2
        elif c == "'":
            end = text.find("'", self.pos + 1)
            if end == -1:
                self.ok, end = False, len(text)
            word.add(text[self.pos + 1 : end])
            word.bare, self.pos = False, end + 1
        elif c == '"':
            self.read_double(word)
        elif c == "$":
            self.read_dollar(word, quoted=False)
        elif c == "`":
            self.read_backticks(word)
        elif m := _ORDINARY.match(text, self.pos):
            word.add(m[0])
            self.pos = m.end()
        else:
            if c == "=" and word.bare and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*\+?", word.text):
                word.assign = True
            elif c in "*?" or (c == "]" and word.bracket) or (c == "}" and word.brace == 2):
                word.dynamic = True
            elif c == "[":
                word.bracket = True
            elif c == "{":
                word.brace = word.brace or 1
            elif word.brace and (c == "," or text.startswith("..", self.pos)):
                word.brace = 2
            word.add(c)
            self.pos += 1

    def read_double(self, word: _Word) -> None:
        word.bare = False
        self.pos += 1
        while self.pos < len(self.text):
            c = self.text[self.pos]
            if c == '"':
                self.pos += 1
                return
            if c == "\\" and self.peek(1) in ("$", "`", '"', "\\", "\n"):
                word.add(self.peek(1).strip("\n"))
                self.pos += 2
            elif c == "$":
                self.read_dollar(word, quoted=True)
            elif c == "`":
                self.read_backticks(word)
            else:
                word.add(c)
                self.pos += 1
        self.ok = False

    def read_dollar(self, word: _Word, quoted: bool) -> None:
        start, nxt = self.pos, self.peek(1)
        if nxt == "'" and not quoted:  # $'...': ANSI-C quoting, decoded
            end = self.pos + 2
            while end < len(self.text) and self.text[end] != "'":
                end += 1 + (self.text[end] == "\\")
            if end >= len(self.text):
                self.ok = False
            word.add(_ansi(self.text[self.pos + 2 : end]))
            word.bare, self.pos = False, end + 1
            return
        if nxt == '"' and not quoted:  # $"...": a translated string, read as "..."
            self.pos += 1
            self.read_double(word)
            return
        word.bare = False
        if nxt == "(":
            self.pos += 2
            self.compound = True
            self.deeper(self.read_list, ")")
        elif nxt == "{":
            self.pos += 2
            self.deeper(self.read_braced)
        elif m := _PARAM.match(self.text, self.pos + 1):
            self.pos = m.end()
        else:
            word.add("$")
            self.pos += 1
            return
        word.dynamic = True
        word.add(self.text[start : self.pos])

    def read_braced(self) -> None:
        """The rest of a `${...}`, for the substitutions in it."""
        scratch = _Word()
        while self.pos < len(self.text):
            c = self.text[self.pos]
            if c == "}":
                self.pos += 1
                return
            if c in "\\'\"$`":
                self.read_part(scratch)
            else:
                self.pos += 1
        self.ok = False

    def read_backticks(self, word: _Word) -> None:
        start, end, body = self.pos, self.pos + 1, []
        while end < len(self.text) and self.text[end] != "`":
            if self.text[end] == "\\" and self.text[end + 1 : end + 2] in ("$", "`", "\\"):
                end += 1
            body.append(self.text[end])
            end += 1
        if end >= len(self.text):
            self.ok = False
        self.pos, self.compound = end + 1, True
        self.nested("".join(body))
        word.bare, word.dynamic = False, True
        word.add(self.text[start : self.pos])

    def nested(self, text: str) -> None:
        """Commands run from a string within this one, parsed one level deeper."""
        inner = _parse(text, self.depth + 1, self.level)
        self.commands += [replace(c, inner=True) for c in inner.commands]
        self.ok = self.ok and inner.ok

    def resolve(self, words: Sequence[Word], inner: bool = False) -> list[Command]:
        """The commands `words` run: this one, then those read from its words."""
        texts = tuple(w.text for w in words)
        views: list[str] = []
        plain, opaque, spelled, mark = True, False, "", len(self.commands)
        rest: Sequence[Word] = words
        for _ in range(MAX_WRAPPERS):
            while rest and (rest[0].assign or rest[0].text in KEYWORDS):
                rest, plain = rest[1:], False
            if not rest:
                break
            program, args = rest[0], rest[1:]
            if program.dynamic:
                opaque = True
                break
            name = posixpath.basename(program.text.rstrip("/")) or program.text
            key = name.lower()  # a case-blind file system runs RM as rm
            views += dict.fromkeys(" ".join([n, *(w.text for w in args)]) for n in (key, name))
            spelled = " ".join(w.text for w in rest)
            if key in SHELLS or key == "eval":
                plain = False
                script = eval_string(args) if key == "eval" else shell_string(args)
                if script is None and key == "eval":
                    rest = args
                    continue
                if script is not None:
                    self.nested(script)
                break
            look = WRAPPERS.get(key)
            if look is None:
                plain = plain and not runs_others(key, args)
                self.deeper(self.extract, key, args)
                break
            plain = plain and key not in RUNNING_WRAPPERS
            rest = look(args)
        else:
            opaque = True  # wrapped MAX_WRAPPERS times over: what runs is not looked for
        dynamic = any(w.dynamic for w in words)
        own = Command(texts, tuple(views), spelled, plain and not opaque, opaque, dynamic, inner)
        found = self.commands[mark:]
        del self.commands[mark:]
        return [own, *(replace(c, inner=True) for c in found)]

    def extract(self, key: str, args: Sequence[Word]) -> None:
        """The commands in a program's words: `find -exec ... ;`, git's `-c alias.x=!...`."""
        if self.level > MAX_WRAPPERS:  # `find -exec find -exec ...`: not looked into
            self.deep = True
            return
        if key == "find":
            texts, i = [w.text for w in args], 0
            while i < len(args):
                if texts[i] in ("-exec", "-execdir", "-ok", "-okdir"):
                    end = next((j for j in range(i + 1, len(args)) if texts[j] in (";", "+")),
                               len(args))  # fmt: skip
                    self.commands += self.resolve(args[i + 1 : end], inner=True)
                    i = end
                i += 1
        elif key == "git":
            for w in args:
                value = w.text.partition("=")[2]
                if value.startswith("!"):
                    self.nested(value[1:])


def _ansi(body: str) -> str:
    """The text of `$'body'` (bash ends it at a NUL)."""

    def one(m: re.Match[str]) -> str:
        s = m[1]
        if s[0] in "xuU" and len(s) > 1:
            return chr(min(int(s[1:], 16), 0x10FFFF))
        if s[0] in "01234567":
            return chr(int(s, 8) & 0xFF)
        if s[0] == "c" and len(s) == 2:
            return chr(ord(s[1]) & 0x1F)
        return _ESCAPES.get(s, s)

    return _ANSI.sub(one, body).split("\x00")[0]
