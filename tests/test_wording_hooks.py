"""What hooks make nanohermes say, each message once, with real hook processes. The other tests
assert decisions and state; rewording a message changes one row here (see
tests/wording_support.py)."""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from wording_support import said

from nanohermes.assemble import build_agent
from nanohermes.common.budget import Limits
from nanohermes.config import Config, load_config
from nanohermes.common.events import ApprovalRequest, Notice, RecordingUI
from nanohermes.hooks.hooks import Hook, Hooks
from nanohermes.testing import Reply, ScriptedLLM, tool_reply
from nanohermes.testing import call as tool_call

# -- hooks --------------------------------------------------------------------------------------

# A hook that appends its input to the file named first, prints its second argument on stdout
# and its third on stderr, and exits with its fourth; a Stop hook answers only the first time.
HOOK = ("import json, sys; data = sys.stdin.read(); open(sys.argv[1], 'a').write(data + '\\n'); "
        "json.loads(data).get('stop_hook_active') and sys.exit(0); "
        "sys.stdout.write(sys.argv[2]); sys.stderr.write(sys.argv[3]); sys.exit(int(sys.argv[4]))")


def hook(log: Path, out: dict[str, object] | str = "", err: str = "", code: int = 0, timeout: float = 30,
         matcher: str = "") -> list[dict[str, object]]:
    said = json.dumps(out) if isinstance(out, dict) else out
    command = shlex.join([sys.executable, "-c", HOOK, str(log), said, err, str(code)])
    return [{"matcher": matcher, "hooks": [{"type": "command", "command": command, "timeout": timeout}]}]


def hooked(ws: Path, hooks: dict[str, object], *replies: Reply, answers: tuple[str, ...] = (),
           **config: object) -> tuple[ScriptedLLM, RecordingUI]:
    """A turn ("go") of an agent with `hooks`, the model's replies scripted."""
    llm, ui = ScriptedLLM(list(replies)), RecordingUI(answers=list(answers))
    built = build_agent(Config.from_dict({"hooks": hooks, **config}), ws, ui, llm=llm, asks=True,
                        idle_between_turns=True)

    async def go() -> None:
        async with built.session() as agent:
            await agent.ask("go")
    asyncio.run(go())
    return llm, ui


WRITE = tool_reply(tool_call("write_file", {"path": "a.txt", "content": "A"}))


def result_of(llm: ScriptedLLM) -> str:
    [result] = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    return str(result)


def warned(ui: RecordingUI) -> str:
    return "\n".join(n.text for n in ui.of(Notice) if n.level == "warning")


def notices(ui: RecordingUI) -> str:
    return "\n".join(n.text for n in ui.of(Notice) if n.level == "info" and "hook" in n.text)


def by_hook(ws: Path, tmp: Path, command: str, timeout: float = 30) -> str:
    """The warnings of one SessionEnd hook run to its end."""
    ui = RecordingUI()
    hooks = Hooks([Hook("SessionEnd", "", command, timeout, "test")], ws, Limits(), ui.emit)
    asyncio.run(hooks.run(hooks.hooks[0], hooks.payload("SessionEnd")))
    return warned(ui)


def notified(ws: Path, tmp: Path) -> str:
    log = tmp / "log"
    hooked(ws, {"Notification": hook(log)}, WRITE, Reply(text="done"), answers=("once",))
    return "\n".join(sorted(json.loads(line)["message"] for line in log.read_text().splitlines() if line))


HOOKS: list[tuple[str, Callable[[Path, Path], str], str]] = [
    ("pre-tool-use-deny", lambda ws, tmp: result_of(hooked(ws, {"PreToolUse": hook(tmp / "l", out={
        "permissionDecision": "deny", "permissionDecisionReason": "no writes on Fridays"})}, WRITE, Reply(text="ok"))[0]),
     "ERROR: blocked by a PreToolUse hook: no writes on Fridays"),
    ("pre-tool-use-ask", lambda ws, tmp: hooked(ws, {"PreToolUse": hook(tmp / "l", out={
        "permissionDecision": "ask", "permissionDecisionReason": "check this one"})}, WRITE, Reply(text="ok"),
        auto_approve=True)[1].of(ApprovalRequest)[0].reason,
     "a PreToolUse hook asks: check this one"),
    ("rewritten", lambda ws, tmp: notices(hooked(ws, {"PreToolUse": hook(tmp / "l", out={
        "updatedInput": {"path": "b.txt", "content": "B"}})}, WRITE, Reply(text="ok"), auto_approve=True)[1]),
     "a PreToolUse hook rewrote the arguments of write_file"),
    ("rewritten-invalid", lambda ws, tmp: result_of(hooked(ws, {"PreToolUse": hook(tmp / "l", out={
        "updatedInput": {"content": "no path"}})}, WRITE, Reply(text="ok"), auto_approve=True)[0]),
     "ERROR: a PreToolUse hook rewrote the arguments of write_file into invalid ones: {any}"),
    ("stop-goes-on", lambda ws, tmp: str(hooked(ws, {"Stop": hook(tmp / "l", code=2, err="run the tests")},
                                                Reply(text="done"), Reply(text="done"))[0].requests[1]["messages"][-1]
                                         ["content"]),
     "A Stop hook asks you to go on before ending the turn:\nrun the tests"),
    ("prompt-blocked", lambda ws, tmp: warned(hooked(ws, {"UserPromptSubmit": hook(tmp / "l", code=2,
                                                                                   err="no secrets")})[1]),
     "prompt blocked by a UserPromptSubmit hook: no secrets"),
    ("timed-out", lambda ws, tmp: by_hook(ws, tmp, "sleep 300", timeout=0.5),
     "SessionEnd hook `sleep 300` timed out after 0.5s; its process group was killed"),
    ("exited", lambda ws, tmp: by_hook(ws, tmp, "echo first >&2; echo boom >&2; exit 3"),
     "SessionEnd hook `echo first >&2; echo boom >&2; exit 3` exited with 3: boom; going on"),
    ("notified", notified,
     "nanohermes is waiting for your input\nnanohermes needs your permission to use write_file: a.txt"),
    ("listed", lambda ws, tmp: Hooks([Hook("Stop", "", "notify-done", 30, "")], ws, Limits(), print).lines()[0],
     "Stop             *                    notify-done  (timeout 30s; config)"),
]


@pytest.mark.parametrize("scenario,text", [r[1:] for r in HOOKS], ids=[r[0] for r in HOOKS])
def test_hooks_say(workspace: Path, tmp_path: Path, scenario: Callable[[Path, Path], str], text: str) -> None:
    out = scenario(workspace, tmp_path)
    assert said(out, text), out


def test_an_untrusted_projects_hooks_are_said_to_be_ignored(workspace: Path, home: Path) -> None:
    project = workspace / ".nanohermes" / "config.json"
    project.parent.mkdir()
    project.write_text(json.dumps({"hooks": {"Stop": hook(workspace / "l")}}))
    [warning] = load_config(workspace).warnings
    assert warning == (f"{project}: ignored hooks because this project is not trusted; to allow them, add "
                       f"\"{workspace}\" to trusted_projects in {home}/.config/nanohermes/config.json")
