"""Start-up and one-turn overhead of nanohermes, each beside its floor, measured in one run.

    python bench/startup.py [--runs N]

Rows (median of N runs alternating with the baseline, wall-clock seconds; the ratio is the
median of the per-pair ratios):
  --version          `nanohermes --version`      vs `python -c pass`
  first prompt       launch to the REPL prompt drawn on a pseudo-terminal
                                                 vs `python -c "import typer, rich.console, prompt_toolkit"`
  agent ready        launch to the agent built behind that prompt (the toolbar shows the context)
  one -p turn        `nanohermes -p` against the loopback fake server
                                                 vs a bare httpx script making the same streamed request
                                                 (goal: within 1.3x)
  -p turn CPU        the same pair in user+system CPU seconds, which a busy machine skews less
and the peak RSS of the `-p` run beside that of the bare script. Run it on an idle machine:
the ratios are what to compare between versions. Every row starts with one unmeasured run
of each side, which also fills the tool schema cache in the benchmark's own HOME, as any
start after the first finds it.
"""

from __future__ import annotations

import argparse
import os
import pty
import select
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from nanohermes.testing import FakeServer, Reply  # noqa: E402

PY = sys.executable
ANSWER = "The answer is 42."


def env(home: Path, **extra: str) -> dict[str, str]:
    e = {**os.environ, "PYTHONPATH": str(REPO), "HOME": str(home), "OPENAI_API_KEY": "bench-key",
         "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local/share"),
         "XDG_STATE_HOME": str(home / ".local/state"), "XDG_CACHE_HOME": str(home / ".cache"),
         "TERM": "xterm-256color", **extra}
    # PYTHONDONTWRITEBYTECODE would make every run compile nanohermes from source, which an
    # installed copy never does.
    for var in ("OPENAI_BASE_URL", "NANOHERMES_MODEL", "NO_COLOR", "PYTHONDONTWRITEBYTECODE"):
        e.pop(var, None)
    return e


def timed(argv: list[str], environ: dict[str, str], cwd: Path) -> float:
    """Wall seconds of one run of argv, which must succeed."""
    start = time.perf_counter()
    p = subprocess.run(argv, env=environ, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True)
    wall = time.perf_counter() - start
    if p.returncode != 0:
        raise SystemExit(f"{argv} failed ({p.returncode}): {p.stderr.decode()[-500:]}")
    return wall


def cpu_seconds(argv: list[str], environ: dict[str, str], cwd: Path) -> float:
    """User + system CPU seconds of one run: steadier than wall time on a busy machine."""
    p = subprocess.Popen(argv, env=environ, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv} failed")
    return usage.ru_utime + usage.ru_stime


def peak_rss(argv: list[str], environ: dict[str, str], cwd: Path) -> int:
    """Peak resident set size (KiB) of one run, from wait4 on that exact child."""
    p = subprocess.Popen(argv, env=environ, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"{argv} failed ({p.returncode})")
    return usage.ru_maxrss


