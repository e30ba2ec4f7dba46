"""Start-up and one-turn overhead of nanohermes, before and after a change, each beside its floor.

    python bench/startup.py [--runs N] [--before REV] [--only-turn] [--fresh-home] [--quick]

`--before` names the version to compare with (default: where this branch left main, `git
merge-base HEAD main`); it is exported from git into a temporary folder and run with the same
interpreter and packages. Rows (wall-clock seconds, the median of N rounds; a round runs the
version before, this checkout and the floor one after another, so a machine whose load changes
skews them alike; each ratio is the median of the per-round ratios):
  --version          `nanohermes --version`      floor: `python -c pass`
  first prompt       launch to the REPL prompt drawn on a pseudo-terminal
                                                 floor: `python -c "import typer, rich.console, prompt_toolkit"`
  agent ready        launch to the agent built behind that prompt (the toolbar shows the context)
  one -p turn        `nanohermes -p` against the loopback fake server
                                                 floor: a bare httpx script making the same streamed request
                                                 (goal: within 1.3x)
  -p turn CPU        the same in user+system CPU seconds, which a busy machine skews less
  -p CPU, config     the same with a config file in the HOME, as most people's starts have one
and the peak RSS of the `-p` run beside that of the bare script. `after/before` is the change's
effect (1.00x: none); `after/floor` is what start-up still costs. Run it on an idle machine.
Every row starts with one unmeasured run of each side (the OS's file cache and .pyc files
warmed). Each version keeps one HOME of its own across its runs, as a person's starts after the
first find it; `--fresh-home` gives every run a new, empty HOME instead (a CI job, a container,
a new user: nothing a run leaves behind helps the next). `--quick` is a smoke run: one round,
no comparison with another version.
"""

from __future__ import annotations

import argparse
import itertools
import json
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

from _versions import default_before, export

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from nanohermes.testing import FakeServer, Reply  # noqa: E402

PY = sys.executable
ANSWER = "The answer is 42."
# A person's config file: a few rules, a limit, a search setting (no hook: it would add its process).
CONFIG = {"model": "fake-model", "permissions": {"allow": ["run_command(git log *)"], "deny": ["read_file(.env)"]},
          "max_turns": 40, "limits": {"max_output": 30000}, "web_search": {"provider": "searxng"}}


