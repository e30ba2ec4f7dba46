"""The docs' reference tables and config.example.json agree with the code; the README stays a
page a newcomer reads, with its two commands first, and nothing links to a page that is gone."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from nanohermes.common.budget import Limits
from nanohermes.config import Config, Section, section_fields, section_types
from nanohermes.reference import (
    EXAMPLES, SECTIONS, WRITE, config_example, generated_files, limits_table, main, render_into, sections_in,
)

ROOT = Path(__file__).resolve().parent.parent
INSTALL = ("python3 -m venv .venv && .venv/bin/pip install -e . && mkdir -p ~/.local/bin && "
           "ln -sf \"$PWD/.venv/bin/nanohermes\" ~/.local/bin/ && ~/.local/bin/nanohermes")
TEST = "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest"


def code_blocks(text: str) -> list[str]:
    """The Markdown's code blocks (indented four spaces), in order."""
    blocks, current = [], []
    for line in text.splitlines():
        if line.startswith("    ") and (current or line.strip()):
            current.append(line[4:])
        elif current and not line.strip():
            current.append("")
        elif current:
            blocks.append("\n".join(current).strip())
            current = []
    return [*blocks, "\n".join(current).strip()] if current else blocks


def docs() -> list[Path]:
    return sorted((ROOT / "docs").glob("*.md"))


@pytest.mark.parametrize("path", [p for p in generated_files(ROOT) if p.suffix == ".md"], ids=lambda p: p.name)
def test_every_generated_table_matches_the_code(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert render_into(text) == text, f"{path.relative_to(ROOT)} drifted from the code; run: {WRITE}"


def test_every_generated_table_is_in_exactly_one_file() -> None:
    held = [name for p in generated_files(ROOT)[:-1] for name in sections_in(p.read_text(encoding="utf-8"))]
    assert sorted(held) == sorted(SECTIONS), f"each of {sorted(SECTIONS)} must be in one file; run: {WRITE}"


def test_the_example_config_is_the_one_the_code_makes() -> None:
    assert generated_files(ROOT)[-1] == ROOT / "config.example.json"
    assert (ROOT / "config.example.json").read_text(encoding="utf-8") == config_example(), f"run: {WRITE}"


def test_the_example_config_shows_every_limit_and_every_example_at_a_real_key() -> None:
    example = json.loads(config_example())
    assert set(example["limits"]) | (set(Limits.names()) & set(example)) == set(Limits.names())
    for key, value in EXAMPLES.items():  # an example at a key that was renamed or removed would be lost
        node = example
        for part in key.split("."):
            assert isinstance(node, dict) and part in node, f"EXAMPLES names {key}, which is no config key"
            node = node[part]
        assert node == value


def test_every_limit_is_documented_with_what_it_bounds() -> None:
    rows = [r for r in limits_table().splitlines()[2:]]
    assert [r.split("`")[1] for r in rows] == list(Limits.names())
    assert all(not r.endswith("|  |") for r in rows), "a Limits field lacks its comment in budget.py"


def test_every_config_key_has_a_description() -> None:
    def walk(model: type[Section], prefix: str) -> list[str]:
        missing = []
        for name, f in section_fields(model).items():
            if not f.metadata.get("description"):
                missing.append(prefix + name)
            ann = section_types(model)[name]
            if isinstance(ann, type) and issubclass(ann, Section):
                missing += walk(ann, f"{prefix}{name}.")
        return missing

    assert walk(Config, "") == []


def test_example_config_lists_every_top_level_key() -> None:
    example = json.loads((ROOT / "config.example.json").read_text())
    assert sorted(set(section_fields(Config)) - set(example)) == []


def test_a_changed_limit_makes_the_docs_check_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    limits = (ROOT / "docs" / "limits.md").read_text(encoding="utf-8")
    monkeypatch.setitem(SECTIONS, "limits", lambda: limits_table().replace("`200`", "`201`"))
    assert render_into(limits) != limits


def test_the_write_command_finds_and_regenerates_every_file(tmp_path: Path) -> None:
    """The command the failures name, run as a person runs it (from the repository's root),
    puts back every table and the example config."""
    (tmp_path / "docs").mkdir()
    for path in generated_files(ROOT):
        copy = tmp_path / path.relative_to(ROOT)
        text = path.read_text(encoding="utf-8")
        emptied = re.sub(r"(<!-- BEGIN GENERATED: \w+ -->).*?(<!-- END GENERATED: \w+ -->)", r"\1\n\2", text, flags=re.S)
        copy.write_text("{}\n" if path.suffix == ".json" else emptied, encoding="utf-8")
    words = shlex.split(WRITE)
    assert words[:3] == ["python", "-m", "nanohermes.reference"]
    ran = subprocess.run([sys.executable, *words[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    for path in generated_files(ROOT):
        assert (tmp_path / path.relative_to(ROOT)).read_text(encoding="utf-8") == path.read_text(encoding="utf-8")


def test_writing_a_file_without_generated_tables_fails_and_names_the_command(tmp_path: Path,
                                                                             capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "README.md"
    page.write_text("# a page without tables\n", encoding="utf-8")
    assert main(["--write", str(page)]) == 2
    assert WRITE in capsys.readouterr().err
    assert page.read_text(encoding="utf-8") == "# a page without tables\n"


def test_a_section_with_one_marker_is_an_error() -> None:
    with pytest.raises(ValueError, match="limits"):
        render_into("<!-- BEGIN GENERATED: limits -->\n| x |\n")


def test_the_readme_is_short_and_starts_with_its_two_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300
    assert code_blocks(readme)[:2] == [INSTALL, TEST]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    # CI installs and tests as the README's test command does (with quieter pip and no cache).
    assert "python3 -m venv .venv" in ci and ".venv/bin/pip install --quiet -e '.[test]'" in ci
    assert ".venv/bin/python -m pytest" in ci


def test_every_link_between_the_pages_leads_somewhere() -> None:
    pages = [ROOT / "README.md", ROOT / "AGENTS.md", *docs()]
    anchors = {p: {re.sub(r"[^\w\- ]", "", h.lower()).strip().replace(" ", "-")
                   for h in re.findall(r"^#+ (.+)$", p.read_text(encoding="utf-8"), re.M)} for p in pages}
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if target.startswith(("http://", "https://")):
                continue
            file, _, anchor = target.partition("#")
            dest = (page.parent / file).resolve() if file else page
            if not dest.exists() or (anchor and anchor not in anchors.get(dest, set())):
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == []


def test_every_page_of_docs_is_listed_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert [p.name for p in docs() if f"(docs/{p.name})" not in readme] == []


def test_the_project_file_table_names_what_an_untrusted_project_may_set() -> None:
    """docs/config.md's table of what a project file may set without trust agrees with
    `NARROWING`: every key it may set, and every limit it may not."""
    from nanohermes.config.narrow import NARROWING

    page = (ROOT / "docs" / "config.md").read_text(encoding="utf-8")
    table = page.split("| key | how the project's value combines with yours |", 1)[1].split("\n\n", 1)[0]
    named = set(re.findall(r"`([\w.*]+)`", table))
    keys = {k for k in NARROWING if not k.startswith("limits.")}
    assert keys - named == set(), "a key a project may set is missing from docs/config.md"
    trust_limits = [n for n in Limits.names() if f"limits.{n}" not in NARROWING]
    lowered = table.split("only when lower", 1)[1].split("\n", 1)[0]
    assert sorted(re.findall(r"`(\w+)`", lowered)) == sorted(trust_limits)
