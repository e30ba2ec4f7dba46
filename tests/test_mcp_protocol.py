"""The MCP features real servers use: roots, tools/list_changed, elicitation (the REPL asks,
`-p` declines with a note), sampling declined, structured content sent once, images and audio
never as base64 text. Against real servers: the SDK-written demo server, and server-filesystem
and server-everything from the npm registry."""

from __future__ import annotations

import asyncio
import base64
import json
import struct
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
from npm_mcp import everything, npm_bin  # noqa: F401
from test_repl_pty import Term, term  # noqa: F401  # the REPL fixture, shared

from nanohermes.assemble import build_agent
from nanohermes.config import Config
from nanohermes.turn.elicitation import fields
from nanohermes.common.events import Notice, RecordingUI
from nanohermes.common.messages import ToolCall
from nanohermes.testing import FakeServer, Reply, ScriptedLLM, call, tool_reply

DEMO = str(Path(__file__).parent / "mcp" / "demo_server.py")
STDIO = {"command": sys.executable, "args": [DEMO]}


def png(width: int = 40, height: int = 40) -> bytes:
    """A real PNG of a few hundred bytes (noise does not compress, so it is not tiny)."""
    import random

    rng = random.Random(7)
    raw = b"".join(b"\x00" + bytes(rng.randrange(256) for _ in range(width * 3)) for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def results(server: FakeServer, request: int) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in server.requests[request]["messages"] if m["role"] == "tool"}


def built_with(workspace: Path, servers: dict[str, Any], **config: Any) -> tuple[Any, RecordingUI]:
    ui = RecordingUI()
    cfg = Config.from_dict({"mcp": {"servers": servers}, "permission_mode": "goal", **config})
    return build_agent(cfg, workspace, ui, llm=ScriptedLLM(), save_session=False), ui


async def run_one(built: Any, name: str, args: dict[str, Any], call_id: str = "c1") -> str:
    out = await built.agent.runtime.run_calls([ToolCall(call_id, name, json.dumps(args))])
    return str(out[0].content)


def test_roots_are_the_workspace_and_the_extra_write_roots_and_follow_a_change(workspace: Path,
                                                                                 tmp_path: Path) -> None:
    extra = tmp_path / "shared"
    extra.mkdir()
    built, _ = built_with(workspace, {"demo": STDIO}, extra_write_roots=[str(extra)])

    async def go() -> tuple[str, str]:
        async with built.session():
            before = await run_one(built, "mcp__demo__roots", {})
            await built.mcp.set_roots([workspace])
            return before, await run_one(built, "mcp__demo__roots", {})

    before, after = asyncio.run(go())
    assert before == f"{workspace.resolve().as_uri()} ws\n{extra.resolve().as_uri()} shared"
    assert after == f"{workspace.resolve().as_uri()} ws"


def test_server_filesystem_without_a_folder_works_in_the_workspace_through_roots(  # type: ignore[no-untyped-def]
        turn, server: FakeServer, workspace: Path, npm_bin: Path) -> None:
    (workspace / "note.txt").write_text("a note in the workspace\n")
    picture = png()
    (workspace / "dot.png").write_bytes(picture)
    reads = tool_reply(call("mcp__fs__read_text_file", {"path": str(workspace / "note.txt")}, id="read"),
                       call("mcp__fs__read_media_file", {"path": str(workspace / "dot.png")}, id="media"))

    def until_the_roots_apply(body: dict[str, Any]) -> Reply:
        # The server asks for the roots once it is initialized and applies them after its own
        # checks of each folder, with no message saying when: a call before that finds no
        # folder allowed. The model asks again until the workspace is listed, then reads.
        said = [m["content"] for m in body["messages"] if m["role"] == "tool"]
        if said and str(workspace.resolve()) in said[-1]:
            server.add(Reply(text="done"))
            return reads
        server.add(until_the_roots_apply)
        return tool_reply(call("mcp__fs__list_allowed_directories", {}, id=f"dirs{len(said)}"))

    server.add(until_the_roots_apply)
    ran = turn("-p", "read", "--yes", server=server,
               config={"max_turns": 1000, "mcpServers": {"fs": {"command": str(npm_bin / "mcp-server-filesystem")}}})
    assert ran.code == 0, ran.err
    got = results(server, len(server.requests) - 1)
    assert any(str(workspace.resolve()) in text for call_id, text in got.items() if call_id.startswith("dirs"))
    assert got["read"] == "a note in the workspace\n"  # once: the structured copy is not repeated
    note = got["media"]
    assert note.startswith(f"[image image/png, {len(picture)} bytes, saved to ") and note.endswith("; not shown as text]")
    saved = Path(note.split("saved to ", 1)[1].split(";", 1)[0])
    assert saved.read_bytes() == picture
    encoded = base64.b64encode(picture).decode()
    assert encoded[:200] not in json.dumps(server.requests)  # no base64 reached the model


