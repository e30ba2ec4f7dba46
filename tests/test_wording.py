"""Each message a person or the model reads, pinned once: a table per area of (scenario, exact
text). A scenario runs the real tools on real files; the other tests assert what was decided
(the kind, the path, the count, the bytes on disk), so rewording a message changes one row here."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from exec_support import call, make_runtime, run_confined
from localweb import LocalSite
from nanohermes.budget import Limits
from nanohermes.compact import fit
from nanohermes import persisted, sandbox
from nanohermes.agent import Agent
from nanohermes.assemble import build_agent, parse_rules
from nanohermes.config import Config, load_config
from nanohermes.events import ApprovalRequest, Notice, RecordingUI
from nanohermes.hooks import Hook, Hooks
from nanohermes.messages import Message, ToolCall
from nanohermes.permissions import Policy, Rule
from nanohermes.runtime import Runtime
from nanohermes.sandbox import Refused
from nanohermes.testing import Reply, ScriptedLLM
from nanohermes.testing import call as tool_call
from nanohermes.testing import tool_reply
from nanohermes.tools import build_tools

Scenario = Callable[[Path], str]


def said(text: str, pattern: str, **values: str) -> bool:
    """`text` is `pattern` exactly, its {names} filled in from `values` and each {any} standing
    for what the system adds (an OS error's words)."""
    parts = [re.escape(p.format(**values)) for p in pattern.split("{any}")]
    return re.fullmatch(".*?".join(parts), text, re.S) is not None

APP = "import os\n\n\ndef main():\n    a = 1\n    b = 2\n    c = 3\n    return a + b + c\n"


def seen(ws: Path, name: str, text: str) -> Runtime:
    """A workspace file the model has read, and the runtime that read it."""
    (ws / name).write_text(text)
    rt = make_runtime(ws)
    assert not call(rt, "read_file", path=name).startswith("ERROR")
    return rt


def edit(name: str, text: str, old: str, new: str) -> Scenario:
    return lambda ws: call(seen(ws, name, text), "edit_file", path=name, old_string=old, new_string=new)


def write(name: str, content: str) -> Scenario:
    return lambda ws: call(make_runtime(ws), "write_file", path=name, content=content)


def patch(name: str, text: str, diff: str) -> Scenario:
    return lambda ws: call(seen(ws, name, text), "apply_patch", diff=diff)


def beside(made: str, tool: str, **args: object) -> Scenario:
    """A call naming a path that does not exist, `made` (a file) standing nearby."""
    def run(ws: Path) -> str:
        (ws / made).parent.mkdir(parents=True, exist_ok=True)
        (ws / made).write_text("def f():\n    return 1\n")
        return call(make_runtime(ws), tool, **args)
    return run


# -- the file tools: what they did with what a model sent ------------------------------------

FILES: list[tuple[str, Scenario, str]] = [
    ("numbers-stripped-from-both", edit("app.py", APP, "5\t    a = 1\n6\t    b = 2", "5\t    a = 10\n6\t    b = 20"),
     "edited app.py: replaced 1 occurrence (+2 -2 lines) (read_file's line numbers stripped from old_string and "
     "new_string)"),
    ("numbers-stripped-from-new", edit("app.py", APP, "    b = 2\n    c = 3", "     6\u2192    b = 22\n     7\u2192    c = 33"),
     "edited app.py: replaced 1 occurrence (+2 -2 lines) (line numbers copied from read_file stripped from new_string)"),
    ("numbers-that-may-be-content", edit("people.tsv", "id\tname\n1\tada\n2\tbob\n", "bob", "3\tcy"),
     "ERROR: new_string's lines all start with line numbers like read_file's (`12<TAB>`) and old_string's do not, "
     "but people.tsv has lines like that of its own, so they may be content: send new_string without the numbers (if "
     "they are content, include such a line in old_string too)"),
    ("fence-removed", write("tool.py", "```python\nimport sys\n```"),
     "created tool.py (11 bytes, 1 line) (the Markdown fence around the content (```python) removed)"),
    ("fence-with-a-fence-inside", write("doc.py", "```python\nDOC = '''\n```\nnot code\n'''\n```\n"),
     "ERROR: nothing was written to doc.py: content starts with a Markdown fence (```python) and ends with one, but "
     "line 3 closes a fence too, so which lines belong to the file cannot be told; send the file's content alone, "
     "without the fence"),
    ("escapes-decoded", write("load.py", "import json\\n\\nprint(json)\\n"),
     "created load.py (25 bytes, 3 lines) (its line breaks arrived as literal \\n escapes (JSON encoded twice): "
     "decoded to 3 line breaks)"),
    ("escapes-in-a-one-liner", write("hi.py", 'print("hello\\nworld")'),
     "ERROR: nothing was written to hi.py: content has no line breaks, only literal \\n escapes, and one of them "
     "sits inside \"quotes\", where it may be meant as written; send the content with real line breaks (a file "
     "meant as one line with these escapes: end it with a real line break)"),
    ("blank-first-line", edit("app.py", APP, "\nimport os\n", "\nimport os\nimport sys\n"),
     "edited app.py: replaced 1 occurrence (+1 -0 lines) (blank lines at the start of old_string ignored)"),
    ("elision", edit("app.py", APP, "def main():\n    a = 1\n    # ... existing code ...\n    return a + b + c\n",
                     "def main():\n    a = 100\n    # ... existing code ...\n    return a * b * c\n"),
     "edited app.py: replaced 1 occurrence (+2 -2 lines) (the elision line `# ... existing code ...` in old_string "
     "and new_string read as: the lines in between stay (2 kept))"),
    ("elision-only-in-new", edit("app.py", APP, "    b = 2\n    c = 3\n", "    b = 2\n    # ... rest of the code ...\n"),
     "ERROR: new_string holds `# ... rest of the code ...`, a line standing for lines left out, in place of 1 line "
     "of app.py that it would drop (line 7):\n7\t    c = 3\nNothing was written: write those lines out in "
     "new_string, or make old_string smaller so that it leaves them out (a line standing for kept lines works only "
     "where old_string has the same line)"),
    ("final-newline", edit("f.txt", "x = 1\ny = 2", "y = 2\n", "y = 3\n"),
     "edited f.txt: replaced 1 occurrence (+1 -1 lines) (old_string's final newline ignored: the file's last line "
     "has none)"),
    ("escaped-twice", edit("app.py", APP, "def main():\\n    a = 1", "def main():\\n    a = 7"),
     "edited app.py: replaced 1 occurrence (+1 -1 lines) (old_string and new_string were escaped twice (literal \\n "
     "or \\\"): read unescaped)"),
    ("already-applied", edit("app.py", APP, "return a - b", "return a + b + c"),
     "already applied: old_string is not in app.py but new_string is (line 8); nothing changed in app.py"),
    ("other-quotes", edit("f.txt", "print(\"ready\")\n", "print(\u201cready\u201d)", "print(\u201csteady\u201d)"),
     "edited f.txt: replaced 1 occurrence (+1 -1 lines) (matched with Unicode punctuation mapped to ASCII; "
     "new_string's quotes written straight like the file's)"),
    ("namesake-elsewhere", beside("src/utils.py", "read_file", path="utils.py"),
     "ERROR: utils.py does not exist; did you mean `src/utils.py`?"),
    ("namesake-patch", beside("src/utils.py", "apply_patch",
                              diff="*** Begin Patch\n*** Update File: utils.py\n@@\n-    return 1\n+    return 2\n"
                                   "*** End Patch\n"),
     "ERROR: utils.py does not exist (did you mean `src/utils.py`?), so it cannot be updated (patch line 2); no file "
     "was changed. Check the path (relative to the workspace), or add it with `*** Add File:`"),
    ("no-namesake", beside("src/utils.py", "read_file", path="nothing_like_it.py"),
     "ERROR: nothing_like_it.py does not exist; check the path with list_dir or glob"),
    ("binary", lambda ws: (ws / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00" * 4) and call(
        make_runtime(ws), "read_file", path="logo.png"),
     "ERROR: logo.png looks like a binary file (36 bytes); read_file shows text files only"),
    ("offset-past-the-end", lambda ws: call(seen(ws, "f.txt", "a\nb\n"), "read_file", path="f.txt", offset=5),
     "ERROR: offset 5 is past the end of f.txt (2 lines); use an offset from 1 to 2"),
    ("list-a-file", lambda ws: call(seen(ws, "f", "x"), "list_dir", path="f"),
     "ERROR: f is not a directory; use read_file to read it"),
    ("list-nothing", lambda ws: call(make_runtime(ws), "list_dir", path="no"),
     "ERROR: no does not exist; list the parent directory to see what is there"),
    ("write-a-folder", lambda ws: (ws / "d").mkdir() or call(make_runtime(ws), "write_file", path="d", content="x"),
     "ERROR: d is a directory; give the path of a file inside it"),
    ("write-under-a-file", lambda ws: call(seen(ws, "file", ""), "write_file", path="file/x.txt", content="x"),
     "ERROR: cannot write file/x.txt: file is a file, not a directory; choose another path"),
    ("write-unread", lambda ws: (ws / "notes.txt").write_text("old") and call(make_runtime(ws), "write_file",
                                                                              path="notes.txt", content="new"),
     "ERROR: notes.txt already exists and you have not read it in this session; read it first with read_file (then "
     "write it, or change it with edit_file)"),
    ("occurs-3-times", edit("a.py", "x = 1\nx = 1\ny = 2\nx = 1\n", "x = 1", "x = 2"),
     "ERROR: old_string occurs 3 times in a.py (lines 1, 2, 4); pass replace_all=true or add context to make it "
     "unique"),
    ("not-found", edit("a.py", "x = 1\ny = 2\n", "w = 0", "w = 1"),
     "ERROR: old_string not found in a.py; read the file and match it exactly, including whitespace (also tried: "
     "trailing whitespace ignored, leading and trailing whitespace ignored, Unicode punctuation mapped to ASCII, "
     "blank lines at its ends, escapes decoded once)\nNothing in the file is alike; it begins, lines 1-2:\n"
     "1\tx = 1\n2\ty = 2\nCopy old_string from these lines (without the line numbers) and retry."),
    ("re-indented", edit("a.py", "if x:\n    z = 3\n", "\tz = 3", "\tz = 4"),
     "edited a.py: replaced 1 occurrence (+1 -1 lines) (matched with leading and trailing whitespace ignored; "
     "new_string re-indented like the file)"),
    ("identical", edit("a.py", "y = 2\n", "y", "y"),
     "ERROR: old_string and new_string are identical; nothing would change"),
    ("edit-nothing", lambda ws: call(make_runtime(ws), "edit_file", path="new.py", old_string="a", new_string="b"),
     "ERROR: new.py does not exist; use write_file to create it"),
    ("not-utf8", lambda ws: (ws / "l1.txt").write_bytes("caf\xe9 = 1\n".encode("latin-1")) and call(
        make_runtime(ws), "edit_file", path="l1.txt", old_string="= 1", new_string="= \xe9"),
     "ERROR: l1.txt is not UTF-8, and edit_file keeps its bytes as they are; new_string must be ASCII here (or "
     "rewrite the file with write_file)"),
    ("closest-region", edit("app.py", APP, "def main():\n    a = 100\n    b = 2\n", "x"),
     "ERROR: old_string not found in app.py; read the file and match it exactly, including whitespace (also tried: "
     "trailing whitespace ignored, leading and trailing whitespace ignored, Unicode punctuation mapped to ASCII, "
     "blank lines at its ends, escapes decoded once)\nThe closest region of the file, lines 2-8:\n2\t\n3\t\n"
     "4\tdef main():\n5\t    a = 1\n6\t    b = 2\n7\t    c = 3\n8\t    return a + b + c\nCopy old_string from these "
     "lines (without the line numbers) and retry."),
    ("loose-match-ambiguous", edit("f.py", "x = 1  \ny\nx = 1\t\n", "x = 1\n", "z"),
     "ERROR: old_string is not in f.py as written; with trailing whitespace ignored it matches 2 places (lines 1, 3), "
     "and a loose match must be unique: copy old_string exactly from the file, or add context"),
    ("changed-on-disk", lambda ws: (lambda rt: (ws / "a.txt").write_text("b\n") and call(
        rt, "write_file", path="a.txt", content="c\n"))(seen(ws, "a.txt", "a\n")),
     "ERROR: a.txt changed on disk since you last read or wrote it (someone or a command changed it); nothing was "
     "written. Read it again with read_file and redo the change on its current content"),
    ("hunk-tier", patch("f.txt", "a  \nb\n", "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n"),
     "patched f.txt (1 hunk, +1 -1)\nhunk 1 of f.txt (@@ -1,2 +1,2 @@) matched with trailing whitespace ignored"),
    ("hunk-ambiguous", patch("f.txt", "a  \nb\na\t\nb\n", "--- a/f.txt\n+++ b/f.txt\n@@\n a\n-b\n+B\n"),
     "ERROR: f.txt: hunk 1 (@@) matches only with trailing whitespace ignored, and then at lines 1, 3; no file was "
     "changed. Copy the context exactly from the file, or add lines to make it unique"),
    ("hunk-line-without-prefix", patch("b.py", "a\nb\nc\n", "--- a/b.py\n+++ b/b.py\n@@ -1,3 +1,3 @@\n a\nb\n-c\n+d\n"),
     "ERROR: line 5: `b` in hunk `@@ -1,3 +1,3 @@` is neither context (a leading space), a removal (-) nor an "
     "addition (+); give every hunk line its prefix (a context line keeps its leading space)"),
    ("hunk-of-context-only", patch("b.py", "a\nb\n", "--- a/b.py\n+++ b/b.py\n@@ -1,2 +1,2 @@\n a\n b\n"),
     "ERROR: line 3: hunk `@@ -1,2 +1,2 @@` has only context lines and would change nothing; mark the lines to "
     "remove with - and the lines to add with +"),
    ("patch-changes-nothing", patch("b.py", "a\n", "--- a/b.py\n+++ b/b.py\n@@ -1 +1 @@\n-a\n+a\n"),
     "ERROR: b.py: the hunks' - and + lines are the same, so the patch would change nothing; no file was changed. "
     "Put the new text on the + lines"),
    ("chunk-re-indented", patch("m.go", "func f() {\n\tif x {\n\t\treturn\n\t}\n}\n",
                                "*** Begin Patch\n*** Update File: m.go\n@@\n     if x {\n-        return\n"
                                "+        log()\n+        return\n*** End Patch\n"),
     "patched m.go (1 hunk, +1 -0)\nm.go: chunk 1 matched with leading and trailing whitespace ignored, its + lines "
     "re-indented like the file"),
    ("array-in-a-string", lambda ws: call(make_runtime(ws), "todo_write", todos='[{"content": "x", "status": "pending"}]'),
     "ERROR: todo_write: field `todos` must be an array, not a string (a JSON array sent inside a string: send the "
     "array itself, not quoted)"),
    ("wrong-type", lambda ws: call(make_runtime(ws), "read_file", path=["a.txt"]),
     "ERROR: read_file: field `path` must be a string, not an array"),
]


@pytest.mark.parametrize("scenario,text", [(s, t) for _, s, t in FILES], ids=[i for i, _, _ in FILES])
def test_the_file_tools_say(workspace: Path, scenario: Scenario, text: str) -> None:
    assert scenario(workspace) == text


# -- web_fetch ----------------------------------------------------------------------------------

@pytest.fixture
def site() -> Iterator[LocalSite]:
    s = LocalSite()
    s.static("/image.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 100, "image/png")
    s.static("/bad.json", '{"open": ', "application/json")
    s.routes[("GET", "/boom")] = lambda h: h.send(500, b"it broke", "text/plain")
    s.routes[("GET", "/private")] = lambda h: h.send(403, b"no", "text/plain")
    s.routes[("GET", "/to-ftp")] = lambda h: h.send(301, b"", "text/plain", {"Location": "ftp://127.0.0.1/x"})
    s.routes[("GET", "/away")] = lambda h: h.send(302, b"", "text/plain", {"Location": "http://denied.invalid:1/x"})
    for i in range(1, 3):
        s.routes[("GET", f"/r/{i}")] = (lambda n: lambda h: h.send(
            302, b"", "text/plain", {"Location": f"/r/{n - 1}" if n > 1 else "/image.png"}))(i)
    with s:
        yield s


WEB_FETCH: list[tuple[str, str, dict[str, object], str]] = [
    ("not-found", "/nowhere", {}, "ERROR: HTTP 404 Not Found from {base}/nowhere; check the URL\n"
                                  "# Not Found Nothing lives at /nowhere."),
    ("server-error", "/boom", {}, "ERROR: HTTP 500 Internal Server Error from {base}/boom; the server failed; try "
                                  "again later\nit broke"),
    ("forbidden", "/private", {}, "ERROR: HTTP 403 Forbidden from {base}/private; the page needs authorization "
                                  "nanohermes does not have\nno"),
    ("binary", "/image.png", {}, "ERROR: {base}/image.png is binary content (image/png, 108 bytes (Content-Length)); "
                                 "web_fetch returns only text, HTML and JSON"),
    ("invalid-json", "/bad.json", {}, "URL: {base}/bad.json (200, application/json)\n\n{{\"open\": \n\n"
                                      "[not valid JSON ({any}); shown as sent]"),
    ("too-many-redirects", "/r/2", {"max_redirects": 1},
     "ERROR: too many redirects (more than 1) from {base}/r/2; the last one pointed to {base}/image.png: fetch that "
     "URL directly if it is right"),
    ("redirect-elsewhere", "/to-ftp", {}, "ERROR: {base}/to-ftp redirects to an unusable location: url must use http "
                                          "or https, not ftp: (got 'ftp://127.0.0.1/x')"),
    ("denied-host", "/away", {"denied_hosts": ["denied.invalid"]},
     "ERROR: host denied.invalid is denied by config web_fetch.denied_hosts (denied.invalid); fetch another site "
     "(reached by a redirect from {base}/away)"),
    ("not-allowed-host", "/image.png", {"allowed_hosts": ["docs.python.org"]},
     "ERROR: host 127.0.0.1 is not in config web_fetch.allowed_hosts (docs.python.org); fetch one of those or ask "
     "the user to allow it"),
    ("tls-to-plain-http", "https:/image.png", {},
     "ERROR: TLS with 127.0.0.1 failed ({any}); the site does not serve https there or its certificate is not "
     "trusted: check the URL"),
    ("no-such-host", "http://no-such-host.invalid/page", {},
     "ERROR: cannot resolve host no-such-host.invalid (DNS lookup failed: {any}); check the URL's spelling"),
    ("no-scheme", "example.com/page", {}, "ERROR: web_fetch: url must start with http:// or https:// (got "
                                          "'example.com/page'); try https://example.com/page"),
    ("other-scheme", "file:///etc/passwd", {}, "ERROR: web_fetch: url must use http or https, not file: (got "
                                               "'file:///etc/passwd')"),
    ("no-host", "http://", {}, "ERROR: web_fetch: url has no host (got 'http://'); pass a full URL such as "
                               "https://example.com/page"),
    ("empty-url", "  ", {}, "ERROR: web_fetch: url must not be empty; pass a full http:// or https:// URL"),
]


@pytest.mark.parametrize("url,web_fetch,text", [r[1:] for r in WEB_FETCH], ids=[r[0] for r in WEB_FETCH])
def test_web_fetch_says(site: LocalSite, workspace: Path, url: str, web_fetch: dict[str, object], text: str) -> None:
    if url.startswith("/"):
        url = site.url(url)
    elif url.startswith("https:/"):
        url = site.url(url.removeprefix("https:")).replace("http://", "https://")
    config = {k: v for k, v in web_fetch.items() if k != "max_redirects"}
    limits = Limits(web_fetch_max_redirects=int(str(web_fetch.get("max_redirects", Limits().web_fetch_max_redirects))))
    rt = Runtime(tools=build_tools(), config=Config.from_dict({"web_fetch": config}), workspace=workspace,
                 ui=RecordingUI(), policy=Policy(allow=(Rule("web_fetch"),)), limits=limits)
    out = call(rt, "web_fetch", url=url)
    assert said(out, text, base=site.base), out


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


# -- MCP: one session with a real server that crashes and one that cannot start ------------------

DEMO = str(Path(__file__).parent / "mcp" / "demo_server.py")


async def _mcp_session(ws: Path) -> dict[str, str]:
    ui = RecordingUI()
    servers = {"demo": {"command": sys.executable, "args": [DEMO]}, "missing": {"command": "/nonexistent/server"}}
    built = build_agent(Config.from_dict({"mcp": {"servers": servers}, "permission_mode": "goal"}), ws, ui,
                        llm=ScriptedLLM(), save_session=False)
    said: dict[str, str] = {}

    async def one(name: str, **args: object) -> str:
        [msg] = await built.agent.runtime.run_calls([ToolCall(f"c{len(said)}", name, json.dumps(args))])
        return msg.content or ""

    async with built.session():
        said["binary-resource"] = await one("mcp_read_resource", server="demo", uri="blob://bytes")
        said["unknown-server"] = await one("mcp_list_prompts", server="nope")
        said["crashed-in-a-call"] = await one("mcp__demo__crash")
        for _ in range(500):  # the exit code follows the closed connection
            if "code 3" in built.mcp_lines()[0]:
                break
            await asyncio.sleep(0.02)
        said["not-connected"] = await one("mcp__demo__echo", text="x")
        said["status-failed"], said["status-not-started"] = built.mcp_lines()
        said["failed-to-start"], said["stopped"] = [n.text for n in ui.of(Notice) if n.level == "warning"]
        said["stopped-told-to-the-model"] = built.agent.full_prompt().split("## MCP server demo\n")[1]
    return said


@pytest.fixture(scope="module")
def mcp_said(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return asyncio.run(_mcp_session(tmp_path_factory.mktemp("ws")))


GONE = "the connection closed (the server exited or dropped it)"
MISSING = "FileNotFoundError: [Errno 2] No such file or directory: '/nonexistent/server'"
MCP: list[tuple[str, str]] = [
    ("binary-resource", "[resource blob://bytes] [binary data application/octet-stream, 4 bytes; not shown as text]"),
    ("unknown-server", "ERROR: unknown MCP server `nope`; configured: demo, missing"),
    ("crashed-in-a-call", "ERROR: mcp__demo__crash failed: MCP server demo closed the connection; it is not "
                          "available for the rest of this session (restart nanohermes to reconnect)"),
    # {any}: the end of the server's stderr, when it wrote any
    ("not-connected", f"ERROR: MCP server demo is not connected (failed: {GONE}{{any}}; the server exited with code 3); "
                      "fix its config (see /mcp) and restart nanohermes, or work without it"),
    ("status-failed", f"demo: failed, 14 tools (stdio {sys.executable} {DEMO}) — {GONE}{{any}}; the server exited with "
                      "code 3"),
    ("status-not-started", f"missing: failed, 0 tools (stdio /nonexistent/server) — {MISSING}"),
    ("failed-to-start", f"MCP server missing failed to start: {MISSING}; continuing without it"),
    ("stopped", f"MCP server demo stopped ({GONE}{{any}}); its tools are unavailable for the rest of this session (see /mcp, "
                "restart nanohermes to reconnect)"),
    ("stopped-told-to-the-model", f"This server stopped during the session ({GONE}). Its tools (mcp__demo__*) now "
                                  "fail at once: do not call them; work without them, and tell the person if the "
                                  "task needs them."),
]


@pytest.mark.parametrize("key,text", MCP, ids=[k for k, _ in MCP])
def test_mcp_says(mcp_said: dict[str, str], key: str, text: str) -> None:
    assert said(mcp_said[key], text), mcp_said[key]


def test_mcp_without_servers_says_where_to_configure_them(workspace: Path) -> None:
    built = build_agent(Config(), workspace, RecordingUI(), llm=ScriptedLLM(), save_session=False)
    assert built.mcp_lines() == ["no MCP servers configured (config key mcp.servers)"]


# -- web_search ---------------------------------------------------------------------------------

def closed_port() -> int:
    """A port nothing listens on: free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def searched(site: LocalSite, ws: Path, config: dict[str, object], query: str = "q") -> str:
    rt = Runtime(tools=build_tools(), config=Config.from_dict({"web_search": config}), workspace=ws, ui=RecordingUI(),
                 policy=Policy(mode="goal"), limits=Limits())
    return call(rt, "web_search", query=query)


def searxng_answers(site: LocalSite, results: list[dict[str, str]], unresponsive: list[list[str]]) -> dict[str, object]:
    site.json("/search", {"query": "q", "results": results, "unresponsive_engines": unresponsive})
    return {"provider": "searxng", "searxng_url": site.base}


OTHERS = ("try again later, or set another provider in config web_search.provider: duckduckgo (no key), searxng "
          "(with web_search.searxng_url), brave (BRAVE_API_KEY) or tavily (TAVILY_API_KEY)")
WEB_SEARCH: list[tuple[str, Callable[[LocalSite], dict[str, object]], str]] = [
    ("results", lambda s: searxng_answers(s, [{"title": "One", "url": "https://example.org/1", "content": "First."},
                                              {"title": "Two", "url": "https://example.org/2", "content": "Second."}], []),
     'Results for "q" (searxng):\n\n1. One\n   https://example.org/1\n   First.\n\n2. Two\n   https://example.org/2\n'
     "   Second.\n\nFollow up with web_fetch on a URL to read the page."),
    ("no-results", lambda s: searxng_answers(s, [], []), 'No results for "q" from searxng; try other words.'),
    ("engines-did-not-answer", lambda s: searxng_answers(s, [], [["google", "timeout"]]),
     "ERROR: web_search provider searxng found nothing because its engines did not answer: google (timeout); "
     + OTHERS),
    ("no-json", lambda s: s.static("/search", "no", "text/html", status=403) or {
        "provider": "searxng", "searxng_url": s.base},
     "ERROR: web_search provider searxng at {base}/search refused the JSON format (403); add json to search.formats "
     f"in the instance's settings.yml; {OTHERS}"),
    ("searxng-needs-its-url", lambda s: {"provider": "searxng"},
     "ERROR: web_search provider searxng needs web_search.searxng_url (e.g. http://localhost:8888); set it, or "
     + OTHERS.removeprefix("try again later, or ")),
    ("brave-needs-a-key", lambda s: {"provider": "brave", "brave_api_key_env": "NANOHERMES_NO_SUCH_KEY"},
     "ERROR: web_search provider brave needs an API key in $NANOHERMES_NO_SUCH_KEY; export it, or "
     + OTHERS.removeprefix("try again later, or ")),
    ("tavily-needs-a-key", lambda s: {"provider": "tavily", "tavily_api_key_env": "NANOHERMES_NO_SUCH_KEY"},
     "ERROR: web_search provider tavily needs an API key in $NANOHERMES_NO_SUCH_KEY; export it, or "
     + OTHERS.removeprefix("try again later, or ")),
    ("brave-rejects-the-key", lambda s: s.static("/brave", "{}", "application/json", status=401) or {
        "provider": "brave", "brave_api_key_env": "HOME", "brave_url": s.url("/brave")},
     "ERROR: web_search provider brave rejected the key in $HOME (401: {{}}); " + OTHERS),
    ("unreachable", lambda s: {"provider": "searxng", "searxng_url": f"http://127.0.0.1:{closed_port()}"},
     "ERROR: web_search provider searxng is unreachable at {searxng_url}/search (ConnectError: {any}); " + OTHERS),
]


@pytest.mark.parametrize("configure,text", [r[1:] for r in WEB_SEARCH], ids=[r[0] for r in WEB_SEARCH])
def test_web_search_says(site: LocalSite, workspace: Path, configure: Callable[[LocalSite], dict[str, object]],
                         text: str) -> None:
    config = configure(site)
    out = searched(site, workspace, config)
    assert said(out, text, base=site.base, **{k: str(v) for k, v in config.items()}), out


def test_an_empty_search_says_what_to_send(workspace: Path) -> None:
    rt = make_runtime(workspace)
    assert call(rt, "web_search", query=" ") == "ERROR: web_search: query must not be empty; pass the words to search for"


# -- the OS sandbox -----------------------------------------------------------------------------

# What each kind of refusal reads as, and the setting that would let it through.
SANDBOX_REFUSED: list[tuple[Refused, str, str]] = [
    (Refused("write", "/x/out.txt", ""),
     "a write to /x/out.txt",
     "add the folder to sandbox.writable_roots"),
    (Refused("sealed", "/x/.git/HEAD", ""),
     "a write to /x/.git/HEAD (the top level of a git folder is read-only for a background task, so "
     "that it cannot point git elsewhere; run git commands that change the repository in the "
     "foreground)",
     "add the folder to sandbox.writable_roots"),
    (Refused("unnamed-write", "", ""),
     "a write outside its writable roots (\"Read-only file system\"; the output names no path)",
     "add the folder to sandbox.writable_roots"),
    (Refused("planted", "/x/.git/commondir", "it would change how git or nanohermes starts"),
     "creating /x/.git/commondir (removed: it would change how git or nanohermes starts)",
     "add the folder to sandbox.writable_roots"),
    (Refused("secret", "/x/.env", ""),
     "access to /x/.env, a secret file the sandbox withholds (permissions.secret_files)",
     "an allow rule naming the exact command line lets it read the secret file"),
    (Refused("read-rule", "/x/private/a", ""),
     "access to /x/private/a, a path a read rule withholds (permissions.deny, permissions.ask)",
     "no setting opens a path a read rule covers to sandboxed commands but removing the rule"),
    (Refused("own-file", "/h/.config/nanohermes/config.json", ""),
     "access to /h/.config/nanohermes/config.json, one of nanohermes's own files (its config, "
     "sessions, memory), hidden from sandboxed commands",
     "no setting opens nanohermes's own files to sandboxed commands"),
    (Refused("home-credential", "/h/.ssh/id_ed25519", ""),
     "access to /h/.ssh/id_ed25519, one of your home folder's credentials (keys, cloud and registry "
     "logins), withheld from sandboxed commands",
     ""),
    (Refused("init", "/proc/1/environ", ""),
     "access to /proc/1/environ, the sandbox's init (pid 1 of the command's own PID namespace, a copy "
     "of nanohermes, whose memory, environment and files no command may read)",
     "no setting shows sandboxed commands nanohermes's processes or anyone else's"),
    (Refused("own-proc", "/proc/self/mem", ""),
     "access to /proc/self/mem, the command's own /proc (read-only; it holds only the processes of "
     "the command's own PID namespace)",
     "no setting shows sandboxed commands nanohermes's processes or anyone else's"),
    (Refused("socket", "/run/user/0/bus", ""),
     "a connection to the socket /run/user/0/bus, another program's server, hidden from sandboxed "
     "commands",
     "no setting opens another program's socket to sandboxed commands"),
    (Refused("process", "4242", ""),
     "signalling process 4242, a process outside the command's own PID namespace, which holds only "
     "the command's own processes (each command gets one of its own)",
     "a background task is stopped with task_kill; no setting shows sandboxed commands nanohermes's "
     "processes or anyone else's"),
    (Refused("network", "", ""),
     "a network connection (the sandbox has no network)",
     "set \"sandbox\": {\"network\": true}"),
    (Refused("loopback", "8080", ""),
     "a connection to port 8080 of the host's loopback (the sandbox has a loopback of its own: "
     "servers the command starts are reachable, the host's are not)",
     "set \"sandbox\": {\"network\": true}"),
    (Refused("server", "5432, 6379", ""),
     "a connection, probably to a server of this machine (it was refused; listening here: 5432, 6379; "
     "the sandbox has a loopback of its own: servers the command starts are reachable, the host's are "
     "not)",
     "set \"sandbox\": {\"network\": true}"),
    (Refused("unnamed", "", ""),
     "an access the sandbox refuses (\"Permission denied\" or \"Operation not permitted\", naming no path "
     "it could check: another program's socket, a secret file, a file outside its writable roots, or "
     "a process outside the sandbox)",
     ""),
    (Refused("more", "2", "2"),
     "2 more (sandbox_refusals_listed is 2)",
     ""),
]


@pytest.mark.parametrize("refused,text,allow", SANDBOX_REFUSED, ids=[r[0].kind for r in SANDBOX_REFUSED])
def test_a_sandbox_refusal_says(refused: Refused, text: str, allow: str) -> None:
    assert (str(refused), refused.allow) == (text, allow)


AVAILABILITY: list[tuple[str, sandbox.Availability, list[tuple[bool, str]]]] = [
    ("landlock-7", sandbox.Availability(abi=7, namespaces=True, pid=True), [
        (True, "Landlock ABI 7: commands that run unasked are confined"),
        (True, "user namespaces: each command gets its own network (only its own loopback; no network at all unless "
               "sandbox.network), its own /dev/shm, its own processes (a PID namespace and /proc: it sees no other "
               "process), and a view of the files in which other programs' sockets (tmux, agents, D-Bus, container "
               "engines) are hidden, the workspace's secret files are withheld, and .git/config, git's hooks and "
               "nanohermes's config stay read-only")]),
    ("old-landlock-no-namespaces", sandbox.Availability(abi=3, namespaces=False, namespace_error="EPERM"), [
        (False, "Landlock ABI 3: commands that run unasked are confined; weaker: TCP connect/bind is not blocked (ABI "
                "< 4), signals and abstract unix sockets are not scoped (ABI < 6)"),
        (False, "user namespaces unavailable (EPERM): other programs' sockets (tmux, agents, D-Bus) cannot be hidden "
                "from a command, so only argument-checked built-in read-only commands written as plain words run "
                "without asking")]),
    ("no-landlock", sandbox.Availability(abi=0, namespaces=True, pid=True), [
        (False, "Landlock unavailable (the kernel has no Landlock (Linux 5.13+ with landlock in the LSM list)): "
                "commands are not confined; only argument-checked built-in read-only commands run without asking"),
        (True, "user namespaces: each command gets its own network (only its own loopback; no network at all unless "
               "sandbox.network), its own /dev/shm, its own processes (a PID namespace and /proc: it sees no other "
               "process), and a view of the files in which other programs' sockets (tmux, agents, D-Bus, container "
               "engines) are hidden, the workspace's secret files are withheld, and .git/config, git's hooks and "
               "nanohermes's config stay read-only")]),
]


@pytest.mark.parametrize("availability,lines", [r[1:] for r in AVAILABILITY], ids=[r[0] for r in AVAILABILITY])
def test_what_the_sandbox_can_do_here_says(availability: sandbox.Availability, lines: list[tuple[bool, str]]) -> None:
    assert availability.lines() == lines


@pytest.mark.skipif(not sandbox.probe().landlock, reason="Landlock is not available here")
def test_a_refused_write_is_noted_for_the_model(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    [note] = [ln for ln in run_confined(workspace, f"echo x > {outside}", "workspace-write").text.split("\n")
              if ln.startswith("note: ")]
    assert note == (
        f"note: the OS sandbox (workspace-write) refused a write to {outside}: this line ran sandboxed because no "
        "person approved it, and it may write the workspace, $TMPDIR and sandbox.writable_roots, but not git's "
        "config and hooks or .nanohermes/; it has a loopback of its own but no other network, and sees neither other "
        "programs' sockets, nor secret files, nor nanohermes's own files. What lets it through: add the folder to "
        "sandbox.writable_roots; --sandbox off (or sandbox.mode off) runs unasked commands unconfined; or a person's "
        "yes at the prompt runs this call outside the sandbox. Otherwise change the approach (write inside the "
        "workspace, or use the file tools)")


@pytest.mark.skipif(not sandbox.probe().landlock, reason="Landlock is not available here")
def test_a_refused_write_is_asked_about(workspace: Path, tmp_path: Path) -> None:
    target = tmp_path / "outside.txt"
    ui = RecordingUI(answers=["deny"])
    rt = Runtime(tools=build_tools(), config=Config(), workspace=workspace, ui=ui,
                 policy=Policy(allow=parse_rules(["run_command(touch *)"], "test", [])))
    call(rt, "run_command", command=f"touch {target}")
    [asked] = ui.of(ApprovalRequest)
    assert asked.reason == f"the sandbox (workspace-write) refused a write to {target}; run it again outside the sandbox?"


def test_a_killed_escapee_is_noted(workspace: Path) -> None:
    out = call(make_runtime(workspace), "run_command",
               command="setsid sh -c ': > a; exec sleep 300' > /dev/null 2>&1 < /dev/null & "
                       "until [ -e a ]; do sleep 0.02; done")
    [note] = [ln for ln in out.split("\n") if ln.startswith("note: ")]
    assert note == ("note: 1 process the command started outside its process group (setsid, double fork) was still "
                    "running and killed when it ended; use background=true for servers and other long-running "
                    "processes")


def test_an_untrusted_projects_sandbox_is_said_to_be_ignored(workspace: Path, home: Path) -> None:
    project = workspace / ".nanohermes" / "config.json"
    project.parent.mkdir()
    project.write_text(json.dumps({"sandbox": {"mode": "off"}}))
    [warning] = load_config(workspace).warnings
    assert warning == (f"{project}: ignored sandbox because this project is not trusted; to allow them, add "
                       f"\"{workspace}\" to trusted_projects in {home}/.config/nanohermes/config.json")


# -- compaction and cut results -------------------------------------------------------------------

def compacting(ws: Path, *replies: Reply, **limits: int) -> tuple[Agent, RecordingUI]:
    """An agent whose model answers `replies` (summaries among them), with `limits` lowered."""
    ui = RecordingUI()
    config = Config(model="fake-model", base_url="http://127.0.0.1:9/v1", api_key="k", max_retries=0,
                    limits=dict(limits))
    return build_agent(config, ws, ui, llm=ScriptedLLM(list(replies))).agent, ui


def compacted(ws: Path) -> list[str]:
    """A manual compaction with a focus, a todo list in force: what the summariser was asked,
    and what the model reads in place of the turns."""
    agent, _ = compacting(ws, Reply(text="the summary"))
    call(agent.runtime, "todo_write", todos=[{"content": "write the parser", "status": "in_progress"}])
    agent.session.history = [Message.user("first"), Message("assistant", "a"), Message.user("second"),
                             Message("assistant", "b")]
    asyncio.run(agent.compactor.manual(agent.session, "the parser API"))  # type: ignore[union-attr]
    llm = agent.llm
    assert isinstance(llm, ScriptedLLM)
    return [llm.requests[0]["messages"][1]["content"].rsplit("\n", 1)[1], agent.session.history[0].content or ""]


def cut_told(ws: Path, *sizes: int) -> list[str]:
    """An overflow cutting recent results of `sizes` chars: the first cut result, and the notice."""
    agent, ui = compacting(ws, Reply(text="s"), compact_keep_chars=4000)
    names = [f"c{i}" for i in range(len(sizes))]
    agent.session.history = [Message.user("go"), Message("assistant", None, [ToolCall(n, "x", "{}") for n in names]),
                             *(Message.tool(n, "r" * size) for n, size in zip(names, sizes, strict=True))]
    asyncio.run(agent.compactor.on_too_long(agent.session))  # type: ignore[union-attr]
    return [agent.session.history[2].content or "", ui.of(Notice)[-1].text.replace(str(agent.session.folder), "{folder}")]


COMPACTION: list[tuple[str, Callable[[Path], str], str]] = [
    ("focus", lambda ws: compacted(ws)[0], "Summarise the conversation above. Focus especially on: the parser API"),
    ("summary", lambda ws: compacted(ws)[1],
     "<conversation-summary>\nThe earlier part of this conversation (3 messages) was compacted. Summary:\nthe summary\n"
     "</conversation-summary>\n\nCurrent todo list (kept from before compacting):\n[~] 1. write the parser"),
    ("nothing-to-compact", lambda ws: (lambda agent, ui: asyncio.run(agent.compactor.compact(agent.session)) or  # type: ignore[union-attr]
                                       ui.of(Notice)[-1].text)(*compacting(ws)),
     "cannot compact (requested): no older turns to summarise"),
    ("omitted-to-fit", lambda ws: fit(["GOAL", "1" * 100, "2" * 100, "3" * 100, "LAST"], 230).split("\n\n")[1],
     "[… 2 older messages omitted to fit the summary request …]"),
    ("one-result-cut", lambda ws: cut_told(ws, 5000)[1],
     "cut 1 recent tool result from 5000 to {any} chars (its first 500 chars, with a note) to fit the model's "
     "context; the whole result is saved in {folder}/tool-results"),
    ("results-cut", lambda ws: cut_told(ws, 5000, 5000, 5000)[1],
     "cut 3 recent tool results from 15000 to {any} chars (the first 500 chars of each, with a note) to fit the "
     "model's context; the whole results are saved in {folder}/tool-results"),
    ("saved-preview", lambda ws: persisted.cut("w" * 1000, "c1", ws, 10).replace(str(ws), "{folder}"),
     '<persisted-output path="{folder}/tool-results/c1.txt">\nwwwwwwwwww\n… 990 of 1000 chars cut to fit the model\'s '
     "context; the whole result is in the file above (read it in parts with read_file offset/limit)\n"
     "</persisted-output>"),
    ("unsaved-preview", lambda ws: persisted.cut("w" * 1000, "c1", None, 10),
     "<cut-output>\nwwwwwwwwww\n… 990 of 1000 chars cut to fit the model's context; not saved, the session is not "
     "recorded: narrow the call to see more\n</cut-output>"),
]


@pytest.mark.parametrize("scenario,text", [r[1:] for r in COMPACTION], ids=[r[0] for r in COMPACTION])
def test_compaction_says(workspace: Path, scenario: Callable[[Path], str], text: str) -> None:
    out = scenario(workspace)
    assert said(out, text.replace("{folder}", "{{folder}}")), out
