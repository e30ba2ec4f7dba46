"""The shell analysis fails closed, class by class: every construct it does not follow exactly
is asked in the default mode and refused under --yes / goal mode when a deny rule could
match; "read-only" programs with arguments that run code are not read-only; deny rules see
through git's global options and respellings; learned rules are exact for risky commands."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from nanohermes.guard.permissions import Policy, Rule, Target, decide, describe, is_read_only, suggest_command_rule
from nanohermes.guard.shellparse import ParseError, split
from tool_support import decide_call

R = Rule.parse
DEFAULT = Policy()
YES_DENY = Policy(auto_approve=True, deny=(R("run_command(rm *)"),))
GOAL_DENY = Policy(mode="goal", deny=(R("run_command(git push *)"),))


def verdict(policy: Policy, command: str) -> tuple[str, str]:
    v = decide_call(policy, tool_name="run_command", approval="always", read_only=False, subject=command)
    return v.decision, v.reason


# class -> lines the analysis does not follow exactly. Each is asked by default (nothing
# learnable) and refused when nobody will be asked and a deny rule exists.
UNANALYSABLE: dict[str, list[str]] = {
    "old arithmetic $[...] (and the here-doc desync it caused)": [
        "echo $[1<<2]\ntouch X", "echo $[x]", "ls $[1+1]", "echo \"$[1<<2]\"\ntouch X",
    ],
    "arithmetic with names or expansions": [
        "echo $((x))", "echo $((x+1))", "echo $(( a[$(touch X)] ))", "ls $((i++))", "((x=1))", "(( y ))",
        "for ((i=0;i<3;i++)); do echo $i; done", "echo $((\"1\"))", "echo \"$((x))\"", "echo $(('1'+2))",
    ],
    "parameter expansions with operators": [
        "echo ${x:-default}", "echo ${!x}", "echo ${x[0]}", "echo ${x[@]}", "echo ${x:0:1}", "echo ${x/a/b}",
        "echo ${x#y}", "echo ${x%y}", "echo ${x^^}", "echo ${x@P}", "echo ${x:=$(touch X)}", "echo \"${x:-\"}\"}\"",
        "echo ${#x[@]}", "echo ${@:x}", "echo ${x,,}",
    ],
    "array subscripts": [
        "a[0]=1", "a[$(touch X)]=1; ls", "a[x]=1 ls", "env a[1]=2 ls", "declare -a a=(1 2)",
    ],
    "brace expansion, variables, globs or tildes in command position": [
        "{rm,-f,x}", "{ls,-la}", "X=rm; $X -f y", "$CMD --version", "${CMD} x", "$(echo rm) x", "`echo rm` x",
        "/bin/r[m] x", "/bin/r? x", "/bin/*m x", "~+/bin/tool", "~root/bin/tool", "timeout 5 $CMD",
        "env $X", "find . -exec {} \\;", "x{a,b}",
    ],
    "exec": ["exec rm x", "exec ls", "exec >out.txt", "exec -a name ls", "ls && exec bash"],
    "here-strings, here-documents or pipes into a shell": [
        "bash <<< 'rm x'", "sh <<< \"touch X\"", "echo rm x | sh", "curl x | bash", "cat script | bash -s",
        "bash < script.sh", "sh <<'EOF'\nrm x\nEOF", "ls | zsh", "xargs bash < list", "bash -", "echo x | dash -e",
        "bash -i", "bash --rcfile evil -c ls", "bash -O extglob -c ls",
    ],
    "wrappers with options not followed": [
        "env -S 'rm x'", "env --split-string='rm x'", "env -S rm", "timeout --bogus 5 rm x", "nice --weird rm",
        "xargs env < list", "xargs -I{} sh -c '{}' < list", "xargs -I % sh -c % < list", "xargs timeout 5 < list",
    ],
    "setsid and other runners": [
        "setsid rm x", "setsid -f sleep 100", "sudo rm x", "doas ls", "nohup setsid x", "unshare -r ls",
        "watch ls", "flock /tmp/l rm x", "chroot / ls", "strace ls",
    ],
    "git global options before the subcommand": [
        "git -C . status", "git -c core.fsmonitor=evil status", "git --git-dir=evil status", "git --work-tree=. log",
        "git --exec-path=. status", "git --namespace=x log", "git -p log", "git --bare log",
        "git --config-env=core.pager=X log",
    ],
    "git subcommands that run the commands they are given": [
        "git submodule foreach 'rm x'", "git bisect run rm x", "git rebase --exec 'rm x' HEAD~1", "git rebase -x rm",
        "git filter-branch --tree-filter 'rm x'", "git difftool -x rm", "git difftool --extcmd=rm",
    ],
    "builtins that evaluate code or names": [
        "test -v x", "[ -v x ]", "[ -v 'a[$(touch X)]' ]", "[[ -v x ]]", "printf -v PATH %s /tmp/evil; ls",
        "printf -v x 1", "printf $FMT", "printf \"$FMT\" a", "declare x=1", "typeset -i x=y", "let x=1",
        "eval ls", "source ./env.sh", ". ./env.sh", "trap 'rm x' EXIT", "read -a arr", "read -ra arr", "read 'a[$(touch X)]'",
        "read PATH < file", "mapfile x < f", "readarray -C cb x < f", "unset 'a[$(touch X)]'", "getopts a x",
        "shopt -s extglob", "alias ls=rm", "hash -p /bin/rm ls", "enable -f ./x.so x", "wait -p x",
        "[[ $x -eq 1 ]]", "[[ a -lt b ]]", "[ $x = y ]", "test $x", "[ \"$a\" \"$b\" ]", "[ \"$a\" \"$b\" \"$c\" \"$d\" ]",
        "set -k", "set -o posix", "export PATH=/tmp/evil", "export 'a[$(touch X)]=1'", "export $X",
        "local x=1", "compgen -C cmd x", "fc -s", "readonly IFS=x",
    ],
    "assignments that change how later commands run": [
        "PATH=./bin; ls", "IFS=x; ls", "BASH_ENV=./evil; ls", "CDPATH=.git; cd hooks", "HOME=.; cd",
        "for PATH in ./bin; do ls; done", "for IFS in x; do ls $y; done", "for CDPATH in .git; do cd hooks; done",
    ],
    "ANSI-C quotes with escapes that are not plain": [
        "$'\\x72m' x", "echo $'\\x41'", "echo $'\\101'", "echo $'\\u0041'", "echo $'\\cA'", "echo $'\\e[2J'",
    ],
    "quotes inside ${...} or $((...)) and here-documents with expansions": [
        "echo ${x:-'a'}", "echo ${x-\"a\"}", "echo $((\"x\"))",
        "cat <<EOF\n$((x))\nEOF", "cat <<EOF\n${x:-a}\nEOF", "cat <<EOF\n$[1]\nEOF", "cat <<EOF\n`id`\nEOF",
        "cat <<EOF\nline\\\nEOF\ntouch X\nEOF",
    ],
    "lexing that bash reads differently": [
        "echo `echo \\`touch X\\``", "echo {fd}>x", "ls {fd}>x", "[[ a < b ]]", "echo $(cat <<EOF)\nx\nEOF",
        "case x in a) ;; esac", "f() { rm x; }",
        "cat <<EOF && (ls\n)\nbody\nEOF", "cat <<EOF $(echo\n)\nbody\nEOF", "cat <<EOF `echo\n`\nbody\nEOF",
    ],
    "brace expansion in arguments": [
        "echo {a,b}", "rm {-rf,x}", "tee {.git/config,/dev/null}", "git {push,origin}", "ls x{1..3}",
    ],
}
CASES = [(cls, line) for cls, lines in UNANALYSABLE.items() for line in lines]


@pytest.mark.parametrize("cls,line", CASES, ids=[f"{c[:24]}:{line[:30]}" for c, line in CASES])
def test_unanalysable_lines_are_asked_by_default(cls: str, line: str) -> None:
    v = decide_call(DEFAULT, tool_name="run_command", approval="always", read_only=False, subject=line)
    assert v.decision == "ask", (cls, line, v)
    assert v.suggest is None, "nothing can be learned for a line that is not analysed"
    assert "cannot be analysed" in v.reason, v.reason


@pytest.mark.parametrize("cls,line", CASES, ids=[f"{c[:24]}:{line[:30]}" for c, line in CASES])
def test_unanalysable_lines_are_refused_when_nobody_is_asked_and_a_deny_rule_exists(cls: str, line: str) -> None:
    for policy in (YES_DENY, GOAL_DENY):
        decision, reason = verdict(policy, line)
        assert decision == "deny", (cls, line, policy.mode, reason)
        assert "denied by rule" in reason or ("cannot be analysed" in reason and "spelled out" in reason), reason


@pytest.mark.parametrize("line", ["echo $[1<<2]\ntouch X", "echo ${x:-default}", "exec ls", "git -C . status"])
def test_without_deny_rules_goal_mode_still_runs_them(line: str) -> None:
    assert verdict(Policy(mode="goal"), line)[0] == "allow"
    assert verdict(Policy(auto_approve=True), line)[0] == "allow"


# -- lines that stay analysed: the fail-closed rules do not swallow ordinary commands --------
STILL_ANALYSED = [
    ("echo $((1 + 2)) $((1<<2))", "allow"), ("echo ${HOME} $HOME ${#HOME} ${1} ${@}", "allow"),
    ("echo $'a\\tb\\n'", "allow"), ("[ -f x ]", "allow"), ("[ -n \"$x\" ]", "allow"), ("[ \"$x\" = y ]", "allow"),
    ("test -d \"$d\"", "allow"), ("[[ -f x ]]", "allow"), ("[[ 1 -eq 1 ]]", "allow"), ("set -euo pipefail; ls", "allow"),
    ("export LANG=C; ls", "ask"), ("X=1; echo $X", "allow"), ("git --no-pager log -3", "allow"),
    ("git -P diff", "allow"), ("cat <<EOF\n$HOME ${HOME}\nEOF", "allow"), ("cat <<'EOF'\n$((x)) ${x:-y}\nEOF", "allow"),
    ("bash script.sh", "ask"), ("bash -c 'ls | wc -l'", "allow"), ("bash -euo pipefail -c 'ls'", "allow"),
    ("read -r line < f; echo \"$line\"", "ask"), ("printf '%s\\n' a b", "allow"), ("echo \"$'x\"", "allow"),
    ("env LANG=C ls", "allow"), ("find . -name '*.py' -exec grep -l x {} +", "ask"), ("wait", "allow"),
]


@pytest.mark.parametrize("line,expected", STILL_ANALYSED)
def test_ordinary_lines_stay_analysed(line: str, expected: str) -> None:
    split(line)  # no ParseError
    assert all(not c.unmodelled for c in split(line)), [c.unmodelled for c in split(line)]
    assert verdict(DEFAULT, line)[0] == expected


def test_double_quoted_dollar_quote_is_a_plain_dollar_not_a_quote() -> None:
    # bash: `"$'"` is the two characters $' ; the ; after it separates commands.
    assert [c.argv for c in split("echo \"$'\" ; touch X ; echo \"'\"")] == [("echo", "$'"), ("touch", "X"), ("echo", "'")]


@pytest.mark.parametrize("line", [
    "echo $[1<<2]\ntouch X",  # read as a here-document, the second line would vanish
    "echo \"$'\" ; touch X ; echo \"'\"",  # read as $'...', the touch would vanish
    "a=(); x='a[$(touch X)]'; echo $((x))",  # arithmetic evaluates the name's value
    "a=(); x='a[$(touch X)]'; [ -v \"$x\" ]",  # test -v evaluates the subscript
    "f='x -o -v a[$(>X)]'; a=(); [ -f $f ]",  # an unquoted value becomes test's operators
    "x='a[$(>X)]'; a=(); printf -v \"$x\" 1",
])
def test_the_examples_are_real_bash_desyncs_and_are_not_allowed(tmp_path: Path, line: str) -> None:
    subprocess.run(["bash", "-c", line], cwd=tmp_path, capture_output=True, timeout=10)
    assert (tmp_path / "X").exists(), "bash really runs the hidden command"
    assert verdict(DEFAULT, line)[0] == "ask"
    try:
        commands = split(line)
    except ParseError:
        commands = None
    if commands is not None and not any(c.unmodelled for c in commands):
        assert ("touch", "X") in [c.argv for c in commands]  # read as bash reads it: the touch is seen
    else:
        assert verdict(YES_DENY, line)[0] == "deny"


# -- "read-only" programs whose arguments run code or write files ------------------------------
NOT_READ_ONLY = {
    "sed": ["sed -l 9 '1e touch X' a", "sed -n -l 9 '1e touch X' a", "sed -ne '1e touch X' a", "sed -i s/a/b/ f",
            "sed -i.bak s/a/b/ f", "sed --in-place s/a/b/ f", "sed -ni p f", "sed -E -i s/a/b/ f", "sed 's/a/b/e' f",
            "sed 's/a/b/w out' f", "sed '1w out' f", "sed '1W out' f", "sed '1r /etc/passwd' f", "sed 1R\\ x f",
            "sed -f script.sed f", "sed --file=s f", "sed --expression='1e id' f", "sed -s -e p -e '1e id' f",
            "sed -z '1e id' f", "sed --debug 'e id' f", "sed -u -l5 '1e id' f", "sed --bogus p f", "sed"],
    "git": ["git -c core.pager=sh log", "git -C sub status", "git --git-dir=x status", "git --exec-path=. log",
            "git -c core.fsmonitor=./x status", "git log --output=x", "git diff --ext-diff", "git grep -O x",
            "git grep --open-files-in-pager=x y", "git show --textconv HEAD", "git cat-file --textconv HEAD:x",
            "git branch new", "git remote add x y", "git stash", "git config core.pager x", "git -p status",
            "XDG_CONFIG_HOME=./evil git status", "GIT_DIR=evil git status", "GIT_CONFIG_GLOBAL=x git log",
            "HOME=. git status", "GIT_EXTERNAL_DIFF=x git diff"],
    "awk": ["awk 'BEGIN{system(\"id\")}'", "awk '{print > \"out\"}' f", "awk '{print | \"sh\"}' f",
            "awk 'BEGIN{\"id\" | getline}'", "awk -f prog.awk f", "awk -e 'BEGIN{}' -e 'BEGIN{system(\"x\")}'",
            "awk '@load \"x\"' f", "awk -i inc f", "awk -l ext f", "gawk -o out '{print}' f",
            "gawk --profile=out '{print}' f", "gawk -d '{print}' f", "mawk -W exec x", "awk -E x f",
            "awk 'BEGIN{printf \"x\" > \"/tmp/x\"}'", "awk"],
    "find": ["find . -exec id \\;", "find . -execdir id \\;", "find . -ok id \\;", "find . -okdir id \\;",
             "find . -delete", "find . -fprint out", "find . -fprint0 out", "find . -fprintf out x", "find . -fls out",
             "find *", "find $DIR -name x"],
    "xargs": ["xargs sed -n 1p < list", "xargs find < list", "xargs rm < list"],
    "others": ["rg --pre ./x foo", "rg --pre-glob '*' foo", "rg *", "sort -o out f", "sort --compress-program=x f",
               "uniq a out", "xxd -r f", "tree -o out", "date -s now", "file -C -m x", "tee out", "cat f > out",
               "LD_PRELOAD=./x.so ls", "GCONV_PATH=. cat f", "RIPGREP_CONFIG_PATH=x rg foo", "FOO=1 ls",
               "./ls", "/tmp/ls"],
}
NR_CASES = [(prog, line) for prog, lines in NOT_READ_ONLY.items() for line in lines]


@pytest.mark.parametrize("prog,line", NR_CASES, ids=[c[1][:40] for c in NR_CASES])
def test_read_only_programs_with_arguments_that_run_code_are_asked(prog: str, line: str) -> None:
    try:
        commands = split(line)
    except ParseError:
        commands = None
    if commands is not None:
        assert not all(is_read_only(c) and not c.writes for c in commands), line
    assert verdict(DEFAULT, line)[0] == "ask", line


@pytest.mark.parametrize("line", [
    "sed -n 1,20p f", "sed -n -e 1p -e 2p f", "sed -ne 's/a/b/p' f", "sed -E 's/(a)/\\1/g' f", "sed -l 9 -n p f",
    "sed --expression=p f", "awk '{print $1}' f", "awk -F: '{print $2}' f", "awk -v x=1 -e '{print x}' f",
    "git status", "git --no-pager log", "git log --oneline -5", "git diff HEAD~1", "git branch -a",
    "find . -name '*.py' -type f", "rg -n foo src", "sort -u f", "LC_ALL=C sort f", "cat *.md",
])
def test_read_only_programs_with_harmless_arguments_still_run(line: str) -> None:
    assert verdict(DEFAULT, line)[0] == "allow", verdict(DEFAULT, line)


# -- deny rules see through respellings --------------------------------------------------------
RESPELLINGS = [
    ("rm *", "{rm,-f,x}"), ("rm *", "exec rm x"), ("rm *", "X=rm; $X x"), ("rm *", "/bin/r[m] x"),
    ("rm *", "bash <<< 'rm x'"), ("rm *", "echo rm x | sh"), ("rm *", "env -S 'rm x'"), ("rm *", "setsid rm x"),
    ("rm *", "setsid -f rm x"), ("rm *", "command exec rm x"), ("rm *", "xargs -I{} rm {} < list"),
    ("git push *", "git -C . push"), ("git push *", "git --no-pager push"), ("git push *", "git -c k=v push"),
    ("git push *", "git -C sub -c a=b --git-dir=.git --work-tree=. --namespace n --exec-path=. push origin"),
    ("git push *", "git --git-dir .git push"), ("git push *", "git pus[h] origin"), ("git push *", "S=push; git $S"),
    ("git push *", "git $(echo push)"), ("git push *", "xargs git < cmds"), ("git push *", "git {push,origin}"),
    ("rm -rf *", "rm *"), ("rm -rf *", "rm $OPTS x"),
]


@pytest.mark.parametrize("deny,line", RESPELLINGS)
def test_respellings_of_a_denied_command_are_refused_when_nobody_is_asked(deny: str, line: str) -> None:
    for policy in (Policy(auto_approve=True, deny=(R(f"run_command({deny})"),)),
                   Policy(mode="goal", deny=(R(f"run_command({deny})"),))):
        decision, reason = verdict(policy, line)
        assert decision == "deny", (line, reason)
    attended = Policy(allow=(R("run_command(*)"),), deny=(R(f"run_command({deny})"),))
    assert verdict(attended, line)[0] != "allow", line  # an allow-all rule does not open them either


@pytest.mark.parametrize("line", ["git -C . push", "git --no-pager push", "git -c k=v push", "git -C a -C b push -f",
                                  "git --git-dir=.git push", "git --exec-path push", "timeout 5 git -C . push"])
def test_deny_rules_see_through_git_global_options_in_every_mode(line: str) -> None:
    decision, reason = verdict(Policy(deny=(R("run_command(git push *)"),)), line)
    assert (decision, reason) == ("deny", "denied by rule run_command(git push *)")


def test_ask_rules_see_through_git_global_options_too() -> None:
    policy = Policy(allow=(R("run_command(git *)"),), ask=(R("run_command(git push *)"),))
    decision, reason = verdict(policy, "git --no-pager push")
    assert decision == "ask" and "rule run_command(git push *) asks" in reason


def test_a_glob_that_cannot_match_the_denied_words_is_not_refused() -> None:
    policy = Policy(mode="goal", deny=(R("run_command(git push *)"),))
    assert verdict(policy, "git add *.py")[0] == "allow"
    assert verdict(policy, "ls *")[0] == "allow"


def test_the_refusal_says_how_to_run_it() -> None:
    decision, reason = verdict(YES_DENY, "{ls,-la}")
    assert decision == "deny"
    assert reason == ("the command cannot be analysed (brace expansion in command position is not analysed) and "
                      "deny rules apply to run_command; unattended runs refuse it: write it as plain simple commands "
                      "with every word spelled out (no eval, exec, brace expansion, computed names or arithmetic on "
                      "variables), or leave it for a person to approve")


# -- "always" never learns more than was seen ---------------------------------------------------
@pytest.mark.parametrize("command,rule", [
    ("sed -i s/x/y/ a.txt", "sed -i s/x/y/ a.txt"),
    ("sed -i '1e touch X' a.txt", "sed -i '1e touch X' a.txt"),
    ("awk '{print > \"o\"}' f", "awk '{print > \"o\"}' f"),
    ("find . -name x -delete", "find . -name x -delete"),
    ("xargs rm < list", "rm"),  # the command xargs runs, exactly (its appended arguments are unknown)
    ("python -c 'print(1)'", "python -c 'print(1)'"),
    ("node -e 'x'", "node -e 'x'"),
    ("python3 -I evil.py", "python3 -I evil.py"),
    ("perl -pi -e s/a/b/ f", "perl -pi -e s/a/b/ f"),
    ("git -c core.pager=x log", "git -c core.pager=x log"),
    ("git log --output=x", "git log --output=x"),
    ("env FOO=1 make", "FOO=1 make"),
    ("timeout 5 make test", "make test"),
    ("sort -o out in", "sort -o out in"),
    ("rg --pre ./x foo", "rg --pre ./x foo"),
    ("tar xf a.tar", "tar xf a.tar"),
])
def test_always_learns_the_exact_line_for_commands_whose_arguments_run_code(command: str, rule: str) -> None:
    [cmd] = split(command.replace(" < list", "")) if "xargs" not in command else split(command)
    learned = suggest_command_rule(cmd)
    assert learned.pattern == rule.replace("*", "[*]")
    assert "*" not in (learned.pattern or "").replace("[*]", "")


def test_always_on_sed_in_place_does_not_cover_a_sed_that_executes() -> None:
    first = "sed -i s/x/y/ a.txt"
    v = decide_call(DEFAULT, tool_name="run_command", approval="always", read_only=False, subject=first)
    assert v.decision == "ask" and [str(r) for r in v.suggest or ()] == ["run_command(sed -i s/x/y/ a.txt)"]
    learned = Policy(allow=tuple(v.suggest or ()))
    assert verdict(learned, first)[0] == "allow"
    for other in ("sed -i '1e touch X' a.txt", "sed -i s/x/y/ b.txt", "sed -i s/x/y/e a.txt", "sed -i s/x/y/ a.txt x"):
        assert verdict(learned, other)[0] == "ask", other


def test_learned_rules_keep_their_quotes_and_reparse_to_the_same_command() -> None:
    command = "grep -n 'a b' notes.txt > hits.txt"
    v = decide_call(DEFAULT, tool_name="run_command", approval="always", read_only=False, subject=command)
    [rule] = v.suggest or ()
    assert str(rule) == "run_command(grep -n 'a b' notes.txt > hits.txt)"
    again = R(str(rule))
    assert verdict(Policy(allow=(again,)), command)[0] == "allow"
    # Without the quotes it is another command (three words), which the rule does not cover.
    assert verdict(Policy(allow=(again,)), "grep -n a b notes.txt > hits.txt")[0] == "ask"


# -- where no OS sandbox is available ----------------------------------------------------------
NO_SANDBOX = [
    (Policy(sandboxed=False), "ls -la", "allow"),
    (Policy(sandboxed=False), "git status", "allow"),
    (Policy(sandboxed=False), "grep -n 'a b' notes.txt", "allow"),
    (Policy(sandboxed=False), "ls | wc -l", "ask"),  # a pipe is shell syntax beyond words
    (Policy(sandboxed=False), "ls; pwd", "ask"),
    (Policy(sandboxed=False), "ls 2>/dev/null", "ask"),
    (Policy(sandboxed=False), "echo $HOME", "ask"),
    (Policy(sandboxed=False), "cat *.md", "ask"),
    (Policy(sandboxed=False), "LANG=C ls", "ask"),
    (Policy(sandboxed=False), "timeout 5 ls", "ask"),
    (Policy(sandboxed=False), "echo $(ls)", "ask"),
    (Policy(sandboxed=False, allow=(R("run_command(make *)"),)), "make test", "ask"),  # allow rules ask
    (Policy(sandboxed=False, allow=(R("run_command"),)), "touch x", "ask"),
    (Policy(sandboxed=False, auto_approve=True), "make test", "allow"),  # --yes is the person's choice
    (Policy(sandboxed=False, mode="goal"), "make test", "allow"),
    (Policy(sandboxed=False, mode="goal", deny=(R("run_command(rm *)"),)), "rm x", "deny"),
    (Policy(sandboxed=True, allow=(R("run_command(make *)"),)), "make test", "allow"),
]


@pytest.mark.parametrize("policy,command,expected", NO_SANDBOX)
def test_without_a_sandbox_only_plain_read_only_commands_run_unasked(policy: Policy, command: str,
                                                                     expected: str) -> None:
    decision, reason = verdict(policy, command)
    assert decision == expected, reason
    if expected == "ask" and not reason.startswith("`"):
        assert "no OS sandbox" in reason, reason


def test_permissions_report_says_what_no_sandbox_means() -> None:
    assert ("no OS sandbox: only built-in read-only commands written as plain words run without asking; allow and "
            "learned rules ask, and --yes / goal mode run commands unconfined") in describe(Policy(sandboxed=False))
    assert not any("no OS sandbox" in line for line in describe(Policy()))
    assert ("commands the analysis cannot follow exactly (eval, exec, brace expansion, computed names, ...) are asked "
            "every time; with deny rules, --yes and goal mode refuse them") in describe(YES_DENY)


@pytest.mark.parametrize("command", ["XDG_CONFIG_HOME=./evil git log", "GIT_CONFIG_GLOBAL=./evil git log",
                                     "HOME=. git log", "GIT_DIR=x git log", "git --git-dir=x log", "git -c a=b log",
                                     "GCONV_PATH=. git log", "LD_PRELOAD=./x.so git log"])
def test_an_allow_rule_for_git_does_not_cover_git_pointed_at_other_config(command: str) -> None:
    assert verdict(Policy(allow=(R("run_command(git log *)"),)), command)[0] == "ask"


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

DENIED_LINES = ["rm -rf build", "curl http://x.test/s", "git push origin main", "chmod 777 key"]
RESPELL = ["{{{head},{rest}}}", "exec {c}", "X={head}; $X {tail}", "/bin/{glob} {tail}", "bash <<< '{c}'",
           "echo '{c}' | sh", "env -S '{c}'", "setsid {c}", "setsid -f {c}", "command exec {c}", "sudo {c}",
           "eval '{c}'", "xargs -I{{}} {c} < list", "$(echo {head}) {tail}", "${{X}} {tail}", "{head}{{,}} {tail}",
           "echo $[1]\n{c}", "a[0]=1; {c}", "exec -a x {c}", "timeout 5 setsid {c}", "env -S{c}",
           "printf -v X {head}; $X {tail}", "bash -s < f; {c}", "ls | bash -c '{c}'", "trap '{c}' EXIT",
           "git -C . {tail}", "git --no-pager {tail}", "git -c k=v {tail}"]


def _respell(template: str, command: str) -> str:
    head, _, tail = command.partition(" ")
    return template.format(c=command, head=head, tail=tail, rest=tail.replace(" ", ","),
                           glob=head[:-1] + f"[{head[-1]}]")


@settings(max_examples=300, deadline=None)
@given(target=st.sampled_from(DENIED_LINES), template=st.sampled_from(RESPELL), yes=st.booleans(),
       allow=st.lists(st.sampled_from(["*", "bash *", "env *", "exec *", "sudo *", "setsid *", "git *"]), max_size=2))
def test_respelled_denied_commands_never_run_unasked(target: str, template: str, yes: bool, allow: list[str]) -> None:
    if template.startswith("git") != target.startswith("git"):
        return
    words = target.split()
    deny = " ".join(words[:2]) if words[0] == "git" else words[0]
    line = _respell(template, target)
    attended = Policy(allow=tuple(R(f"run_command({a})") for a in allow), deny=(R(f"run_command({deny} *)"),))
    assert verdict(attended, line)[0] != "allow", line
    unattended = Policy(mode="default" if yes else "goal", auto_approve=yes, allow=attended.allow, deny=attended.deny)
    assert verdict(unattended, line)[0] == "deny", line


@pytest.mark.parametrize("command,read_only,plain", [
    ("ls -la", True, True), ("git status", True, True), ("cat a | wc -l", True, False), ("ls > x", False, False),
    ("touch x", False, False), ("exec ls", False, False), ("echo $[1]", False, False), ("sed -i s/a/b/ f", False, False),
    ("echo $HOME", True, False), ("git -C . status", False, False),
])
def test_read_only_line_tells_which_lines_need_no_write_access(command: str, read_only: bool, plain: bool) -> None:
    from nanohermes.guard.permissions import read_only_line

    assert read_only_line(command) is read_only
    assert read_only_line(command, plain=True) is plain


@pytest.mark.parametrize("command", ["xargs -a .env echo", "xargs --arg-file=.env echo", "xargs -a.env echo",
                                     "du --files0-from=.env", "wc --files0-from .env", "sort --files0-from=id_rsa"])
def test_file_lists_read_from_a_secret_file_are_secret_reads(command: str) -> None:
    decision, reason = verdict(DEFAULT, command)
    assert decision == "ask" and "secret-file list" in reason, reason


@pytest.mark.parametrize("command", ["cat /proc/1234/environ", "strings /proc/self/environ", "cat /proc/*/environ",
                                     "tr '\\0' '\\n' < /proc/99/environ", "xxd /proc/1/task/1/environ", "ps auxe",
                                     "ps e", "ps -e e", "date -f /proc/self/environ", "du --files0-from=/proc/1/environ",
                                     "wc --files0-from /proc/self/environ", "sha256sum -c /proc/self/environ",
                                     "file -m /proc/2/environ", "xargs -a /proc/self/environ"])
def test_a_process_environment_is_a_secret_read(command: str) -> None:
    assert verdict(Policy(secret_files=()), command)[0] == "ask"


@pytest.mark.parametrize("command", ["ps aux", "ps -ef", "ls /proc/1", "cat /proc/cpuinfo"])
def test_other_process_listings_still_run(command: str) -> None:
    assert verdict(DEFAULT, command)[0] == "allow"


@pytest.mark.parametrize("line", ["echo $[1<<2]\ntouch X", "case x in a) ;; esac\ntouch X", "echo ${x:-y}\ntouch X y"])
def test_a_deny_rule_still_sees_the_lines_it_can_read_in_a_line_that_cannot_be_analysed(line: str) -> None:
    assert verdict(Policy(deny=(R("run_command(touch *)"),)), line) == ("deny", "denied by rule run_command(touch *)")


@pytest.mark.parametrize("line", ["xargs -a.env", "xargs --arg-file=.env", "xargs -a .env", "xargs --arg-file .env"])
def test_xargs_reading_a_secret_file_alone_is_asked_in_every_spelling(line: str) -> None:
    """Alone xargs runs echo on what it reads: the file given with -a is printed."""
    v = decide(Policy(), tool_name="run_command", approval="always", target=Target(kind="command", subjects=(line,)))
    assert v.decision == "ask" and "secret-file list" in v.reason, (line, v)


def test_printf_with_only_a_double_dash_is_read_not_a_crash() -> None:
    v = decide(Policy(), tool_name="run_command", approval="always", target=Target(kind="command", subjects=("printf --",)))
    assert v.decision == "allow"
