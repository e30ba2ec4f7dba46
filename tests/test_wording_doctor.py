"""What `nanohermes doctor` says of the endpoint, each check's line once, against a real loopback
server. The other tests assert each check's status and what its line names; rewording a line
changes one row here."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from test_doctor_fixes import clone, doctor_in, line, tools_dir  # noqa: F401 (clone: the fixture)
from wording_support import said

from nanohermes.testing import FakeServer, Fault, Reply, call, tool_reply

KEY = {"OPENAI_API_KEY": "k"}

# (id, the server's answer, the base_url (None: the server's), the check's name, its exact line)
DOCTOR: list[tuple[str, Any, str | None, dict[str, str], str, str]] = [
    ("key-refused", Fault(status=401, message="bad key", code="invalid_api_key"), None, KEY, "api key",
     "[FAIL] api key: chat refused it: the model endpoint refused the API key (401: bad key)"),
    ("skipped-after-a-refused-key", Fault(status=401, message="bad key", code="invalid_api_key"), None, KEY, "chat",
     "[skip] chat: skipped: chat refused the key"),
    ("chat-ok", tool_reply(call("probe", {"ok": True})), None, KEY, "chat", "[ok]   chat: streamed an answer (chat wire)"),
    ("tool-call-ok", tool_reply(call("probe", {"ok": True})), None, KEY, "tool calls",
     "[ok]   tool calls: the model called the probe tool"),
    ("answered-in-text", Reply(text="ok=true"), None, KEY, "tool calls",
     "[FAIL] tool calls: the model answered in text instead of calling the probe tool ('ok=true')"),
    ("another-tool", tool_reply(call("run_command", {"command": "true"})), None, KEY, "tool calls",
     "[FAIL] tool calls: the model called 'run_command', not the probe tool"),
    ("no-key", Fault(status=503, message="down"), None, {"OPENAI_API_KEY": ""}, "api key",
     "[warn] api key: no key set ($OPENAI_API_KEY is empty, no api_key in config)"),
    ("probe-failed", Fault(status=503, message="down"), None, {"OPENAI_API_KEY": ""}, "chat",
     "[FAIL] chat: the probe request failed: the model endpoint answered 503: down"),
    ("unusable-url", None, "127.0.0.1:8080/v1", KEY, "endpoint",
     "[FAIL] endpoint: base_url '127.0.0.1:8080/v1' is not a usable URL: it has no http:// or https:// scheme"),
]


@pytest.mark.parametrize("answer,base_url,env,name,line", [r[1:] for r in DOCTOR], ids=[r[0] for r in DOCTOR])
def test_doctor_says(turn, server: FakeServer, answer: Any, base_url: str | None, env: dict[str, str], name: str,  # type: ignore[no-untyped-def]
                     line: str) -> None:
    if answer is not None:
        server.add(answer)
    r = turn("doctor", "--base-url", base_url or server.base_url, "--model", "fake-model", env=env)
    assert [ln for ln in r.out.splitlines() if ln[7:].startswith(f"{name}: ")] == [line]


def endpoint_lines(out: str) -> str:
    """The endpoint check's line and the fix under it."""
    lines = out.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("[FAIL] endpoint: "))
    return "\n".join(lines[at:at + 2])


def test_doctor_says_how_to_fix_a_scheme_mix_up(turn, server: FakeServer, tls_port: int) -> None:  # type: ignore[no-untyped-def]
    https = server.base_url.replace("http://", "https://")
    r = turn("doctor", "--base-url", https)
    assert said(endpoint_lines(r.out),
                "[FAIL] endpoint: cannot reach {https} ({any}; the server seems to speak plain HTTP: try http:// instead "
                "of https://)\n       fix: set base_url to {http} (--base-url, OPENAI_BASE_URL or config); a "
                "TLS/plain-HTTP mix-up is not retried", https=https, http=server.base_url), r.out
    http = f"http://127.0.0.1:{tls_port}/v1"
    r = turn("doctor", "--base-url", http)
    assert said(endpoint_lines(r.out),
                "[FAIL] endpoint: cannot reach {http} ({any}; the server speaks TLS: use https:// instead of http://)\n"
                "       fix: set base_url to {https} (--base-url, OPENAI_BASE_URL or config); a TLS/plain-HTTP mix-up "
                "is not retried", http=http, https=http.replace("http://", "https://")), r.out


def test_doctor_says_why_an_rg_inside_the_workspace_is_not_run(clone: Path, tmp_path: Path) -> None:
    system = tools_dir(tmp_path / "system", "git", "true", "sh", "bash", "env")
    rg = clone / ".venv" / "bin" / "rg"
    assert line(doctor_in(clone, f"{rg.parent}{os.pathsep}{system}"), "ripgrep") == (
        f"[warn] ripgrep: {rg} is not run: it lies inside {clone}, which commands may write, so nanohermes does not "
        "start it for itself (a command could have replaced it), and found no rg elsewhere on PATH; grep and glob use "
        "the slower pure-Python backend fix: install ripgrep system-wide (apt-get install ripgrep, brew install "
        "ripgrep, or a release from github.com/BurntSushi/ripgrep), or run a nanohermes installed outside this folder "
        "(pipx install or uv tool install: see the README), which brings its own rg")
