"""Checkpoints: what each turn changed in the workspace's files, with the contents before and
after, so /undo, /rewind and /redo put back exactly that, and nothing the person did.

A shadow git repository per workspace lives in nanohermes's data folder
(`$XDG_DATA_HOME/nanohermes/turn/checkpoints/<project>/`), with its own index per session; the
user's `.git` is never written, and when the workspace is in a repository its objects are
read (as git's alternates), so a file that matches a blob the repository already has costs no
copy. The parts:

- `versions`: what a checkpoint holds (`Version`, `Change`, `Scan`, `CheckpointError`);
- `repository`: the user's repository, only read;
- `shadow`: the shadow repository and how every git command of it runs;
- `scan`: the session's index as a stat cache of the workspace, and the scans;
- `store`: the `Store` (the shadow, the index, contents kept for good, pruning);
- `gitpack`: objects written without a git process; `newfiles`: where new files may be;
- `journal`: the session's list of turns and undos on disk;
- `record`: `Checkpoints`, the scans around each turn and what they record;
- `undo`: taking turns back, conflicts and merges, and /redo.

Every file is kept, untracked and git-ignored ones too, except `.git` entries, the
dependency and cache folders grep skips (build outputs such as `build/` and `dist/` are
kept), folders holding a repository of their own, and files over `checkpoint_file_max_bytes`
(named in a note, and left alone by an undo). The store is pruned, oldest checkpoints first,
when it outgrows `checkpoint_store_bytes`.
"""

from __future__ import annotations

from nanohermes.turn.checkpoints.journal import Listed, Turn, Undo
from nanohermes.turn.checkpoints.record import Checkpoints
from nanohermes.turn.checkpoints.repository import Repository, repository
from nanohermes.turn.checkpoints.scan import KEPT_INDEXES
from nanohermes.turn.checkpoints.store import KEPT_OUTPUT_DIRS, REF_PREFIX, STATE_REF, Store, skipped_dirs, store_dir
from nanohermes.turn.checkpoints.undo import Conflict, Resolution, Resolver
from nanohermes.turn.checkpoints.versions import UNKEPT, Change, CheckpointError, Scan, Version

__all__ = ["KEPT_INDEXES", "KEPT_OUTPUT_DIRS", "REF_PREFIX", "STATE_REF", "UNKEPT", "Change", "CheckpointError",
           "Checkpoints", "Conflict", "Listed", "Repository", "Resolution", "Resolver", "Scan", "Store", "Turn", "Undo",
           "Version", "repository", "skipped_dirs", "store_dir"]
