"""A call's run is an immutable attempt: the gate judges without touching the context, hands
the tool its Attempt (the judged Target, the finished confinement), runs it again outside
the sandbox in another attempt of the same context, and says what it refused as values."""

from __future__ import annotations

import ast
import asyncio
import json
from dataclasses import FrozenInstanceError, dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from nanohermes.common.budget import Limits
from nanohermes.config import Config
from nanohermes.common.events import ApprovalRequest, RecordingUI, SandboxRefused
from nanohermes.guard.gate import Refusal
from nanohermes.common.messages import ToolCall
from nanohermes.guard.permissions import Policy, Rule
from nanohermes.turn.runtime import Runtime
from nanohermes.guard.sandbox import Refused, probe, remedies
from nanohermes.turn.session import Session
from nanohermes.testing import FakeServer, Reply, call, tool_reply
from nanohermes.tools import Attempt, Params, Tool, ToolContext, ToolResult
from nanohermes.tools.process import command_env, confinement_of, listed, run_capped, shell_argv

REPO = Path(__file__).resolve().parent.parent


def test_a_tool_context_is_made_in_one_place() -> None:
    """Only `ToolContext.of` builds one from a session; everything else changes one with
    `dataclasses.replace` (which keeps what it does not name: the session's folder, the start)."""
    makers = []
    for path in sorted((REPO / "nanohermes").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "ToolContext":
                makers.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert makers == []
    ctx = ToolContext(workspace=REPO, limits=Limits(), config=Config())
    with pytest.raises(FrozenInstanceError):
        ctx.call_id = "other"  # type: ignore[misc]


def _calls(path: Path, name: str) -> list[int]:
    """The lines of `path` that call `name` (by itself, or as an attribute: `sandbox.name`)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            called = node.func.id if isinstance(node.func, ast.Name) else \
                node.func.attr if isinstance(node.func, ast.Attribute) else ""
            if called == name:
                lines.append(node.lineno)
    return lines


def test_only_the_sandbox_makes_a_confinement_and_the_gate_imports_no_tool_module() -> None:
    """Whatever runs a process gets its confinement from `sandbox.confine` (a basis and the
    configuration), never one assembled elsewhere; the gate asks the sandbox, not a tool."""
    made = {f"{path.relative_to(REPO)}:{line}" for path in sorted((REPO / "nanohermes").rglob("*.py"))
            if path.relative_to(REPO / "nanohermes").parts[:2] != ("guard", "sandbox")
            for line in _calls(path, "Confinement")}
    assert made == set()
    imported = set()
    for node in ast.walk(ast.parse((REPO / "nanohermes" / "guard" / "gate.py").read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
        elif isinstance(node, ast.Import):
            imported.update(a.name for a in node.names)
    assert {m for m in imported if m.startswith("nanohermes.tools")} == {"nanohermes.tools.base"}  # the contract


@dataclass(frozen=True, kw_only=True)
class TouchParams(Params):
    path: str = ""


SEEN: list[tuple[str, Path | None, float, str, bool]] = []


@dataclass(frozen=True, kw_only=True)
class Touch(Tool[TouchParams]):
    """Creates a file with `touch`, in its attempt's confinement, and says what it saw of its
    context and attempt."""

    name: ClassVar[str] = "touch_file"
    description: ClassVar[str] = "Create a file."
    params: ClassVar[type[Params]] = TouchParams

    def rule_subject(self, args: TouchParams) -> str | None:
        return None

    async def run(self, args: TouchParams, ctx: ToolContext, attempt: Attempt) -> str | ToolResult:
        conf = confinement_of(ctx, attempt)
        fin = await run_capped(shell_argv(f"touch {args.path}"), cwd=ctx.workspace, env=command_env(),
                               limits=ctx.limits, timeout=30, out_cap=4096, err_cap=4096, confinement=conf)
        SEEN.append((ctx.call_id, ctx.session_folder, ctx.started, conf.policy, attempt.target is not None))
        return ToolResult(text=f"exit {fin.exit_code}", refused=fin.refused)


@pytest.mark.skipif(not probe().landlock, reason="Landlock is not available on this kernel")
def test_a_rerun_outside_the_sandbox_is_another_attempt_of_the_same_context(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    folder = tmp_path / "session"
    ui = RecordingUI(answers=["once"])
    rt = Runtime(tools=[Touch()], config=Config(), workspace=workspace, ui=ui,
                 policy=Policy(allow=(Rule.parse("touch_file"),)), session=Session(side_dir=folder))
    SEEN.clear()
    [msg] = asyncio.run(rt.run_calls([ToolCall("t1", "touch_file", json.dumps({"path": str(outside)}))]))
    assert outside.exists() and "ran outside the sandbox, approved by the user" in (msg.content or "")
    first, again = SEEN
    # The same context (call, session folder, start) both times, the judged Target both times;
    # only the confinement differs.
    assert first[:3] == again[:3] == ("t1", folder, first[2]) and first[4] and again[4]
    assert (first[3], again[3]) == ("workspace-write", "off")
    [asked] = ui.of(ApprovalRequest)
    assert asked.rerun and asked.sandbox == "workspace-write" and asked.refused == (Refused("write", str(outside)),)
    [event] = ui.of(SandboxRefused)
    assert event.rerun and [(r.kind, r.subject) for r in event.refused] == [("write", str(outside))]


def test_a_refusal_is_a_value_that_prints_the_models_result() -> None:
    by_rule = Refusal("rule", "denied by rule run_command(rm *)", "rm x")
    assert str(by_rule) == "ERROR: denied by rule run_command(rm *)" and by_rule.is_error
    assert "permissions.deny" in by_rule.allow
    by_person = Refusal("person", "use git rm", "rm x")
    assert not by_person.is_error and by_person.allow == ""
    assert str(by_person).startswith("Denied by the user, who said: use git rm\n")
    assert str(Refusal("person", "")) == "Denied by the user. Do not retry it; ask what to do instead."


@pytest.mark.parametrize(("refused", "allowed_by"), [
    (Refused("write", "/srv/x"), "sandbox.writable_roots"),
    (Refused("sealed", "/ws/.git/HEAD"), "sandbox.writable_roots"),
    (Refused("unnamed-write"), "sandbox.writable_roots"),
    (Refused("planted", "/ws/.mcp.json", "it would change how git or nanohermes starts"), "sandbox.writable_roots"),
    (Refused("network"), '"network": true'),
    (Refused("loopback", "8080"), '"network": true'),
    (Refused("server", "8080, 9090"), '"network": true'),
    (Refused("secret", "/ws/.env"), "allow rule naming the exact command line"),
    (Refused("read-rule", "/ws/secrets/k"), "removing the rule"),
    (Refused("own-file", "/home/u/.config/nanohermes/config.json"), "nanohermes's own files"),
    (Refused("socket", "/run/user/0/bus"), "another program's socket"),
    (Refused("process", "4242"), "task_kill"),
    (Refused("init", "/proc/1/environ"), "nanohermes's processes"),
    (Refused("own-proc", "/proc/7/mem"), "nanohermes's processes"),
    (Refused("unnamed"), ""),
    (Refused("more", "3", "20"), ""),
])
def test_what_lets_a_sandbox_refusal_through_is_read_from_its_kind(refused: Refused, allowed_by: str) -> None:
    assert refused.subject in str(refused)
    assert (allowed_by in refused.allow) if allowed_by else refused.allow == ""
    hint = remedies([refused])
    assert hint.startswith(refused.allow) and hint.endswith("runs this call outside the sandbox")


def test_remedies_follow_the_kinds_never_the_words_of_a_path() -> None:
    """A write to a folder named `network` is a write: its hint names the writable roots, not
    the network setting (the kind says what was refused; the text is only shown)."""
    hint = remedies([Refused("write", "/srv/network/loopback.txt"), Refused("write", "/srv/b")])
    assert "sandbox.writable_roots" in hint and '"network": true' not in hint
    assert hint.count("sandbox.writable_roots") == 1


def test_refusals_past_the_listed_limit_are_counted_in_one_value() -> None:
    found = [Refused("write", f"/x/{i}") for i in range(5)]
    shown = listed(found, 2)
    assert shown[:2] == found[:2] and (shown[2].kind, shown[2].subject, shown[2].why) == ("more", "3", "2")
    assert str(shown[2]) == "3 more (sandbox_refusals_listed is 2)"


@pytest.mark.parametrize(("args", "config", "kind"), [
    ((), {"permissions": {"deny": ["write_file"]}}, "rule"),
    (("--mode", "plan"), {}, "mode"),
])
def test_stream_json_says_by_what_a_call_was_refused(turn: Any, server: FakeServer, workspace: Path,
                                                     args: tuple[str, ...], config: dict[str, Any], kind: str) -> None:
    server.add(tool_reply(call("write_file", {"path": "b.txt", "content": "B"}, id="w")), Reply(text="done"))
    ran = turn("-p", "write it", "--output-format", "stream-json", *args, server=server, config=config)
    assert ran.code == 0, ran.err
    [denied] = [e for line in ran.out.splitlines() if (e := json.loads(line))["type"] == "permission_denied"]
    assert (denied["kind"], denied["target"]) == (kind, "b.txt") and denied["allow"]
    assert not (workspace / "b.txt").exists()