def test_a_tool_added_mid_session_is_offered_on_the_next_call(turn, server: FakeServer) -> None:  # type: ignore[no-untyped-def]
    server.add(tool_reply(call("mcp__demo__grow", {"name": "fresh"}, id="g")),
               tool_reply(call("mcp__demo__fresh", {}, id="f")), Reply(text="done"))
    ran = turn("-p", "grow", "--yes", "--verbose", server=server, config={"mcpServers": {"demo": STDIO}})
    assert ran.code == 0, ran.err
    names = [{t["function"]["name"] for t in r["tools"]} for r in server.requests]
    assert "mcp__demo__fresh" not in names[0] and "mcp__demo__fresh" in names[1]
    assert results(server, 2)["f"] == "grown: fresh"
    assert "MCP server demo " in ran.err and " 15 tools (new: mcp__demo__fresh)" in ran.err


def test_print_mode_declines_elicitation_and_the_model_reads_why(turn, server: FakeServer) -> None:  # type: ignore[no-untyped-def]
    server.add(tool_reply(call("mcp__demo__ask", {}, id="a")), Reply(text="done"))
    ran = turn("-p", "order", "--yes", server=server, config={"mcpServers": {"demo": STDIO}})
    assert ran.code == 0, ran.err
    text = results(server, 1)["a"]
    answer, note = text.split("\n\n", 1)
    assert answer == "decline: null" and note.startswith("[MCP server demo ") and '("Place your order")' in note, note


def test_sampling_is_declined_with_an_error_saying_so(workspace: Path) -> None:
    built, _ = built_with(workspace, {"demo": STDIO})

    async def go() -> str:
        async with built.session():
            return await run_one(built, "mcp__demo__sample", {})

    out = asyncio.run(go())
    assert out.startswith("sampling failed: nanohermes declines sampling: an MCP server may not use its model")
    assert out.endswith("[MCP server demo asked to use the model (sampling); nanohermes declined.]")


def test_the_repl_asks_the_person_with_the_servers_form(term: Any, server: FakeServer) -> None:
    server.add(tool_reply(call("mcp__demo__ask", {}, id="a")), Reply(text="ordered"))
    t = term(config={"mcpServers": {"demo": STDIO}, "permission_mode": "goal"})
    t.prompt()
    t.type("order something")
    t.wait("MCP server demo asks")
    t.wait("Place your order")
    t.wait("• Count * — How many")  # the form, each field with its description
    t.wait("[y] Answer it")
    t.armed()
    t.child.send("y")
    t.wait("Name * (string)")
    t.type("Ada")
    t.wait("Count * (integer, minimum 1)")
    t.type("none")  # not a number: asked again
    t.wait("Count takes a whole number")
    t.wait("Count * (integer, minimum 1)")
    t.type("3")
    t.wait("Gift (y/n)")
    t.type("\x15y")  # Ctrl-U clears the shown default
    t.wait("Colour (1=red, 2=green, 3=blue)")
    t.type("\x153")
    t.wait("ordered")
    t.leave()
    answer = results(server, 1)["a"]
    assert json.loads(answer.split(": ", 1)[1]) == {"name": "Ada", "count": 3, "gift": True, "colour": "blue"}


