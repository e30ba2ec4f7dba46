"""One `-p` turn as a peer would be run: a fresh HOME every run, no warm caches, the order rotated.

    python bench/turn.py [--runs N] [--before REV] [--quick]

Each scenario runs `nanohermes -p` against the loopback fake server beside its floor, a bare
httpx script making the same streamed requests (what any agent must do at least: start Python,
send the conversation, read the stream, and for a tool call do the tool's work and ask again):

  plain answer   one model call, a text answer
  file read      the model reads a file, then answers (two calls)
  command        the model runs `echo` (with --yes), then answers (two calls)

each with a saved session and with `--no-session`. Every run gets a HOME of its own, created
empty just before it (a CI job, a container, a new user), so nothing a run leaves behind
speeds up the next. A round runs every side once; the order of the sides rotates from round
to round, so a machine whose load drifts hits each side alike. Rows: the median wall time of
each side, the median of the per-round ratios to the floor (goal: within 1.1x), the same ratio
of CPU time (user and system, the run's processes included: what a busy machine skews less
than wall time), and the peak RSS of one run of each. `--before REV` adds that version (exported from git) as another side,
so a change shows beside what it changed. Timings are printed, never asserted; `--quick`
(one round, one scenario) is the smoke run the tests make.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from itertools import count
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from _versions import default_before, export  # noqa: E402
from startup import env  # noqa: E402

from nanohermes.testing import FakeServer, Reply, call, tool_reply  # noqa: E402

PY = sys.executable
ANSWER = "The answer is 42."
NOTES = "the secret word is plover\n" * 20

# What each scenario's model does: the tool call of its first answer (None: it answers at once).
SCENARIOS: dict[str, tuple[str, dict[str, Any]] | None] = {
    "plain answer": None,
    "file read": ("read_file", {"path": "notes.txt"}),
    "command": ("run_command", {"command": "echo hello"}),
}

# The floor: the same requests over bare httpx, and the tool's work done the plainest way.
FLOOR = r"""
import json, subprocess, sys, httpx
url, tool = sys.argv[1], sys.argv[2]
messages = [{"role": "system", "content": "x"}, {"role": "user", "content": "go"}]
def ask():
    body = {"model": "fake-model", "stream": True, "stream_options": {"include_usage": True}, "messages": messages}
    text, calls = [], {}
    with httpx.stream("POST", url, json=body, headers={"Authorization": "Bearer bench-key"}) as r:
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                for c in json.loads(line[6:])["choices"]:
                    d = c["delta"]
                    text.append(d.get("content") or "")
                    for tc in d.get("tool_calls") or []:  # streamed in pieces: the arguments joined
                        got = calls.setdefault(tc["index"], {"id": tc.get("id"), "type": "function",
                                                             "function": {"name": "", "arguments": ""}})
                        got["id"] = got["id"] or tc.get("id")
                        for k in ("name", "arguments"):
                            got["function"][k] += (tc.get("function") or {}).get(k) or ""
    return "".join(text), list(calls.values())
text, calls = ask()
for c in calls:
    args = json.loads(c["function"]["arguments"])
    if tool == "read_file":
        out = open(args["path"]).read()
    else:
        out = subprocess.run(["bash", "-c", args["command"]], capture_output=True, text=True).stdout
    messages += [{"role": "assistant", "content": None, "tool_calls": [c]},
                 {"role": "tool", "tool_call_id": c["id"], "content": out}]
if calls:
    text, _ = ask()
print(text)
"""


def script(tool: tuple[str, dict[str, Any]] | None) -> Callable[[dict[str, Any]], Reply]:
    """The fake model: the scenario's tool call first, then the answer once a tool result came."""
    def answer(body: dict[str, Any]) -> Reply:
        asked_tool = any(m.get("role") == "tool" for m in body.get("messages", []))
        if tool is None or asked_tool:
            return Reply(text=ANSWER, usage=(20, 5))
        return tool_reply(call(tool[0], tool[1]))
    return answer


