"""Small real tools for tests of the runtime and sub-agents, where the full file tools'
behaviour would only add noise."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from nanohermes.tools import Approval, Params, Tool, ToolContext


class WriteParams(Params):
    path: str
    content: str = ""


@dataclass(frozen=True, kw_only=True)
class TinyWrite(Tool):
    """A real (minimal) writing tool under the write_file name, to exercise write policy."""

    name: ClassVar[str] = "write_file"
    description: ClassVar[str] = "write a file"
    params: ClassVar[type[Params]] = WriteParams
    approval: ClassVar[Approval] = "edit"

    async def run(self, args: Params, ctx: ToolContext) -> str:
        assert isinstance(args, WriteParams)
        (ctx.workspace / args.path).write_text(args.content)
        return f"wrote {args.path}"
