"""The catalogue: one entry per command nanohermes knows, grouped by family. A command not
listed is judged the worst way: not read-only, printing whatever files it is given, learned
as `program <options> <args>`.

Teaching nanohermes a command is one entry here (see `entry.Command` for what an entry
says) and one test row."""

from __future__ import annotations

from collections.abc import Iterable

from nanohermes.guard.commands.builtins import (
    double_bracket_problem, evaluates, export_problem, printf_problem, read_problem, set_problem, test_problem,
    unset_problem, wait_problem,
)
from nanohermes.guard.commands.checks import awk, positionals, sed
from nanohermes.guard.commands.entry import Command, Options, Reads, StdinCode, Wraps
from nanohermes.guard.commands.git import GIT

# Prints only names, sizes, hashes or types, never what is in the files.
NAMES = Reads(kind="names")
# A checksum tool: with -c every operand is a list of sums it reads (and prints back in errors).
HASHES = Reads(kind="names", operands_with=frozenset({"-c", "--check"}))
# grep's options that make it read folders whole.
GREP_RECURSIVE = Options(("-r", "-R", "--recursive", "--dereference-recursive", "--directories=recurse*"),
                   through=True)
# find's options that run a command.
FIND_RUNS = ("-exec", "-execdir", "-ok", "-okdir")
# A wrapper's options -> takes a separate value?
_ENV = {"-i": False, "--ignore-environment": False, "-0": False, "--null": False, "-u": True, "--unset": True,
        "-C": True, "--chdir": True, "-v": False, "--debug": False}
_TIMEOUT = {"-s": True, "--signal": True, "-k": True, "--kill-after": True, "--preserve-status": False,
            "--foreground": False, "-v": False, "--verbose": False}
_XARGS = {"-0": False, "--null": False, "-a": True, "--arg-file": True, "-d": True, "--delimiter": True,
          "-E": True, "-e": False, "--eof": False, "-I": True, "-i": False, "--replace": False, "-L": True,
          "-l": False, "--max-lines": False, "-n": True, "--max-args": True, "-P": True, "--max-procs": True,
          "-p": False, "--interactive": False, "-r": False, "--no-run-if-empty": False, "-s": True,
          "--max-chars": True, "-t": False, "--verbose": False, "-x": False, "--exit": False,
          "--process-slot-var": True, "-o": False, "--open-tty": False, "--show-limits": False}
_P = {"-p": False}
# `command -v` and `builtin -V` look a name up; they run nothing.
_LOOKUP = frozenset({"-v", "-V"})
# A wrapper that runs its command in a way the analysis does not follow (privileges,
# namespaces, other sessions, repeated runs): the line is unanalysable.
RUNNER = Wraps(kind="runner")
# A shell or an interpreter reads its program from standard input when none is on the line.
_SCRIPTED: StdinCode = "without a script"


