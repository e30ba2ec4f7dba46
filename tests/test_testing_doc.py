"""docs/testing.md's example runs as written, and `nanohermes.testing` offers what the page
says it does: the page cannot rot while the suite passes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import nanohermes.testing

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "testing.md"


def example() -> str:
    blocks = re.findall(r"^```python\n(.*?)^```$", PAGE.read_text(encoding="utf-8"), re.M | re.S)
    assert len(blocks) == 1, "docs/testing.md holds one example"
    return str(blocks[0])


def test_the_documented_example_passes(tmp_path: Path) -> None:
    namespace: dict[str, Any] = {"__name__": "docs_testing_example"}
    exec(compile(example(), str(PAGE), "exec"), namespace)
    tests = [v for k, v in namespace.items() if k.startswith("test_") and callable(v)]
    assert len(tests) == 1
    tests[0](tmp_path)


def test_the_example_fails_when_the_hook_does_not_refuse(tmp_path: Path) -> None:
    """The example asserts something: with a hook that lets everything through, it fails."""
    code = example().replace("sys.exit(2)", "sys.exit(0)")
    namespace: dict[str, Any] = {"__name__": "docs_testing_example"}
    exec(compile(code, str(PAGE), "exec"), namespace)
    test = next(v for k, v in namespace.items() if k.startswith("test_"))
    with pytest.raises(AssertionError):
        test(tmp_path)


def test_the_page_names_every_public_name_and_the_module_says_it_is_public() -> None:
    page = PAGE.read_text(encoding="utf-8")
    assert [name for name in nanohermes.testing.__all__ if f"`{name}" not in page] == []
    assert all(hasattr(nanohermes.testing, name) for name in nanohermes.testing.__all__)
    assert "public" in (nanohermes.testing.__doc__ or "")
