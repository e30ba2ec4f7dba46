"""Shell command analysis for permission checks: a command line -> its simple commands.

`split(command)` walks a POSIX/bash command line the way the shell would split it and
returns every simple command it would run: across `&&`, `||`, `;`, `|`, `&`, newlines,
subshells `( )`, groups `{ }`, command substitution `$( )` and backticks, process
substitution `<( )`, and the scripts of `bash -c '...'`. Quotes are respected (a quoted
`;` is an argument, not a separator); leading `VAR=value` assignments, redirections and the
wrappers `env`, `timeout`, `nice`, `time`, `nohup`, `stdbuf`, `command`, `xargs` are seen
through, so a rule is matched against the command that really runs.

Anything this module cannot read with certainty (case statements, function definitions,
arithmetic commands, substitutions inside `${...}`, unbalanced quotes) raises `ParseError`;
the caller asks the user instead of guessing. Pure: no I/O, no globals that change.

A hand-written scanner, because the one maintained Python bash parser (bashlex) is GPL
licensed and lags bash's grammar; the subset a permission check needs is small.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

__all__ = ["ParseError", "Redirect", "SimpleCommand", "Word", "split"]


class ParseError(ValueError):
    """The command line uses shell syntax this analysis does not follow."""


@dataclass(frozen=True)
class Word:
    text: str  # after quote removal; expansions keep their source text, e.g. `$HOME`, `$(pwd)`
    raw: str = ""  # the source text
    expands: bool = False  # contains a parameter expansion ($X, ${X})
    substitutes: bool = False  # contains a command or process substitution
    glob: bool = False  # contains an unquoted * ? or [

    @property
    def dynamic(self) -> bool:
        return self.expands or self.substitutes


@dataclass(frozen=True)
class Redirect:
    op: str  # > >> >| &> &>> < << <<< <> >& <&
    fd: str = ""  # the explicit descriptor, e.g. "2" in 2>
    target: Word | None = None  # None for here-documents

    @property
    def writes_file(self) -> bool:
        """Does this redirection create or change a file?"""
        if self.op not in (">", ">>", ">|", "&>", "&>>", "<>", ">&"):
            return False
        if self.target is None:
            return False
        t = self.target.text
        if self.op == ">&" and (t.isdigit() or t == "-"):
            return False  # descriptor duplication, e.g. 2>&1
        return t not in ("/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty")


@dataclass(frozen=True)
class SimpleCommand:
    words: tuple[Word, ...]
    assigns: tuple[str, ...] = ()  # leading NAME=value, as written after quote removal
    redirects: tuple[Redirect, ...] = ()
    wrappers: tuple[str, ...] = ()  # wrappers seen through, outermost first
    open_args: bool = False  # xargs appends arguments at run time

    @property
    def argv(self) -> tuple[str, ...]:
        return tuple(w.text for w in self.words)

    @property
    def name(self) -> str:
        return self.words[0].text if self.words else ""

    @property
    def text(self) -> str:
        """What rules are matched against: the words joined by single spaces."""
        return " ".join(self.argv)

    @property
    def writes(self) -> tuple[str, ...]:
        """Files this command writes by redirection or through `tee`."""
        out = [r.target.text for r in self.redirects if r.writes_file and r.target is not None]
        if self.name == "tee":
            out += [a for a in self.argv[1:] if not a.startswith("-") and a != "/dev/null"]
        return tuple(out)


_META = set(" \t\n;&|()<>")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
_RESERVED_SKIP = frozenset({"!", "{", "}", "if", "then", "elif", "else", "fi", "do", "done", "while", "until"})
_UNSUPPORTED = frozenset({"case", "esac", "function", "select", "coproc"})


class _Scanner:
    def __init__(self, src: str) -> None:
        self.s = src
        self.i = 0
        self.commands: list[SimpleCommand] = []
        self.heredocs: list[tuple[str, bool, bool]] = []  # (delimiter, strip tabs, expands)
        self.back: tuple[str, object] | None = None  # a token read ahead and given back

    # -- characters --------------------------------------------------------------------
    def peek(self, n: int = 0) -> str:
        j = self.i + n
        return self.s[j] if j < len(self.s) else ""

    def startswith(self, text: str) -> bool:
        return self.s.startswith(text, self.i)

    def skip_blanks(self) -> None:
        while True:
            c = self.peek()
            if c in (" ", "\t"):
                self.i += 1
            elif c == "\\" and self.peek(1) == "\n":
                self.i += 2
            elif c == "#":
                while self.peek() not in ("", "\n"):
                    self.i += 1
            else:
                return

    # -- tokens ------------------------------------------------------------------------
    def token(self) -> tuple[str, object]:
        """The next token: ("op", text) | ("redir", (fd, op)) | ("word", Word) | ("eof", None)."""
        if self.back is not None:
            tok, self.back = self.back, None
            return tok
        self.skip_blanks()
        c = self.peek()
        if c == "":
            return ("eof", None)
        if c == "\n":
            self.i += 1
            self.read_heredocs()
            return ("op", "\n")
        for op in ("&&", "||", ";;", ";&", "|&", "&>>", "&>"):
            if self.startswith(op):
                self.i += len(op)
                if op in (";;", ";&"):
                    raise ParseError("case statements are not analysed")
                if op.startswith("&>"):
                    return ("redir", ("", op))
                return ("op", op)
        if c in ";|&()":
            if c == "(" and self.peek(1) == "(":
                raise ParseError("arithmetic commands (( )) are not analysed")
            self.i += 1
            return ("op", c)
        m = re.compile(r"(\d*)(>>|>\||>&|>|<<<|<<-|<<|<&|<>|<)").match(self.s, self.i)
        if m and not (m.group(2) in ("<", ">") and self.peek(len(m.group(0))) == "(" and not m.group(1)):
            self.i = m.end()
            return ("redir", (m.group(1), m.group(2)))
        return ("word", self.word())

    def word(self) -> Word:
        start = self.i
        out: list[str] = []
        expands = substitutes = glob = False
        while True:
            c = self.peek()
            if c == "" or c in " \t\n;&|()":
                break
            if c in "<>":
                if self.peek(1) == "(":  # process substitution: becomes one /dev/fd path, so
                    sub_start = self.i  # the word stays static; its commands are collected
                    self.i += 2
                    self.nested(")")
                    out.append(self.s[sub_start:self.i])
                    continue
                break
            if c == "\\":
                nxt = self.peek(1)
                self.i += 2
                if nxt != "\n":
                    out.append(nxt)
                continue
            if c == "'":
                end = self.s.find("'", self.i + 1)
                if end < 0:
                    raise ParseError("unbalanced single quote")
                out.append(self.s[self.i + 1:end])
                self.i = end + 1
                continue
            if c == '"':
                e, s = self.double_quoted(out)
                expands, substitutes = expands or e, substitutes or s
                continue
            if c == "`":
                out.append(self.backticks())
                substitutes = True
                continue
            if c == "$":
                text, e, s = self.dollar()
                out.append(text)
                expands, substitutes = expands or e, substitutes or s
                continue
            if c in "*?[":
                glob = True
            out.append(c)
            self.i += 1
        return Word("".join(out), self.s[start:self.i], expands, substitutes, glob)

    def double_quoted(self, out: list[str]) -> tuple[bool, bool]:
        self.i += 1
        expands = substitutes = False
        while True:
            c = self.peek()
            if c == "":
                raise ParseError("unbalanced double quote")
            if c == '"':
                self.i += 1
                return expands, substitutes
            if c == "\\" and self.peek(1) in ('"', "\\", "$", "`", "\n"):
                if self.peek(1) != "\n":
                    out.append(self.peek(1))
                self.i += 2
            elif c == "`":
                out.append(self.backticks())
                substitutes = True
            elif c == "$":
                text, e, s = self.dollar()
                out.append(text)
                expands, substitutes = expands or e, substitutes or s
            else:
                out.append(c)
                self.i += 1

    def dollar(self) -> tuple[str, bool, bool]:
        """At a `$`: returns (text, expands, substitutes) and moves past the expansion."""
        start = self.i
        nxt = self.peek(1)
        if self.startswith("$(("):
            depth, j = 0, self.i + 1
            while j < len(self.s):
                if self.s[j] == "(":
                    depth += 1
                elif self.s[j] == ")":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            else:
                raise ParseError("unbalanced $((")
            body = self.s[self.i:j + 1]
            if "$(" in body[3:] or "`" in body:
                raise ParseError("command substitution inside arithmetic is not analysed")
            self.i = j + 1
            return body, True, False
        if nxt == "(":
            self.i += 2
            self.nested(")")
            return self.s[start:self.i], False, True
        if nxt == "{":
            end = self.s.find("}", self.i)
            if end < 0:
                raise ParseError("unbalanced ${")
            body = self.s[self.i:end + 1]
            if "$(" in body or "`" in body or "<(" in body or ">(" in body:
                raise ParseError("substitution inside ${...} is not analysed")
            self.i = end + 1
            return body, True, False
        if nxt == "'":  # ANSI-C quoting: $'...'
            end, j = -1, self.i + 2
            while j < len(self.s):
                if self.s[j] == "\\":
                    j += 2
                    continue
                if self.s[j] == "'":
                    end = j
                    break
                j += 1
            if end < 0:
                raise ParseError("unbalanced $' quote")
            body = self.s[self.i + 2:end]
            self.i = end + 1
            try:
                return body.encode("latin-1", "backslashreplace").decode("unicode_escape"), False, False
            except UnicodeDecodeError:
                raise ParseError("unreadable $'...' escape") from None
        if nxt == '"':  # $"..." is a localised double-quoted string
            self.i += 1
            return "", False, False
        m = _NAME.match(self.s, self.i + 1)
        if m:
            self.i = m.end()
            return self.s[start:self.i], True, False
        if nxt and (nxt.isdigit() or nxt in "@*#?$!-"):
            self.i += 2
            return self.s[start:self.i], True, False
        self.i += 1
        return "$", False, False

    def backticks(self) -> str:
        start = self.i
        j = self.i + 1
        inner: list[str] = []
        while j < len(self.s) and self.s[j] != "`":
            if self.s[j] == "\\" and j + 1 < len(self.s) and self.s[j + 1] in "`\\$":
                inner.append(self.s[j + 1])
                j += 2
                continue
            inner.append(self.s[j])
            j += 1
        if j >= len(self.s):
            raise ParseError("unbalanced backtick")
        self.i = j + 1
        sub = _Scanner("".join(inner))
        sub.parse_list(stop="")
        self.commands.extend(sub.commands)
        return self.s[start:self.i]

    def nested(self, stop: str) -> None:
        """Parse a substitution body up to its closing `)`; its commands join ours."""
        self.parse_list(stop=stop)
        if self.token() != ("op", stop):
            raise ParseError(f"unbalanced {stop}")

    def read_heredocs(self) -> None:
        for delim, strip, expands in self.heredocs:
            while True:
                end = self.s.find("\n", self.i)
                line = self.s[self.i:] if end < 0 else self.s[self.i:end]
                self.i = len(self.s) if end < 0 else end + 1
                if (line.lstrip("\t") if strip else line) == delim:
                    break
                if expands and ("$(" in line or "`" in line):
                    raise ParseError("command substitution inside a here-document is not analysed")
                if end < 0:
                    break
        self.heredocs = []

    # -- grammar -----------------------------------------------------------------------
    def parse_list(self, stop: str) -> None:
        """Commands until `stop` (")" for a substitution, "" for the end of input)."""
        while True:
            kind, value = self.token()
            if kind == "eof":
                if stop:
                    raise ParseError(f"unbalanced {stop}")
                return
            if kind == "op" and value == ")":
                if stop == ")":
                    self.back = (kind, value)
                    return
                raise ParseError("unexpected )")
            if kind == "op" and value == "(":
                self.nested(")")
                self.trailing_redirects()
                continue
            if kind == "op":
                continue  # a separator: ; && || | & newline
            self.back = (kind, value)
            self.simple_command()

    def trailing_redirects(self) -> None:
        """Redirections after `)` or a closing keyword apply to everything inside: seen as a
        command of their own, so a write is still a write."""
        redirects: list[Redirect] = []
        while True:
            kind, value = self.token()
            if kind != "redir":
                self.back = (kind, value)
                break
            redirects.append(self.redirect(value))  # type: ignore[arg-type]
        if redirects:
            self.commands.append(SimpleCommand((), (), tuple(redirects)))

    def redirect(self, value: tuple[str, str]) -> Redirect:
        fd, op = value
        if op in ("<<", "<<-"):
            self.skip_blanks()
            delim = self.word()
            if not delim.raw:
                raise ParseError("here-document without a delimiter")
            quoted = delim.raw != delim.text or any(q in delim.raw for q in "'\"\\")
            self.heredocs.append((delim.text, op == "<<-", not quoted))
            return Redirect(op, fd, None)
        self.skip_blanks()
        kind, target = self.token()
        if kind != "word":
            raise ParseError(f"redirection {fd}{op} without a target")
        return Redirect(op, fd, target)  # type: ignore[arg-type]

    def simple_command(self) -> None:
        words: list[Word] = []
        assigns: list[str] = []
        redirects: list[Redirect] = []
        while True:
            kind, value = self.token()
            if kind == "eof" or (kind == "op" and value != "("):
                self.back = (kind, value)
                break
            if kind == "op":  # "(" after words: a function definition
                raise ParseError("function definitions are not analysed")
            if kind == "redir":
                redirects.append(self.redirect(value))  # type: ignore[arg-type]
                continue
            w: Word = value  # type: ignore[assignment]
            if not words:
                if not assigns and w.raw in _UNSUPPORTED:
                    raise ParseError(f"`{w.raw}` is not analysed")
                if w.raw in _RESERVED_SKIP and w.raw == w.text:
                    if redirects or assigns:
                        break
                    if w.raw in ("}", "fi", "done"):
                        self.trailing_redirects()
                    return  # a keyword: the next token starts a command
                if w.raw in ("for", "select") and not assigns:
                    self.for_header()
                    return
                if _ASSIGN.match(w.raw) and not w.raw.startswith("="):
                    assigns.append(w.text)
                    continue
            if words and words[0].text == "[[":
                words.append(w)
                if w.text == "]]":
                    break
                continue
            words.append(w)
        if words and words[0].text == "[[" and words[-1].text != "]]":
            raise ParseError("[[ ... ]] with operators inside is not analysed")
        if words or assigns or redirects:
            self.commands.extend(_unwrap(SimpleCommand(tuple(words), tuple(assigns), tuple(redirects))))

    def for_header(self) -> None:
        """`for NAME in WORDS ;` — the words may hold substitutions (already collected)."""
        while True:
            kind, value = self.token()
            if kind == "eof":
                return
            if kind == "op" and value in (";", "\n"):
                return
            if kind != "word":
                self.back = (kind, value)
                return


# -- wrappers ------------------------------------------------------------------------------
# option -> takes a separate value?
_ENV_OPTS = {"-i": False, "--ignore-environment": False, "-0": False, "--null": False, "-u": True, "--unset": True,
             "-C": True, "--chdir": True, "-v": False, "--debug": False}
_TIMEOUT_OPTS = {"-s": True, "--signal": True, "-k": True, "--kill-after": True, "--preserve-status": False,
                 "--foreground": False, "-v": False, "--verbose": False}
_NICE_OPTS = {"-n": True, "--adjustment": True}
_STDBUF_OPTS = {"-i": True, "-o": True, "-e": True, "--input": True, "--output": True, "--error": True}
_XARGS_OPTS = {"-0": False, "--null": False, "-a": True, "--arg-file": True, "-d": True, "--delimiter": True,
               "-E": True, "-e": False, "--eof": False, "-I": True, "-i": False, "--replace": False, "-L": True,
               "-l": False, "--max-lines": False, "-n": True, "--max-args": True, "-P": True, "--max-procs": True,
               "-p": False, "--interactive": False, "-r": False, "--no-run-if-empty": False, "-s": True,
               "--max-chars": True, "-t": False, "--verbose": False, "-x": False, "--exit": False,
               "--process-slot-var": True, "-o": False, "--open-tty": False, "--show-limits": False}
_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh"})


def _skip_options(words: list[Word], opts: dict[str, bool], *, attached: bool = True) -> list[Word] | None:
    """Drop leading options of a wrapper; None when an option is unknown (not seen through)."""
    i = 0
    while i < len(words):
        t = words[i].text
        if t == "--":
            return words[i + 1:]
        if not t.startswith("-") or t == "-":
            return words[i:]
        name = t.split("=", 1)[0]
        if name in opts:
            i += 2 if opts[name] and "=" not in t else 1
            continue
        if attached and len(t) > 2 and t[:2] in opts and not t.startswith("--"):
            i += 1  # -n5, -s9, -oL
            continue
        if name.lstrip("-").isdigit() and opts is _NICE_OPTS:  # nice -5
            i += 1
            continue
        return None
    return []


def _unwrap(cmd: SimpleCommand) -> list[SimpleCommand]:
    """See through wrappers: `timeout 5 env X=1 nice git log` checks `git log`."""
    words = list(cmd.words)
    if not words or words[0].dynamic:
        return [cmd]
    name = words[0].text
    rest = words[1:]
    inner: list[Word] | None
    assigns = list(cmd.assigns)
    open_args = cmd.open_args
    if name == "env":
        inner = _skip_options(rest, _ENV_OPTS)
        if inner is not None:
            while inner and _ASSIGN.match(inner[0].raw):
                assigns.append(inner[0].text)
                inner = inner[1:]
    elif name == "timeout":
        inner = _skip_options(rest, _TIMEOUT_OPTS)
        inner = inner[1:] if inner else None  # the duration
    elif name == "nice":
        inner = _skip_options(rest, _NICE_OPTS)
    elif name in ("time", "nohup"):
        inner = _skip_options(rest, {"-p": False})
    elif name == "stdbuf":
        inner = _skip_options(rest, _STDBUF_OPTS)
    elif name in ("command", "builtin"):
        if any(w.text in ("-v", "-V") for w in rest[:1]):
            return [cmd]  # a lookup, not a run
        inner = _skip_options(rest, {"-p": False})
    elif name == "xargs":
        inner = _skip_options(rest, _XARGS_OPTS)
        if inner is not None and not inner:
            inner = [Word("echo", "echo")]
        open_args = True
    elif name in _SHELLS:
        return _shell_c(cmd, rest)
    elif name == "eval":
        if any(w.dynamic for w in rest):
            raise ParseError("eval of text built at run time is not analysed")
        return _script(cmd, " ".join(w.text for w in rest))
    elif name == "find":
        return [cmd, *_find_exec(cmd, rest)]
    else:
        return [cmd]
    if not inner:
        return [cmd]  # nothing wrapped (`env` alone prints the environment), or unknown options
    return _unwrap(replace(cmd, words=tuple(inner), assigns=tuple(assigns), wrappers=(*cmd.wrappers, name),
                           open_args=open_args))


def _shell_c(cmd: SimpleCommand, rest: list[Word]) -> list[SimpleCommand]:
    """`bash -c 'script'` runs the script: analyse it. Without -c it is a plain command."""
    i = 0
    script_mode = False
    while i < len(rest):
        t = rest[i].text
        if t in ("--", "-"):
            i += 1
            break
        if t.startswith("--"):
            i += 1
            continue
        if t[:1] in "-+" and len(t) > 1:
            if "c" in t[1:] and t[0] == "-":
                script_mode = True
            i += 2 if t[1:] in ("o", "O") else 1
            continue
        break
    if not script_mode:
        return [cmd]
    if i >= len(rest):
        raise ParseError(f"{cmd.name} -c without a script")
    script = rest[i]
    if script.dynamic:
        raise ParseError(f"{cmd.name} -c with a script built at run time is not analysed")
    return _script(cmd, script.text)


def _script(cmd: SimpleCommand, script: str) -> list[SimpleCommand]:
    """The commands of a script run by `cmd` (bash -c, eval); its own redirections stay a command."""
    out = [replace(c, wrappers=(*cmd.wrappers, cmd.name, *c.wrappers)) for c in split(script)]
    if cmd.redirects or cmd.assigns:
        out.append(SimpleCommand((), cmd.assigns, cmd.redirects, (*cmd.wrappers, cmd.name)))
    return out


def _find_exec(cmd: SimpleCommand, rest: list[Word]) -> list[SimpleCommand]:
    """`find -exec CMD {} ;` runs CMD: seen as a command of its own (find itself stays a
    non-read-only command because of -exec)."""
    out: list[SimpleCommand] = []
    i = 0
    while i < len(rest):
        if rest[i].text in ("-exec", "-execdir", "-ok", "-okdir"):
            j = i + 1
            while j < len(rest) and rest[j].text not in (";", "+"):
                j += 1
            if j > i + 1:
                out += _unwrap(SimpleCommand(tuple(rest[i + 1:j]), wrappers=(*cmd.wrappers, "find"), open_args=True))
            i = j
        i += 1
    return out


def split(command: str) -> list[SimpleCommand]:
    """Every simple command `command` would run, in source order (substitutions first)."""
    if "\x00" in command:
        raise ParseError("NUL byte in command")
    sc = _Scanner(command)
    try:
        sc.parse_list(stop="")
    except RecursionError:
        raise ParseError("nested too deeply") from None
    if sc.heredocs:
        sc.read_heredocs()
    return sc.commands