def measured(argv: list[str], new_env: Callable[[], dict[str, str]], cwd: Path) -> tuple[float, int, float]:
    """Wall seconds, peak RSS (KiB) and CPU seconds (user and system, its waited-for children
    included) of one run in a fresh environment (`new_env()`, made before the clock starts),
    from wait4 on that exact child."""
    environ = new_env()
    start = time.perf_counter()
    p = subprocess.Popen(argv, env=environ, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    assert p.stderr is not None
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - start
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"{argv[:4]} failed ({p.returncode}): {err.decode()[-800:]}")
    return wall, usage.ru_maxrss, usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--before", default=None, help="a version to run beside this checkout (e.g. main, or "
                    f"'base' for where this branch left main: {default_before() or 'unknown'})")
    ap.add_argument("--quick", action="store_true", help="one round of the plain answer, with a session: a smoke run")
    args = ap.parse_args()
    before = default_before() if args.before == "base" else args.before
    runs = 1 if args.quick else args.runs
    scenarios = {"plain answer": SCENARIOS["plain answer"]} if args.quick else SCENARIOS
    homes = count()

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        trees = {"after": REPO}
        if before is not None:
            trees = {"before": export(before, root / "before"), **trees}

        def fresh(tree: Path | None) -> dict[str, str]:
            """A new, empty HOME for one run (the floor's too: it has nothing to keep)."""
            e = env(root / f"home{next(homes)}", tree or REPO)
            if tree is None:
                e.pop("PYTHONPATH", None)
            return e

        print(f"sides: {', '.join(trees)} (nanohermes{f', before = {before[:12]}' if before else ''}), floor "
              "(bare httpx); a fresh HOME every run\n")
        head = "".join(f"{n:>10}" for n in trees)
        print(f"{'scenario':<30}{head}{'floor':>10}" + "".join(f"{n + '/floor':>14}" for n in trees)
              + "".join(f"{n + '/floor CPU':>18}" for n in trees)
              + "".join(f"{n + ' RSS':>12}" for n in trees) + f"{'floor RSS':>11}")
        for name, tool in scenarios.items():
            for session in (True, False)[:1 if args.quick else 2]:
                ws = root / f"ws-{len(list(root.iterdir()))}"
                ws.mkdir()
                (ws / "notes.txt").write_text(NOTES)
                with FakeServer(default=script(tool)) as server:  # type: ignore[arg-type]
                    argv = [PY, "-m", "nanohermes", "-p", "go", "--base-url", server.base_url, "--model", "fake-model",
                            *(["--yes"] if tool and tool[0] == "run_command" else []),
                            *([] if session else ["--no-session"])]
                    floor_argv = [PY, "-c", FLOOR, server.base_url + "/chat/completions", tool[0] if tool else "none"]
                    sides: list[tuple[str, Callable[[], tuple[float, int, float]]]] = [
                        (n, partial(measured, argv, partial(fresh, t), ws)) for n, t in trees.items()]
                    sides.append(("floor", partial(measured, floor_argv, partial(fresh, None), ws)))
                    for _, side in sides if not args.quick else ():  # the page cache and .pyc files warmed
                        side()
                    got: list[dict[str, tuple[float, int, float]]] = []
                    for r in range(runs):
                        order = sides[r % len(sides):] + sides[:r % len(sides)]
                        got.append({n: side() for n, side in order})
                    if server.violations:
                        raise SystemExit(f"fake server saw protocol violations: {server.violations}")
                med = {n: statistics.median(g[n][0] for g in got) for n, _ in sides}
                ratio = {n: statistics.median(g[n][0] / g["floor"][0] for g in got) for n in trees}
                cpu = {n: statistics.median(g[n][2] / g["floor"][2] for g in got) for n in trees}
                rss = {n: max(g[n][1] for g in got) / 1024 for n, _ in sides}
                label = f"{name}{'' if session else ', --no-session'}"
                print(f"{label:<30}" + "".join(f"{med[n]:>9.3f}s" for n in trees) + f"{med['floor']:>9.3f}s"
                      + "".join(f"{ratio[n]:>13.2f}x" for n in trees)
                      + "".join(f"{cpu[n]:>17.2f}x" for n in trees)
                      + "".join(f"{rss[n]:>9.1f}MiB" for n in trees) + f"{rss['floor']:>8.1f}MiB", flush=True)
    print("\ngoal: every scenario within 1.1x of its floor; peak RSS unchanged")


if __name__ == "__main__":
    main()
