"""The root command's options are declared once (`nanohermes.argv.OPTIONS`): the help typer
shows, the quick reading of a `-p` run and the config's choices all come from it and from
`nanohermes.common.modes`, and a run reads the same whether typer or the quick reading parsed it."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, get_args

import pytest

from nanohermes import argv

from nanohermes.common import modes
from nanohermes.config import Config, SandboxConfig
from nanohermes.testing import FakeServer, call, tool_reply

REPO = Path(__file__).resolve().parent.parent


def test_the_help_lists_every_declared_option_with_its_help(cli: Any) -> None:
    r = cli("--help")
    assert r.code == 0, r.err
    text = "".join(r.out.split())  # the help without its spaces, whatever the wrapping
    at = 0
    for opt in argv.OPTIONS:  # each with its names, its choices and its help, in the declared order
        end = text.index("".join(opt.help.split()), at)
        entry = text[at:end]
        assert all(name + ("," if name.startswith("-") and len(name) == 2 else "") in entry or name in entry
                   for name in opt.names), (opt.names, entry)
        if opt.choices is not None:
            assert "<" + "|".join(opt.choices) + ">" in entry, entry
        at = end


@pytest.mark.parametrize(("option", "words"), [("--reasoning-effort", modes.EFFORTS), ("--wire-api", modes.WIRES),
                                               ("--sandbox", modes.SANDBOX_MODES),
                                               ("--mode", tuple(m.value for m in modes.Mode)),
                                               ("--output-format", ("text", "json", "stream-json"))])
def test_a_bad_word_is_a_usage_error_listing_the_words_of_modes(cli: Any, turn: Any, server: FakeServer, option: str,
                                                                words: tuple[str, ...]) -> None:
    listed = f"nanohermes: error: {option} takes {', '.join(words[:-1])} or {words[-1]}, not 'bogus'\n"
    for run in (cli, turn):  # the process, and a command line run in this one
        r = run("-p", "hi", option, "bogus", server=server)
        assert r.code == 2
        assert listed in r.err and "hint: `nanohermes --help` lists the options" in r.err, r.err
        assert "Value error" not in r.err
    assert server.requests == []


@pytest.mark.parametrize("value", ["abc", "0", "-3", "2.5"])
def test_a_number_option_given_what_is_no_number_in_its_range_is_a_usage_error_saying_what_it_takes(
        cli: Any, turn: Any, server: FakeServer, value: str) -> None:
    for run, args in ((cli, ("-p", "hi")), (turn, ("-p", "hi")), (cli, ())):  # -p in both ways, and the REPL's start
        r = run(*args, "--max-turns", value, server=server)
        assert r.code == 2
        assert f"nanohermes: error: --max-turns takes a whole number of at least 1, not {value!r}\n" in r.err, r.err
        assert "Input should be" not in r.err and "Usage:" not in r.err
    assert server.requests == []


def test_the_config_takes_its_choices_from_modes() -> None:
    types = {f.name: f.type for f in dataclasses.fields(Config)} | {
        "sandbox.mode": {f.name: f.type for f in dataclasses.fields(SandboxConfig)}["mode"]}
    assert types["reasoning_effort"] == "Effort | None" and get_args(modes.Effort) == modes.EFFORTS
    assert types["wire_api"] == "Wire" and types["sandbox.mode"] == "SandboxMode"
    assert modes.EFFORTS == ("none", "minimal", "low", "medium", "high", "xhigh")
    assert modes.WIRES == ("chat", "responses") and modes.SANDBOX_MODES == ("auto", "off")


# A report of what the run loaded, at its exit: whether typer read the options.
PROBE = """
import sys
from nanohermes.common.exits import at_exit
sys.argv = ["nanohermes", *sys.argv[1:]]
at_exit(lambda: print("typer", "typer" in sys.modules, file=sys.stderr))
from nanohermes.cli import main
main()
"""


@pytest.mark.parametrize(("quick", "typer"), [
    (["--max-turns", "1", "--yes", "true"], ["--max-turns", "+1", "--yes"]),  # a number written otherwise
    (["-y", "-v", "--sandbox", "off", "--max-turns=1"], ["-yv", "--sandbox=off", "--max-turns", "01"]),  # flags run together
])
def test_typer_and_the_quick_reading_start_the_same_run(server: FakeServer, home: Path, workspace: Path,
                                                        quick: list[str], typer: list[str]) -> None:
    """The same options, once plain and once written so that only typer reads them: the same
    requests, the same tool run unasked (--yes), the same stop after one model call
    (--max-turns, exit 3) and the same result."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "k", "HOME": str(home),
           "XDG_CONFIG_HOME": str(home / ".config")}
    common = ["-p", "hi", "--base-url", server.base_url, "--model", "fake-model", "--reasoning-effort", "high",
              "--mode", "accept-edits", "--output-format", "json", "--no-session"]
    results = []
    for extra, read_by_typer in ((quick, False), (typer, True)):
        made = workspace / ("made-typer" if read_by_typer else "made-quick")  # names of one length
        server.add(tool_reply(call("run_command", {"command": f"touch {made.name}"})))  # and no second call
        p = subprocess.run([sys.executable, "-c", PROBE, *common, *extra], cwd=workspace, env=env,
                           capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
        assert p.returncode == 3, p.stderr
        assert f"typer {read_by_typer}" in p.stderr, p.stderr
        assert made.exists()
        result = json.loads(p.stdout)
        assert result.pop("files_changed") == [made.name]
        results.append({k: v for k, v in result.items() if k != "uuid" and "duration" not in k})
    first, second = server.requests
    assert first == second and first["reasoning_effort"] == "high"
    assert results[0] == results[1] and results[0]["exit_reason"] == "max_turns"