def test_a_form_reads_what_the_spec_allows() -> None:
    schema = {"type": "object", "required": ["name", "age"], "properties": {
        "name": {"type": "string", "title": "Name", "minLength": 2},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "score": {"type": "number"},
        "ok": {"type": "boolean", "default": True},
        "pet": {"type": "string", "enum": ["cat", "dog"], "enumNames": ["Cat", "Dog"]},
        "tier": {"type": "string", "oneOf": [{"const": "g", "title": "Gold"}, {"const": "s", "title": "Silver"}]},
        "tags": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string", "enum": ["a", "b", "c"]}},
    }}
    f = {x.name: x for x in fields(schema)}
    assert [x.name for x in fields(schema)] == ["name", "age", "score", "ok", "pet", "tier", "tags"]
    assert f["name"].read("A") == (None, "Name has at least 2 characters") and f["name"].read("Al") == ("Al", None)
    assert f["name"].read("") == (None, "Name is required")
    assert f["age"].read("151") == (None, "age is at most 150") and f["age"].read("7") == (7, None)
    assert f["score"].read("2.5") == (2.5, None) and f["score"].read("") == (None, None)
    assert f["ok"].default_text() == "y" and f["ok"].read("no") == (False, None)
    assert f["pet"].read("2") == ("dog", None) and f["pet"].read("Cat") == ("cat", None)
    assert f["pet"].read("fish")[1] == "pick one of 1=Cat, 2=Dog"
    assert f["tier"].read("Silver") == ("s", None)
    assert f["tags"].read("a, 3") == (["a", "c"], None) and f["tags"].read("a,b,c") == (None, "pick at most 2")


@pytest.mark.parametrize("wire", ["chat", "responses"])
def test_a_model_that_takes_images_gets_them_as_image_parts(turn, server: FakeServer, wire: str) -> None:  # type: ignore[no-untyped-def]
    server.add(tool_reply(call("mcp__demo__picture", {}, id="p"), call("mcp__demo__echo", {"text": "x"}, id="e")),
               Reply(text="I see it"))
    ran = turn("-p", "look", "--yes", "--wire-api", wire, server=server,
              config={"mcpServers": {"demo": STDIO}, "images_to_model": True})
    assert ran.code == 0, ran.err
    tiny = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 24).decode()
    sent = server.requests[1]
    if wire == "chat":
        roles = [m["role"] for m in sent["messages"]]
        assert roles[-3:] == ["tool", "tool", "user"]
        parts = sent["messages"][-1]["content"]
        assert parts[0] == {"type": "text", "text": "The image returned by tool call p:"}
        assert parts[1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{tiny}"}}
        assert "shown to you after the results; saved to" in results(server, 1)["p"]
    else:
        items = sent["input"]
        assert [i.get("type", i.get("role")) for i in items[-3:]] == ["function_call_output", "function_call_output",
                                                                      "user"]
        assert items[-1]["content"][1] == {"type": "input_image", "image_url": f"data:image/png;base64,{tiny}"}


def test_server_everythings_image_and_structured_content(workspace: Path, npm_bin: Path) -> None:
    with everything(npm_bin, "streamableHttp") as url:
        built, ui = built_with(workspace, {"everything": {"type": "http", "url": url}})

        async def go() -> tuple[str, str, str]:
            async with built.session():
                return (await run_one(built, "mcp__everything__get-tiny-image", {}),
                        await run_one(built, "mcp__everything__get-structured-content", {"location": "New York"}),
                        await run_one(built, "mcp__everything__get-roots-list", {}))

        image, structured, roots = asyncio.run(go())
    assert "[image image/png, " in image and "saved to " in image and "base64" not in image
    assert len(image) < 1000
    assert structured.count("temperature") == 1  # the structured copy of the text is not sent again
    assert workspace.resolve().as_uri() in roots
    assert not [e for e in ui.of(Notice) if e.level != "info"]


def test_add_dir_in_the_repl_changes_the_servers_roots(term: Any, server: FakeServer, workspace: Path,
                                                        tmp_path: Path) -> None:
    extra = tmp_path / "more"
    extra.mkdir()
    server.add(tool_reply(call("mcp__demo__roots", {}, id="r")), Reply(text="listed"))
    t = term(config={"mcpServers": {"demo": STDIO}, "permission_mode": "goal"})
    t.prompt()
    t.type(f"/add-dir {extra}")
    t.wait("MCP servers were told (roots/list_changed)")
    t.prompt()
    t.type("list the roots")
    t.wait("listed")
    t.leave()
    assert results(server, 1)["r"] == f"{workspace.resolve().as_uri()} ws\n{extra.resolve().as_uri()} more"
