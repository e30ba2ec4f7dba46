"""The README's reference tables and config.example.json agree with the code."""

from __future__ import annotations

import json
from pathlib import Path

from nanohermes.budget import Limits
from nanohermes.config import Config, Section, section_fields, section_types
from nanohermes.reference import SECTIONS, limits_table, render_into

ROOT = Path(__file__).resolve().parent.parent


def test_readme_reference_matches_the_code() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert render_into(readme) == readme, "run: python -m nanohermes.reference --write README.md"


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


def test_a_changed_limit_makes_the_docs_check_fail(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    monkeypatch.setitem(SECTIONS, "limits", lambda: limits_table().replace("`200`", "`201`"))
    assert render_into(readme) != readme