def first_prompt(environ: dict[str, str], cwd: Path, base_url: str, until: bytes = b"starting") -> float:
    """Launch the REPL on a pty; seconds until `until` is drawn: the toolbar reads "starting…"
    with the first prompt, and shows the "context" once the agent is built behind it."""
    master, slave = pty.openpty()
    start = time.perf_counter()
    p = subprocess.Popen([PY, "-m", "nanohermes", "--base-url", base_url, "--model", "fake-model"], env=environ,
                         cwd=cwd, stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    seen = b""
    try:
        while until not in seen:
            ready, _, _ = select.select([master], [], [], 30)
            if not ready:
                raise SystemExit(f"no prompt after 30 s; screen so far: {seen[-500:]!r}")
            chunk = os.read(master, 65536)
            seen += chunk
            if b"\x1b[6n" in chunk:  # answer cursor-position requests like a terminal
                os.write(master, b"\x1b[1;1R")
        elapsed = time.perf_counter() - start
        os.write(master, b"\x04")  # Ctrl-D: leave cleanly
        deadline = time.monotonic() + 30
        while p.poll() is None and time.monotonic() < deadline:
            if select.select([master], [], [], 0.1)[0]:
                try:
                    if b"\x1b[6n" in os.read(master, 65536):
                        os.write(master, b"\x1b[1;1R")
                except OSError:
                    break
        return elapsed
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()
        os.close(master)


def paired(ours: Callable[[], float], base: Callable[[], float], runs: int) -> tuple[float, float, float]:
    """Medians of ours, of the baseline, and of their per-pair ratio. Runs alternate so a
    machine whose load changes during the benchmark skews both sides alike."""
    ours(), base()  # warm the OS file cache and .pyc files
    pairs = [(ours(), base()) for _ in range(runs)]
    a = statistics.median(p[0] for p in pairs)
    b = statistics.median(p[1] for p in pairs)
    return a, b, statistics.median(p[0] / p[1] for p in pairs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--only-turn", action="store_true", help="measure only the -p turn against its floor")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp, FakeServer(default=Reply(text=ANSWER, usage=(20, 5))) as server:
        home = Path(tmp) / "home"
        ws = Path(tmp) / "ws"
        home.mkdir()
        ws.mkdir()
        e = env(home)
        # The floor of one turn: start Python, stream the same request over httpx, print the text.
        bare = (
            "import json, httpx\n"
            "body = {'model': 'fake-model', 'stream': True, 'stream_options': {'include_usage': True},\n"
            "        'messages': [{'role': 'system', 'content': 'x'}, {'role': 'user', 'content': 'What is the answer?'}]}\n"
            "out = []\n"
            f"with httpx.stream('POST', {server.base_url + '/chat/completions'!r}, json=body,\n"
            "                  headers={'Authorization': 'Bearer bench-key'}) as r:\n"
            "    for line in r.iter_lines():\n"
            "        if line.startswith('data: ') and line != 'data: [DONE]':\n"
            "            out += [c['delta'].get('content') or '' for c in json.loads(line[6:])['choices']]\n"
            "print(''.join(out))\n"
        )
        one_turn = [PY, "-m", "nanohermes", "-p", "What is the answer?", "--base-url", server.base_url,
                    "--model", "fake-model"]
        rows = [
            ("--version", lambda: timed([PY, "-m", "nanohermes", "--version"], e, ws),
             "python -c pass", lambda: timed([PY, "-c", "pass"], e, ws)),
            ("first prompt", lambda: first_prompt(e, ws, server.base_url),
             "import typer, rich.console, prompt_toolkit",
             lambda: timed([PY, "-c", "import typer, rich.console, prompt_toolkit"], e, ws)),
            ("agent ready", lambda: first_prompt(e, ws, server.base_url, b"context"),
             "import typer, rich.console, prompt_toolkit",
             lambda: timed([PY, "-c", "import typer, rich.console, prompt_toolkit"], e, ws)),
            ("one -p turn", lambda: timed(one_turn, e, ws),
             "bare httpx streaming request (goal 1.3x)", lambda: timed([PY, "-c", bare], e, ws)),
            ("-p turn CPU", lambda: cpu_seconds(one_turn, e, ws),
             "the same, CPU seconds (steadier under load)", lambda: cpu_seconds([PY, "-c", bare], e, ws)),
        ]
        if args.only_turn:
            rows = rows[-2:]
        print(f"{'measure':<14} {'nanohermes':>11} {'baseline':>10} {'ratio':>7}  baseline is")
        for name, ours, base_name, base in rows:
            a, b, ratio = paired(ours, base, args.runs)
            print(f"{name:<14} {a:>10.3f}s {b:>9.3f}s {ratio:>6.2f}x  {base_name}")
        ours_rss = max(peak_rss(one_turn, e, ws) for _ in range(3))
        bare_rss = max(peak_rss([PY, "-c", bare], e, ws) for _ in range(3))
        print(f"{'peak RSS -p':<14} {ours_rss / 1024:>8.1f}MiB {bare_rss / 1024:>7.1f}MiB {ours_rss / bare_rss:>6.2f}x"
              "  bare httpx streaming request")
        if server.violations:
            raise SystemExit(f"fake server saw protocol violations: {server.violations}")


if __name__ == "__main__":
    main()
