"""The shell scanner: a command line read the way bash reads it, into simple commands.

`Scanner(line, finish).parse_list("")` tokenises the line (operators, redirections, words with
their quotes removed and what bash would still do to each: expand, substitute, glob,
brace-expand, split) and follows the grammar a permission check needs: lists and pipelines,
subshells and groups, `if`/`while`/`for` bodies, command and process substitutions (their
commands collected too), here-documents. Each simple command it finds goes through `finish`
(`shellparse` sees through wrappers and marks what is not modelled) before it joins
`commands`. What it does not follow with certainty raises `ParseError`.

A hand-written scanner, because the one maintained Python bash parser (bashlex) is GPL
licensed and lags bash's grammar; the subset a permission check needs is small.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from nanohermes.guard.shellwords import ASSIGNMENT, SHELL_STATE_VARS, ParseError, Redirect, SimpleCommand, Word, assigned

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RESERVED_SKIP = frozenset({"!", "{", "}", "if", "then", "elif", "else", "fi", "do", "done", "while", "until"})
_UNSUPPORTED = frozenset({"case", "esac", "function", "select", "coproc"})
_LITERAL_ARITH = re.compile(r"[0-9\s+\-*/%<>=!&|^~(),?:]*")
_SIMPLE_BRACED = re.compile(r"\$\{(?:#?[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-])\}")
_ANSI_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v", "\\": "\\",
                 "'": "'", '"': '"', "?": "?"}


def _unsafe_heredoc_line(line: str) -> bool:
    """Would bash run or evaluate something in this line of an unquoted here-document?"""
    if "`" in line or line.endswith("\\"):
        return True
    for m in re.finditer(r"\$(.)", line):
        if m.group(1) in "([":
            return True
        if m.group(1) == "{" and not _SIMPLE_BRACED.match(line, m.start()):
            return True
    return False


# What ends a word: the end of the line, a blank, an operator.
_WORD_ENDS = frozenset({"", " ", "\t", "\n", ";", "&", "|", "(", ")"})


def _globs(literal: str) -> bool:
    """Does a word whose unquoted characters are `literal` glob: a `*`, a `?`, or a `[` with
    a `]` after it?"""
    bracket = literal.find("[")
    return "*" in literal or "?" in literal or (bracket >= 0 and "]" in literal[bracket + 1:])


@dataclass(frozen=True)
class _Op:
    """A control operator or separator: ; & && || | |& ( ) or a newline."""
    text: str


@dataclass(frozen=True)
class _Redir:
    """A redirection operator with its explicit descriptor; the target follows as a word."""
    fd: str
    op: str


@dataclass(frozen=True)
class _Eof:
    """The end of the input."""


# What the scanner hands the grammar; a word token is the `Word` itself.
_Token = _Op | _Redir | Word | _Eof
# What becomes of each simple command found: the commands it runs, as the analysis sees them.
Finish = Callable[[SimpleCommand], list[SimpleCommand]]


class Scanner:
    """One command line being read; `commands` holds what it found, in source order."""

    def __init__(self, src: str, finish: Finish) -> None:
        self.s = src
        self.finish = finish
        self.i = 0
        self.commands: list[SimpleCommand] = []
        self.heredocs: list[tuple[str, bool, bool]] = []  # (delimiter, strip tabs, expands)
        self.back: _Token | None = None  # a token read ahead and given back

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
    def token(self) -> _Token:
        """The next token: an operator, a redirection, a word or the end."""
        if self.back is not None:
            tok, self.back = self.back, None
            return tok
        self.skip_blanks()
        c = self.peek()
        if c == "":
            return _Eof()
        if c == "\n":
            self.i += 1
            self.read_heredocs()
            return _Op("\n")
        for op in ("&&", "||", ";;", ";&", "|&", "&>>", "&>"):
            if self.startswith(op):
                self.i += len(op)
                if op in (";;", ";&"):
                    raise ParseError("case statements are not analysed")
                if op.startswith("&>"):
                    return _Redir("", op)
                return _Op(op)
        if c in ";|&()":
            if c == "(" and self.peek(1) == "(":
                raise ParseError("arithmetic commands (( )) are not analysed")
            self.i += 1
            return _Op(c)
        m = re.compile(r"(\d*)(>>|>\||>&|>|<<<|<<-|<<|<&|<>|<)").match(self.s, self.i)
        if m and not (m.group(2) in ("<", ">") and self.peek(len(m.group(0))) == "(" and not m.group(1)):
            self.i = m.end()
            return _Redir(m.group(1), m.group(2))
        return self.word()

    def word(self) -> Word:
        """A word up to a blank, an operator or a redirection: its text after quote removal,
        and what bash would still do to it at run time (expand, substitute, glob, brace-expand,
        split). A process substitution `<(...)` stays inside the word."""
        start = self.i
        out: list[str] = []
        shape: list[str] = []  # unquoted literal characters; "\x00" for anything quoted or expanded
        expands = substitutes = splits = False
        while (c := self.peek()) not in _WORD_ENDS:
            if c in "<>":
                if not self.process_substitution(start, out):
                    break
                shape.append("\x00")
            elif c in "\\'":
                shape.append("\x00" if self.quoted(out) else "")
            elif c in '"`$':
                e, s, sp = self.expanding_piece(out)
                expands, substitutes, splits = expands or e, substitutes or s, splits or sp
                shape.append("\x00")
            else:
                out.append(c)
                shape.append(c)
                self.i += 1
        raw = self.s[start:self.i]
        literal = "".join(shape)
        brace = bool(re.search(r"\{[^{}]*(?:,|\.\.)[^{}]*\}", literal))
        return Word("".join(out), raw, expands, substitutes, _globs(literal), brace, splits, raw.startswith("~"))

    def process_substitution(self, start: int, out: list[str]) -> bool:
        """At a `<` or `>` inside the word begun at `start`: a process substitution `<(...)`
        becomes one /dev/fd path, so it stays in the word, static (True; its commands are
        collected); anything else is a redirection that ends the word (False)."""
        if self.peek(1) == "(":
            sub_start = self.i
            self.i += 2
            self.nested(")")
            out.append(self.s[sub_start:self.i])
            return True
        if re.fullmatch(r"\{[A-Za-z_][A-Za-z0-9_]*\}", self.s[start:self.i]):
            raise ParseError("a {name} redirection (a descriptor held in a variable) is not analysed")
        return False

    def quoted(self, out: list[str]) -> bool:
        """At a backslash or a single quote: adds what it quotes to `out`. False for a
        backslash before a line break, which joins the lines and adds nothing."""
        if self.peek() == "\\":
            nxt = self.peek(1)
            self.i += 2
            if nxt == "\n":
                return False
            out.append(nxt)
            return True
        end = self.s.find("'", self.i + 1)
        if end < 0:
            raise ParseError("unbalanced single quote")
        out.append(self.s[self.i + 1:end])
        self.i = end + 1
        return True

    def expanding_piece(self, out: list[str]) -> tuple[bool, bool, bool]:
        """At a `"`, a backtick or a `$`: adds the piece's text to `out` and returns whether it
        expands a parameter, substitutes a command, and is split into words and globbed (an
        unquoted expansion or substitution; inside double quotes it is not)."""
        c = self.peek()
        if c == '"':
            expands, substitutes = self.double_quoted(out)
            return expands, substitutes, False
        if c == "`":
            out.append(self.backticks())
            return False, True, True
        quoted = self.peek(1) in ("'", '"')
        text, expands, substitutes = self.dollar()
        out.append(text)
        return expands, substitutes, not quoted and (expands or substitutes)

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
                text, e, s = self.dollar(in_quotes=True)
                out.append(text)
                expands, substitutes = expands or e, substitutes or s
            else:
                out.append(c)
                self.i += 1

    def dollar(self, *, in_quotes: bool = False) -> tuple[str, bool, bool]:
        """At a `$`: returns (text, expands, substitutes) and moves past the expansion."""
        nxt = self.peek(1)
        if in_quotes and nxt in ("'", '"'):
            self.i += 1  # inside "...", $' and $" are a plain dollar sign
            return "$", False, False
        if nxt == "[":
            raise ParseError("arithmetic $[...] is not analysed")
        if self.startswith("$(("):
            return self.arithmetic()
        if nxt == "(":
            start = self.i
            self.i += 2
            self.nested(")")
            return self.s[start:self.i], False, True
        if nxt == "{":
            m = _SIMPLE_BRACED.match(self.s, self.i)
            if not m:
                raise ParseError("a ${...} expansion with operators, subscripts or quotes is not analysed")
            self.i = m.end()
            return m.group(0), True, False
        if nxt == "'":  # ANSI-C quoting: $'...'
            return self.ansi_c()
        if nxt == '"':  # $"..." is a localised double-quoted string
            self.i += 1
            return "", False, False
        return self.parameter()

    def arithmetic(self) -> tuple[str, bool, bool]:
        """At `$((`: names in arithmetic are evaluated recursively (`x='a[$(cmd)]'; $((x))`
        runs cmd), so only numbers and operators are followed."""
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
        if not body.endswith("))") or not _LITERAL_ARITH.fullmatch(body[3:-2]):
            raise ParseError("arithmetic $((...)) with names, quotes or expansions is not analysed")
        self.i = j + 1
        return body, True, False

    def parameter(self) -> tuple[str, bool, bool]:
        """At `$NAME`, `$1`, `$@` and the other special parameters; a `$` before anything else
        is a plain dollar sign."""
        start, nxt = self.i, self.peek(1)
        m = _NAME.match(self.s, self.i + 1)
        if m:
            self.i = m.end()
            return self.s[start:self.i], True, False
        if nxt and (nxt.isdigit() or nxt in "@*#?$!-"):
            self.i += 2
            return self.s[start:self.i], True, False
        self.i += 1
        return "$", False, False

    def ansi_c(self) -> tuple[str, bool, bool]:
        """`$'...'` with only the plain escapes (\\n \\t \\' ...); hex, octal, unicode and
        control escapes are decoded by bash in ways not followed here."""
        out: list[str] = []
        j = self.i + 2
        while j < len(self.s):
            c = self.s[j]
            if c == "'":
                self.i = j + 1
                return "".join(out), False, False
            if c == "\\":
                esc = self.s[j + 1:j + 2]
                if esc not in _ANSI_ESCAPES:
                    raise ParseError(f"$'...' with the escape \\{esc} is not analysed")
                out.append(_ANSI_ESCAPES[esc])
                j += 2
                continue
            out.append(c)
            j += 1
        raise ParseError("unbalanced $' quote")

    def backticks(self) -> str:
        start = self.i
        j = self.i + 1
        inner: list[str] = []
        while j < len(self.s) and self.s[j] != "`":
            if self.s[j] == "\\":  # the escaping rules inside backticks differ by context
                raise ParseError("backslashes inside backticks are not analysed; use $(...)")
            inner.append(self.s[j])
            j += 1
        if j >= len(self.s):
            raise ParseError("unbalanced backtick")
        if self.heredocs and "\n" in inner:
            raise ParseError("a line break inside backticks while a here-document is pending is not analysed")
        self.i = j + 1
        sub = Scanner("".join(inner), self.finish)
        sub.parse_list(stop="")
        self.commands.extend(sub.commands)
        return self.s[start:self.i]

    def nested(self, stop: str) -> None:
        """Parse a substitution body up to its closing `)`; its commands join ours."""
        outer, start = self.heredocs, self.i
        self.heredocs = []
        self.parse_list(stop=stop)
        if self.token() != _Op(stop):
            raise ParseError(f"unbalanced {stop}")
        if self.heredocs:
            raise ParseError("a here-document opened inside ( ) or $( ) and ended after it is not analysed")
        if outer and "\n" in self.s[start:self.i]:
            # Where bash reads the body of a here-document opened before the ( ) then depends
            # on the kind of nesting.
            raise ParseError("a line break inside ( ) or $( ) while a here-document is pending is not analysed")
        self.heredocs = outer

    def read_heredocs(self) -> None:
        for delim, strip, expands in self.heredocs:
            while True:
                end = self.s.find("\n", self.i)
                line = self.s[self.i:] if end < 0 else self.s[self.i:end]
                self.i = len(self.s) if end < 0 else end + 1
                if (line.lstrip("\t") if strip else line) == delim:
                    break
                if expands and _unsafe_heredoc_line(line):
                    raise ParseError("substitutions, arithmetic, ${...} operators or a trailing backslash inside "
                                     "an unquoted here-document are not analysed")
                if end < 0:
                    break
        self.heredocs = []

    # -- grammar -----------------------------------------------------------------------
    def parse_list(self, stop: str) -> None:
        """Commands until `stop` (")" for a substitution, "" for the end of input)."""
        while True:
            tok = self.token()
            if isinstance(tok, _Eof):
                if stop:
                    raise ParseError(f"unbalanced {stop}")
                return
            if tok == _Op(")"):
                if stop == ")":
                    self.back = tok
                    return
                raise ParseError("unexpected )")
            if tok == _Op("("):
                self.nested(")")
                self.trailing_redirects()
                continue
            if isinstance(tok, _Op):
                continue  # a separator: ; && || | & newline
            self.back = tok
            self.simple_command()

    def trailing_redirects(self) -> None:
        """Redirections after `)` or a closing keyword apply to everything inside: seen as a
        command of their own, so a write is still a write."""
        redirects: list[Redirect] = []
        while True:
            tok = self.token()
            if not isinstance(tok, _Redir):
                self.back = tok
                break
            redirects.append(self.redirect(tok))
        if redirects:
            self.commands.append(SimpleCommand((), (), tuple(redirects)))

    def redirect(self, tok: _Redir) -> Redirect:
        fd, op = tok.fd, tok.op
        if op in ("<<", "<<-"):
            self.skip_blanks()
            delim = self.word()
            if not delim.raw:
                raise ParseError("here-document without a delimiter")
            quoted = delim.raw != delim.text or any(q in delim.raw for q in "'\"\\")
            self.heredocs.append((delim.text, op == "<<-", not quoted))
            return Redirect(op, fd, None)
        self.skip_blanks()
        target = self.token()
        if not isinstance(target, Word):
            raise ParseError(f"redirection {fd}{op} without a target")
        return Redirect(op, fd, target)

    def simple_command(self) -> None:
        """One simple command: leading assignments, its words and its redirections, up to an
        operator; its commands (wrappers seen through) join `commands`. In command position a
        reserved word or a `for` header is not a command (`command_position`), and `[[`
        collects its words up to `]]` (operators inside it would be tokens of their own)."""
        words: list[Word] = []
        assigns: list[str] = []
        redirects: list[Redirect] = []
        while (w := self.command_word(words, redirects)) is not None:
            if not words:
                head = self.command_position(w, assigns, redirects)
                if head == "assignment":
                    continue
                if head == "ends":
                    break
                if head == "keyword":
                    return  # the next token starts a command
            words.append(w)
            if words[0].text == "[[" and w.text == "]]":
                break
        if words and words[0].text == "[[" and words[-1].text != "]]":
            raise ParseError("[[ ... ]] with operators inside is not analysed")
        if words or assigns or redirects:
            cmd = SimpleCommand(tuple(words), tuple(assigns), tuple(redirects))
            self.commands.extend(self.finish(cmd))

    def command_word(self, words: list[Word], redirects: list[Redirect]) -> Word | None:
        """The simple command's next word, its redirections on the way added to `redirects`;
        None at an operator or the end (given back: it ends the command). A `(` after words
        opens a function body, and `<`/`>` inside `[[ ]]` compare strings there: neither is
        followed."""
        while True:
            tok = self.token()
            if isinstance(tok, _Eof) or (isinstance(tok, _Op) and tok.text != "("):
                self.back = tok
                return None
            if isinstance(tok, _Op):  # "(" after words: a function definition
                raise ParseError("function definitions are not analysed")
            if isinstance(tok, Word):
                return tok
            if words and words[0].text == "[[":
                raise ParseError("[[ ... ]] with < or > inside is not analysed")
            redirects.append(self.redirect(tok))

    def command_position(self, w: Word, assigns: list[str],
                         redirects: list[Redirect]) -> Literal["word", "assignment", "ends", "keyword"]:
        """What a word before the command's name is: an `assignment` (added to `assigns`), the
        command's first `word`, or a reserved word. A reserved word after assignments or
        redirections `ends` the command before it; on its own it is a `keyword` that starts
        no command (a `for` header is read here; redirections after `}`, `fi` and `done` are
        collected, since they apply to the whole block). Unquoted only: `"if"` is a name.
        Compound commands whose structure is not followed (`case`, functions) are refused."""
        if not assigns and w.raw in _UNSUPPORTED:
            raise ParseError(f"`{w.raw}` is not analysed")
        if w.raw in _RESERVED_SKIP and w.raw == w.text:
            if redirects or assigns:
                return "ends"
            if w.raw in ("}", "fi", "done"):
                self.trailing_redirects()
            return "keyword"
        if w.raw in ("for", "select") and not assigns:
            self.for_header()
            return "keyword"
        if ASSIGNMENT.match(w.raw) and not w.raw.startswith("="):
            assigns.append(assigned(w))
            return "assignment"
        return "word"

    def for_header(self) -> None:
        """`for NAME in WORDS ;` — the words may hold substitutions (already collected)."""
        tok = self.token()
        if isinstance(tok, Word) and tok.text in SHELL_STATE_VARS:
            raise ParseError(f"a for loop assigning {tok.text} is not analysed")
        self.back = tok
        while True:
            tok = self.token()
            if isinstance(tok, _Eof):
                return
            if tok in (_Op(";"), _Op("\n")):
                return
            if not isinstance(tok, Word):
                self.back = tok
                return
