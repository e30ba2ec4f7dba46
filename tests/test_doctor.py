"""`nanohermes doctor` against the loopback fake server and broken set-ups."""

from __future__ import annotations

from pathlib import Path

from nanohermes.testing import FakeServer, Reply, call, tool_reply


def test_healthy_setup_passes(turn, server: FakeServer) -> None:
    server.add(tool_reply(call("probe", {"ok": True})))
    r = turn("doctor", "--base-url", server.base_url, "--model", "fake-model", env={"OPENAI_API_KEY": "k"})
    assert r.code == 0, r.out + r.err
    assert "[ok]   endpoint: " in r.out
    assert "[ok]   model: fake-model is listed" in r.out
    assert "[ok]   api key: accepted by chat" in r.out and "[ok]   chat: streamed an answer" in r.out
    assert "[ok]   tool calls: the model called the probe tool" in r.out
    assert "[ok]   git: git version" in r.out
    assert "[ok]   ripgrep: ripgrep " in r.out
    assert "0 failed" in r.out
    probe = server.requests[0]
    assert probe["stream"] is True and probe["tools"][0]["function"]["name"] == "probe"


def test_unlisted_model_fails_and_lists_the_models(turn) -> None:
    with FakeServer(models=("alpha", "beta")) as s:
        s.add(Reply(text="hi"))
        r = turn("doctor", "--base-url", s.base_url, "--model", "gamma")
    assert r.code == 1
    assert "[FAIL] model: gamma is not among the 2 listed models: alpha, beta" in r.out
    assert "fix: set model in config" in r.out


def test_refused_key_fails_with_hint(turn) -> None:
    with FakeServer(api_key="right") as s:
        s.add(Reply(text="hi"))
        r = turn("doctor", "--base-url", s.base_url, "--api-key", "wrong")
    assert r.code == 1
    assert "[FAIL] api key: refused (401)" in r.out


def test_unreachable_endpoint_fails(turn) -> None:
    r = turn("doctor", "--base-url", "http://127.0.0.1:9/v1")
    assert r.code == 1
    assert "[FAIL] endpoint: cannot reach http://127.0.0.1:9/v1" in r.out
    assert "fix: check base_url" in r.out


def test_invalid_config_is_reported_and_other_checks_still_run(turn, workspace: Path) -> None:
    cfg = workspace / ".nanohermes" / "config.json"
    cfg.parent.mkdir()
    cfg.write_text('{"max_turns": -1}')
    r = turn("doctor", "--base-url", "http://127.0.0.1:9/v1")
    assert r.code == 1
    assert f"[FAIL] config: {cfg}: key `max_turns`" in r.out
    assert "[ok]   data dir:" in r.out


def test_unwritable_data_dir_fails(turn, tmp_path: Path) -> None:
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("")
    r = turn("doctor", "--base-url", "http://127.0.0.1:9/v1", env={"XDG_DATA_HOME": str(blocker)})
    assert "[FAIL] data dir:" in r.out
    assert "fix: fix its permissions, or point XDG_DATA_HOME elsewhere" in r.out