ENTRIES: tuple[Command, ...] = (
    # -- files and text: read-only, print what is in the files they are given
    Command("cat", read_only=True),
    Command("head", read_only=True),
    Command("tail", read_only=True),
    Command("cut", read_only=True),
    Command("tr", read_only=True),
    Command("nl", read_only=True),
    Command("tac", read_only=True),
    Command("rev", read_only=True),
    Command("comm", read_only=True),
    Command("cmp", read_only=True),
    Command("diff", read_only=True),
    Command("column", read_only=True),
    Command("jq", read_only=True),
    Command("strings", read_only=True),
    Command("od", read_only=True),
    Command("hexdump", read_only=True),
    Command("base64", read_only=True),
    Command("tee", read_only=True, writes=True, exact=True),  # its files are writes, checked like `>`
    Command("uniq", read_only=True, check=positionals(1, "f", "s", "w", "skip-fields")),  # 2nd: output
    Command("xxd", read_only=True, unsafe=Options(("-r", "--revert")),
            check=positionals(1, "c", "g", "l", "s", "o")),
    Command("sort", read_only=True, unsafe=Options(("-o", "--output", "--compress-program")),
            exact=Options(("--compress-program*", "-o*", "--output*"), through=True)),
    Command("shuf", read_only=True, unsafe=Options(("-o", "--output")),
            exact=Options(("-o*", "--output*"), through=True)),
    Command("sed", read_only=True, check=sed, exact=True),
    Command("gsed", exact=True),
    Command("awk", read_only=True, check=awk, exact=True),
    Command("gawk", read_only=True, check=awk, exact=True),
    Command("mawk", read_only=True, check=awk, exact=True),
    Command("nawk", exact=True),
    # -- names, sizes, hashes and types only; some options read a file
    Command("ls", read_only=True, reads=NAMES),
    Command("wc", read_only=True, reads=Reads(kind="names", option_files=frozenset({"--files0-from"}))),
    Command("pwd", read_only=True, reads=NAMES),
    Command("which", read_only=True, reads=NAMES),
    Command("whoami", read_only=True, reads=NAMES),
    Command("id", read_only=True, reads=NAMES),
    Command("uname", read_only=True, reads=NAMES),
    Command("basename", read_only=True, reads=NAMES),
    Command("dirname", read_only=True, reads=NAMES),
    Command("realpath", read_only=True, reads=NAMES),
    Command("readlink", read_only=True, reads=NAMES),
    Command("stat", read_only=True, reads=NAMES),
    Command("du", read_only=True,
            reads=Reads(kind="names", option_files=frozenset({"-X", "--exclude-from", "--files0-from"}))),
    Command("df", read_only=True, reads=NAMES),
    Command("seq", read_only=True, reads=NAMES),
    Command("type", read_only=True, reads=NAMES),
    Command("md5sum", read_only=True, reads=HASHES),
    Command("sha1sum", read_only=True, reads=HASHES),
    Command("sha256sum", read_only=True, reads=HASHES),
    Command("sha512sum", read_only=True, reads=HASHES),
    Command("sha224sum", read_only=True, reads=HASHES),
    Command("sha384sum", read_only=True, reads=HASHES),
    Command("b2sum", read_only=True, reads=HASHES),
    Command("cksum", read_only=True, reads=HASHES),
    Command("date", read_only=True, unsafe=Options(("-s", "--set")),
            reads=Reads(kind="names", option_files=frozenset({"-f", "--file"}))),
    Command("hostname", read_only=True, check=lambda a: not any(not x.startswith("-") for x in a),
            reads=Reads(kind="names", option_files=frozenset({"-F", "--file"}))),
    Command("file", read_only=True, unsafe=Options(("-C", "--compile")),
            reads=Reads(kind="names", option_files=frozenset({"-f", "--files-from", "-m", "--magic-file"}))),
    Command("tree", read_only=True, unsafe=Options(("-o", "-R")),
            reads=Reads(kind="names", operands_with=frozenset({"--fromfile"}))),
    # BSD-style `e` shows every process's environment (nanohermes's keys among them).
    Command("ps", read_only=True, check=lambda a: not any("e" in x for x in a if not x.startswith("-"))),
    # -- searchers: the first operand is the pattern; some read folders whole
    Command("grep", read_only=True, reads=Reads(kind="search", recursive=GREP_RECURSIVE)),
    Command("egrep", read_only=True, reads=Reads(kind="search", recursive=GREP_RECURSIVE)),
    Command("fgrep", read_only=True, reads=Reads(kind="search", recursive=GREP_RECURSIVE)),
    Command("zgrep", reads=Reads(kind="search", recursive=GREP_RECURSIVE)),
    Command("rg", read_only=True, unsafe=Options(("--pre", "--pre-glob", "--hostname-bin")),  # each runs a program
            reads=Reads(kind="search", recursive=True), exact=True),
    Command("ag", reads=Reads(kind="search", recursive=True)),
    Command("ack", reads=Reads(kind="search", recursive=True)),
    Command("ack-grep", reads=Reads(kind="search", recursive=True)),
    Command("find", read_only=True, reads=Reads(kind="starts"), exact=True,
            unsafe=Options((*FIND_RUNS, "-delete", "-fprint", "-fprint0", "-fprintf", "-fls")),
            wraps=Wraps(kind="find", options=dict.fromkeys(FIND_RUNS, True))),
    # -- changes to files, read-only never
    Command("touch", reads=NAMES),
    Command("mkdir", reads=NAMES),
    Command("rmdir", reads=NAMES),
    Command("rm", reads=NAMES),
    Command("chmod", reads=NAMES),
    Command("kill", reads=NAMES),
    # -- shell builtins; their risky forms are marked by the shell analysis (`problem`)
    Command("echo", read_only=True, reads=NAMES, dynamic_ok=True),
    Command("printf", read_only=True, reads=NAMES, dynamic_ok=True, problem=printf_problem),
    Command("true", read_only=True, reads=NAMES, dynamic_ok=True),
    Command("false", read_only=True, reads=NAMES, dynamic_ok=True),
    Command(":", read_only=True, reads=NAMES),
    Command("cd", read_only=True, reads=NAMES, dynamic_ok=True),
    Command("sleep", read_only=True, reads=NAMES, dynamic_ok=True),
    Command("wait", read_only=True, reads=NAMES, problem=wait_problem),
    Command("test", read_only=True, reads=NAMES, dynamic_ok=True, problem=test_problem),
    Command("[", read_only=True, reads=NAMES, dynamic_ok=True, problem=test_problem),
    Command("[[", read_only=True, reads=NAMES, problem=double_bracket_problem),
    # options only: `set` alone prints every variable
    Command("set", read_only=True, reads=NAMES, check=lambda a: bool(a) and a[0][:1] in ("-", "+"),
            problem=set_problem),
    Command("export", reads=NAMES, problem=export_problem),
    Command("readonly", problem=export_problem),
    Command("unset", reads=NAMES, problem=unset_problem),
    Command("read", problem=read_problem),
    Command("let", problem=evaluates("evaluates arithmetic")),
    Command("declare", problem=evaluates("evaluates names and values")),
    Command("typeset", problem=evaluates("evaluates names and values")),
    Command("local", problem=evaluates("evaluates names and values")),
    Command("source", problem=evaluates("runs a file's commands")),
    Command(".", problem=evaluates("runs a file's commands")),
    Command("trap", problem=evaluates("runs code later")),
    Command("mapfile", problem=evaluates("runs callbacks and assigns arrays")),
    Command("readarray", problem=evaluates("runs callbacks")),
    Command("getopts", problem=evaluates("assigns a named variable")),
    Command("shopt", problem=evaluates("changes how later lines parse")),
    Command("enable", problem=evaluates("loads builtins")),
    Command("hash", problem=evaluates("changes which program a name runs")),
    Command("alias", problem=evaluates("changes what later names run")),
    Command("bind", problem=evaluates("runs code on keys")),
    Command("complete", problem=evaluates("runs code")),
    Command("compgen", problem=evaluates("runs code")),
    Command("compopt", problem=evaluates()),
    Command("fc", problem=evaluates("runs history through an editor")),
    Command("history", problem=evaluates("can rewrite what runs")),
    # -- wrappers: the command they run is judged (`timeout 5 env X=1 nice git log` is `git log`)
    Command("env", wraps=Wraps(kind="env", options=_ENV), exact=True),
    Command("timeout", wraps=Wraps(options=_TIMEOUT, skips=1), exact=True),  # past the duration
    Command("nice", wraps=Wraps(options={"-n": True, "--adjustment": True}, numeric=True), exact=True),
    Command("time", wraps=Wraps(options=_P), exact=True),
    Command("nohup", wraps=Wraps(options=_P), exact=True),
    Command("stdbuf", wraps=Wraps(options={"-i": True, "-o": True, "-e": True, "--input": True, "--output": True,
                                           "--error": True}), exact=True),
    Command("command", read_only=True, reads=NAMES, check=lambda a: bool(a) and a[0] in _LOOKUP,
            wraps=Wraps(options=_P, lookup=_LOOKUP), exact=True),
    Command("builtin", wraps=Wraps(options=_P, lookup=_LOOKUP), exact=True),
    # a new session outlives the command's process group
    Command("setsid", wraps=Wraps(options={"-c": False, "--ctty": False, "-f": False, "--fork": False,
                                           "-w": False, "--wait": False}, why="`setsid` is not analysed")),
    Command("exec", wraps=Wraps(kind="exec", options={"-a": True, "-c": False, "-l": False},
                                why="`exec` is not analysed")),
    Command("xargs", wraps=Wraps(kind="xargs", options=_XARGS), exact=True),
    Command("eval", wraps=Wraps(kind="eval")),
    # -- shells: `bash -c '...'` runs its script, which is analysed
    Command("bash", wraps=Wraps(kind="shell"), learn="script", stdin_code=_SCRIPTED),
    Command("sh", wraps=Wraps(kind="shell"), learn="script", stdin_code=_SCRIPTED),
    Command("zsh", wraps=Wraps(kind="shell"), learn="script", stdin_code=_SCRIPTED),
    Command("dash", wraps=Wraps(kind="shell"), exact=True, stdin_code=_SCRIPTED),
    Command("ksh", wraps=Wraps(kind="shell"), exact=True, stdin_code=_SCRIPTED),
    Command("csh", exact=True, stdin_code=_SCRIPTED),
    Command("tcsh", exact=True, stdin_code=_SCRIPTED),
    Command("fish", exact=True, stdin_code=_SCRIPTED),
    Command("mksh", exact=True, stdin_code=_SCRIPTED),
    # -- interpreters: a script or `-m module` is learned; code on the line or on stdin never is
    Command("python", learn="script", stdin_code=_SCRIPTED),
    Command("python3", learn="script", stdin_code=_SCRIPTED),
    Command("node", learn="script", stdin_code=_SCRIPTED),
    Command("deno", learn="script", stdin_code=_SCRIPTED),
    Command("ruby", learn="script", exact=True, stdin_code=_SCRIPTED),
    Command("perl", learn="script", exact=True, stdin_code=_SCRIPTED),
    Command("php", learn="script", exact=True, stdin_code=_SCRIPTED),
    Command("python2", exact=True, stdin_code=_SCRIPTED),
    Command("pypy3", exact=True, stdin_code=_SCRIPTED),
    Command("Rscript", exact=True, stdin_code=_SCRIPTED),
    Command("julia", exact=True, stdin_code=_SCRIPTED),
    Command("lua", exact=True, stdin_code=_SCRIPTED),
    Command("tclsh", exact=True, stdin_code=_SCRIPTED),
    Command("m4", exact=True, stdin_code=_SCRIPTED),
    Command("bc", exact=True, stdin_code=_SCRIPTED),
    Command("dc", exact=True, stdin_code=_SCRIPTED),
    Command("expect", wraps=RUNNER, exact=True, stdin_code=_SCRIPTED),
    Command("osascript", wraps=RUNNER, exact=True, stdin_code=_SCRIPTED),
    Command("ed", exact=True, stdin_code="always"),  # the file is what they edit
    Command("ex", exact=True, stdin_code="always"),
    Command("sqlite3", exact=True, stdin_code="without SQL"),
    Command("psql", exact=True, stdin_code="without SQL"),
    Command("mysql", exact=True, stdin_code="without SQL"),
    # -- runners: what they run is not analysed
    Command("sudo", wraps=RUNNER, exact=True),
    Command("doas", wraps=RUNNER, exact=True),
    Command("su", wraps=RUNNER, exact=True),
    Command("chroot", wraps=RUNNER, exact=True),
    Command("unshare", wraps=RUNNER, exact=True),
    Command("nsenter", wraps=RUNNER, exact=True),
    Command("flock", wraps=RUNNER, exact=True),
    Command("ionice", wraps=RUNNER, exact=True),
    Command("chrt", wraps=RUNNER, exact=True),
    Command("taskset", wraps=RUNNER, exact=True),
    Command("strace", wraps=RUNNER, exact=True),
    Command("ltrace", wraps=RUNNER, exact=True),
    Command("watch", wraps=RUNNER, exact=True),
    Command("script", wraps=RUNNER, exact=True),
    Command("parallel", wraps=RUNNER, exact=True),
    Command("busybox", wraps=RUNNER, exact=True),
    Command("systemd-run", wraps=RUNNER, exact=True),
    Command("at", wraps=RUNNER, exact=True),
    Command("crontab", wraps=RUNNER, exact=True),
    Command("runuser", wraps=RUNNER),
    Command("setpriv", wraps=RUNNER),
    Command("firejail", wraps=RUNNER),
    Command("toybox", wraps=RUNNER),
    Command("fakeroot", wraps=RUNNER),
    Command("proot", wraps=RUNNER),
    Command("bwrap", wraps=RUNNER),
    Command("valgrind", wraps=RUNNER),
    Command("catchsegv", wraps=RUNNER),
    Command("xdg-open", wraps=RUNNER),
    Command("open", wraps=RUNNER),
    Command("nohup.exe", wraps=RUNNER),
    Command("start-stop-daemon", wraps=RUNNER),
    Command("daemonize", wraps=RUNNER),
    Command("batch", wraps=RUNNER),
    Command("tmux", wraps=RUNNER),
    Command("screen", wraps=RUNNER),
    Command("rlwrap", wraps=RUNNER),
    Command("unbuffer", wraps=RUNNER),
    Command("cgexec", wraps=RUNNER),
    Command("numactl", wraps=RUNNER),
    Command("prlimit", wraps=RUNNER),
    # -- programs whose arguments can run code or write files in ways a prefix rule would not
    # bound: "always" learns the exact line
    Command("tar", exact=True),
    Command("rsync", exact=True),
    Command("ssh", exact=True),
    Command("scp", exact=True),
    Command("sftp", exact=True),
    Command("zip", exact=True),
    Command("less", exact=True),
    Command("more", exact=True),
    Command("vi", exact=True),
    Command("vim", exact=True),
    Command("nvim", exact=True),
    Command("emacs", exact=True),
    Command("nano", exact=True),
    Command("man", exact=True),
    Command("dd", exact=True),
    Command("gcc", exact=True),
    Command("cc", exact=True),
    Command("clang", exact=True),
    Command("g++", exact=True),
    Command("c++", exact=True),
    Command("openssl", exact=True),
    Command("gpg", exact=True),
    Command("patch", exact=True),
    Command("gdb", exact=True),
    # -- tools of subcommands: "always" learns the subcommand (`npm run build <args>`)
    GIT,
    *(Command(name, learn="subcommands") for name in (
        "npm", "pnpm", "yarn", "bun", "npx", "cargo", "go", "docker", "podman", "kubectl", "helm", "pip", "pip3", "uv",
        "poetry", "pdm", "hatch", "tox", "nox", "make", "just", "gh", "apt", "apt-get", "brew", "dotnet", "mvn",
        "gradle", "terraform", "systemctl", "conda", "bundle", "rake", "mix", "composer", "rustup", "nix")),
)


def catalogue_of(entries: Iterable[Command]) -> dict[str, Command]:
    """name -> entry; two entries for one command are a mistake in the table, found on import."""
    out: dict[str, Command] = {}
    for entry in entries:
        if entry.name in out:
            raise ValueError(f"two catalogue entries for {entry.name}")
        out[entry.name] = entry
    return out


# name -> its entry. A path such as ./ls or /bin/ls never matches a name here: whoever looks
# a command up says whether its base name counts.
CATALOGUE: dict[str, Command] = catalogue_of(ENTRIES)


def lookup(name: str) -> Command | None:
    """The entry of the command called `name`, or None for one the catalogue does not know."""
    return CATALOGUE.get(name)
