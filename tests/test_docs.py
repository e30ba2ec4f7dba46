"""The README's reference tables and config.example.json agree with the code."""

from __future__ import annotations

import json
from pathlib import Path

from nanohermes.budget import Limits
from nanohermes.config import Config, Section, section_fields, section_types
from nanohermes.reference import EXAMPLES, SECTIONS, WRITE, config_example, limits_table, main, render_into

ROOT = Path(__file__).resolve().parent.parent


def test_readme_reference_matches_the_code() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert render_into(readme) == readme, f"run: {WRITE}"


def test_the_example_config_is_the_one_the_code_makes() -> None:
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


def test_a_changed_limit_makes_the_docs_check_fail(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    monkeypatch.setitem(SECTIONS, "limits", lambda: limits_table().replace("`200`", "`201`"))
    assert render_into(readme) != readme


def test_the_write_command_regenerates_both_files(tmp_path: Path) -> None:
    readme, example = tmp_path / "README.md", tmp_path / "config.example.json"
    readme.write_text((ROOT / "README.md").read_text(encoding="utf-8").replace("`200`", "`201`"), encoding="utf-8")
    example.write_text("{}\n", encoding="utf-8")
    words = WRITE.split()
    assert words[:3] == ["python", "-m", "nanohermes.reference"] and words[4:] == ["README.md", "config.example.json"]
    assert main([words[3], str(readme), str(example)]) == 0
    assert readme.read_text(encoding="utf-8") == (ROOT / "README.md").read_text(encoding="utf-8")
    assert example.read_text(encoding="utf-8") == config_example()