def env(home: Path, tree: Path = REPO, **extra: str) -> dict[str, str]:
    """The environment of one version's runs: its source tree first on the path, its own HOME
    (a version's tool cache is not another's)."""
    home.mkdir(parents=True, exist_ok=True)
    e = {**os.environ, "PYTHONPATH": str(tree), "HOME": str(home), "OPENAI_API_KEY": "bench-key",
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


def rounds(sides: list[Callable[[], float]], runs: int, warm: bool = True) -> tuple[list[float], list[list[float]]]:
    """Each side's median, and each side's per-round ratios to the others (`ratios[i][j]`: the
    median of side i over side j). A round runs every side once, in turn."""
    for side in sides if warm else ():  # warm the OS file cache and .pyc files
        side()
    got = [[side() for side in sides] for _ in range(runs)]
    medians = [statistics.median(r[i] for r in got) for i in range(len(sides))]
    ratios = [[statistics.median(r[i] / r[j] for r in got) for j in range(len(sides))] for i in range(len(sides))]
    return medians, ratios




def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--before", default=default_before(), help="the version to compare with (default: git merge-base "
                    "HEAD main); 'none' measures this checkout alone")
    ap.add_argument("--only-turn", action="store_true", help="measure only the -p turn against its floor")
    ap.add_argument("--fresh-home", action="store_true", help="every run in a new, empty HOME")
    ap.add_argument("--quick", action="store_true", help="a smoke run: one round of this checkout alone")
    args = ap.parse_args()
    before = None if args.before in (None, "none") or args.quick else args.before
    runs = 1 if args.quick else args.runs
    homes = itertools.count()

    with tempfile.TemporaryDirectory() as tmp, FakeServer(default=Reply(text=ANSWER, usage=(20, 5))) as server:
        ws = Path(tmp) / "ws"
        ws.mkdir()
        trees = {"after": REPO}
        if before is not None:
            trees = {"before": export(before, Path(tmp) / "before"), **trees}
        kept = {name: env(Path(tmp) / f"home-{name}", tree) for name, tree in trees.items()}

        def env_of(name: str, config: bool = False) -> dict[str, str]:
            """The environment of one run of version `name`: its kept HOME, or a new one; with
            `config`, a HOME of its own holding a config file (`CONFIG`)."""
            if not args.fresh_home and not config:
                return kept[name]
            e = env(Path(tmp) / f"home-{name}-{'config-' if config else ''}{next(homes) if args.fresh_home else 0}",
                    trees[name])
            if config:
                (Path(e["XDG_CONFIG_HOME"]) / "nanohermes").mkdir(parents=True, exist_ok=True)
                (Path(e["XDG_CONFIG_HOME"]) / "nanohermes" / "config.json").write_text(json.dumps(CONFIG))
            return e
        floor_env = env(Path(tmp) / "home-floor")
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
        repl_floor = [PY, "-c", "import typer, rich.console, prompt_toolkit"]
        rows: list[tuple[str, Callable[[str], float], str, Callable[[], float]]] = [
            ("--version", lambda n: timed([PY, "-m", "nanohermes", "--version"], env_of(n), ws),
             "python -c pass", lambda: timed([PY, "-c", "pass"], floor_env, ws)),
            ("first prompt", lambda n: first_prompt(env_of(n), ws, server.base_url),
             "import typer, rich.console, prompt_toolkit", lambda: timed(repl_floor, floor_env, ws)),
            ("agent ready", lambda n: first_prompt(env_of(n), ws, server.base_url, b"context"),
             "import typer, rich.console, prompt_toolkit", lambda: timed(repl_floor, floor_env, ws)),
            ("one -p turn", lambda n: timed(one_turn, env_of(n), ws),
             "bare httpx streaming request (goal 1.3x)", lambda: timed([PY, "-c", bare], floor_env, ws)),
            ("-p turn CPU", lambda n: cpu_seconds(one_turn, env_of(n), ws),
             "the same, CPU seconds (steadier under load)", lambda: cpu_seconds([PY, "-c", bare], floor_env, ws)),
            ("-p CPU, config", lambda n: cpu_seconds(one_turn, env_of(n, config=True), ws),
             "the same, a config file in the HOME", lambda: cpu_seconds([PY, "-c", bare], floor_env, ws)),
        ]
        if args.only_turn:
            rows = rows[-3:]
        elif args.quick:  # each kind of measure once: a launch, the REPL on a pty, a turn
            rows = rows[:2] + rows[3:4]
        if before is not None:
            print(f"before: {before[:12]}   after: this checkout ({REPO})")
        names = list(trees)
        head = "".join(f"{n:>11}" for n in names)
        print(f"{'measure':<14}{head} {'floor':>10} {'after/before':>13} {'after/floor':>12}  floor is")
        for name, ours, base_name, base in rows:
            sides: list[Callable[[], float]] = [lambda o=ours, n=n: o(n) for n in names]
            medians, ratios = rounds([*sides, base], runs, warm=not args.quick)
            versions = "".join(f"{m:>10.3f}s" for m in medians[:-1])
            change = f"{ratios[-2][0]:>12.2f}x" if before is not None else f"{'':>13}"
            print(f"{name:<14}{versions} {medians[-1]:>9.3f}s {change} {ratios[-2][-1]:>11.2f}x  {base_name}")
        rss = {n: max(peak_rss(one_turn, env_of(n), ws) for _ in range(min(runs, 3))) for n in names}
        bare_rss = max(peak_rss([PY, "-c", bare], floor_env, ws) for _ in range(min(runs, 3)))
        versions = "".join(f"{rss[n] / 1024:>8.1f}MiB" for n in names)
        change = f"{rss['after'] / rss['before']:>12.2f}x" if before is not None else f"{'':>13}"
        print(f"{'peak RSS -p':<14}{versions} {bare_rss / 1024:>7.1f}MiB {change} {rss['after'] / bare_rss:>11.2f}x"
              "  bare httpx streaming request")
        if server.violations:
            raise SystemExit(f"fake server saw protocol violations: {server.violations}")


if __name__ == "__main__":
    main()
