"""The one list of secret files and the one check of a path against it, for the file tools
(asked before a path reader shows one), the command analysis (a command that would print
one is asked) and the sandbox (withheld from every sandboxed command).

The list has two parts:
- file names (`permissions.secret_files`, `.env`, `*.pem`, `id_rsa*`, ...), matched at any
  depth, inside the workspace or out;
- nanohermes's own files (`own_paths`): the user's config file (it may hold `api_key`), the
  data folder (sessions, the memory store, checkpoints, saved tool results) and the state
  folder (input history, MCP logs, trust state). The session's own saved tool results stay
  readable to the file tools (`readable`): the model is told to read them with read_file.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import posixpath
import re
from collections.abc import Iterable
from pathlib import Path
from nanohermes.common.dirs import data_home, state_home, user_config_path

DEFAULT_SECRET_FILES: tuple[str, ...] = (
    ".env", ".env.*", "*.pem", "*.key", "*.p12", "*.pfx", "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*",
    "credentials.json", "credentials", ".netrc", ".pgpass", ".npmrc", ".pypirc", "*.keystore", "*.jks",
)


@functools.lru_cache(maxsize=32)
def name_matcher(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """One compiled check of a file name against the name patterns (case as written)."""
    if not patterns:
        return re.compile(r"(?!)")
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns))


def is_secret(path: str, patterns: tuple[str, ...] | list[str], *, glob: bool = False) -> bool:
    """Does the path's file name match the name list? With `glob`, the path is itself a shell
    glob: does it match a file name the list would name (`.e*` could be `.env`)?"""
    name = posixpath.basename(path.rstrip("/"))
    if not name:
        return False
    if not glob:
        return bool(name_matcher(tuple(patterns)).match(name))
    for p in patterns:
        sample = p.replace("*", "x").replace("?", "x")
        if sample.startswith(".") and not name.startswith("."):
            continue  # the shell's * does not match a leading dot
        if fnmatch.fnmatchcase(sample, name) or fnmatch.fnmatchcase(name, p):
            return True
    return False


def own_paths(config_files: Iterable[Path] = ()) -> tuple[str, ...]:
    """Real paths of nanohermes's own secret files and folders: the user's config file (and
    any other the person's config came from), the data folder and the state folder."""
    out = [user_config_path(), *config_files, data_home(), state_home()]
    return tuple(dict.fromkeys(os.path.realpath(p) for p in out))


# Where people keep credentials in their home folder (keys, cloud and registry logins, tokens):
# withheld from sandboxed commands whole, wherever the workspace is. A command that needs one
# (`git push` over ssh, a cloud CLI) is one a person approves: it runs outside the sandbox.
HOME_CREDENTIALS: tuple[str, ...] = (
    ".ssh", ".gnupg", ".aws", ".azure", ".config/gcloud", ".kube", ".docker/config.json", ".netrc", ".git-credentials",
    ".config/gh", ".config/hub", ".pypirc", ".npmrc", ".pgpass", ".password-store", ".vault-token",
    ".terraform.d/credentials.tfrc.json", ".config/git/credentials",
)


def home_credentials() -> tuple[str, ...]:
    """Real paths of the home folder's credential files and folders that exist (HOME_CREDENTIALS)."""
    home = os.path.expanduser("~")
    out = [os.path.join(home, p) for p in HOME_CREDENTIALS]
    return tuple(dict.fromkeys(os.path.realpath(p) for p in out if os.path.lexists(p)))


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def own_secret(real: str, own: tuple[str, ...] | list[str], readable: tuple[str, ...] | list[str] = ()) -> str:
    """The own secret path `real` (a real, absolute path) is or lies in, or "": inside one of
    `readable` it is not secret."""
    if not os.path.isabs(real) or any(_inside(real, r) for r in readable):
        return ""
    return next((o for o in own if _inside(real, o)), "")


def holds_own_secret(real: str, own: tuple[str, ...] | list[str]) -> bool:
    """Does the folder `real`, read whole (grep -r, rg), reach into an own secret path?"""
    return any(_inside(o, real) for o in own)
