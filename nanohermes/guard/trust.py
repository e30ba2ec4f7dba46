"""The trust store: which folders the person trusts, the rules they remembered, and the
writes nanohermes makes to project and user files on their behalf.

- trusted projects: `trusted_projects` in the user's config file (added by the REPL's
  folder-trust question); a project file's trust keys apply only there;
- remembered rules: an "always" answer is a rule for the rest of the session
  (`remember`); "always in this project" is also written to the project's
  `.nanohermes/config.json` and recorded in nanohermes's state folder as the person's own
  (`save_project_rules`), so it applies even where the project is not trusted;
- the folder-trust question's "continue without", remembered until the project asks for
  something else.

Config files are read here only as JSON: the config module reads them as configuration,
and depends on this one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from nanohermes.common.dirs import project_config_path, state_home, write_private
from nanohermes.guard.permissions import Policy, Rule


def is_trusted(workspace: Path, trusted: list[str]) -> bool:
    real = workspace.resolve()
    return any(real == Path(t).expanduser().resolve() for t in trusted)


def trust_folder(workspace: Path, user_file: Path) -> None:
    """Add `workspace` to trusted_projects in `user_file`, keeping the rest of the file; the
    file is replaced atomically and readable only by its owner. The file was read as config
    when the session started, so it is JSON."""
    data = _read_json(user_file)
    listed = data.get("trusted_projects")
    if not isinstance(listed, list):
        listed = []
    real = str(workspace.resolve())
    if real not in listed:
        listed.append(real)
    data["trusted_projects"] = listed
    write_private(user_file, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def remember(policy: Policy, rule: Rule, origin: str = "learned this session") -> Policy:
    """The policy with an "always" answer's rule: allowed for the rest of the session, whatever the mode."""
    if rule in policy.allow:
        return policy
    return replace(policy, allow=(*policy.allow, replace(rule, origin=origin)))


def save_project_rules(workspace: Path, rules: Sequence[Rule]) -> Path:
    """"Always for this project": add `rules` to the project file's `permissions.allow` (the
    rest of the file kept, replaced atomically) and record them as the person's, since a
    project file's allow rules otherwise apply only in a trusted folder. Returns the file;
    raises OSError or ValueError (a file that is not an object, a key that is not a list)."""
    path = project_config_path(workspace)
    data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    if not isinstance(data, dict):
        raise ValueError("the top level is not an object")
    perms = data.setdefault("permissions", {})
    allow = perms.setdefault("allow", []) if isinstance(perms, dict) else None
    if not isinstance(perms, dict) or not isinstance(allow, list):
        raise ValueError("`permissions.allow` is not a list")
    allow.extend(str(r) for r in rules if str(r) not in allow)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    record_approved_rules(workspace, [str(r) for r in rules])
    return path


def _approved_path() -> Path:
    return state_home() / "approved-rules.json"


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def approved_rules(workspace: Path) -> frozenset[str]:
    """Allow rules the person saved to this workspace's project file by answering "always in
    this project": they apply even in an untrusted folder (the person approved them)."""
    rules = _read_json(_approved_path()).get(str(workspace.resolve()))
    return frozenset(r for r in rules if isinstance(r, str)) if isinstance(rules, list) else frozenset()


def record_approved_rules(workspace: Path, rules: list[str]) -> None:
    data = _read_json(_approved_path())
    key = str(workspace.resolve())
    have = [r for r in data.get(key) or [] if isinstance(r, str)]
    data[key] = have + [r for r in rules if r not in have]
    write_private(_approved_path(), json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def asks_fingerprint(asks: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(asks, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _declined_path() -> Path:
    return state_home() / "trust-declined.json"


def trust_declined(workspace: Path, asks: dict[str, Any]) -> bool:
    """Whether the person already answered "continue without" to these same requests here."""
    return _read_json(_declined_path()).get(str(workspace.resolve())) == asks_fingerprint(asks)


def decline_trust(workspace: Path, asks: dict[str, Any]) -> None:
    """Remember "continue without": not asked again until the project asks for something else."""
    data = _read_json(_declined_path())
    data[str(workspace.resolve())] = asks_fingerprint(asks)
    write_private(_declined_path(), json.dumps(data, indent=2) + "\n")
