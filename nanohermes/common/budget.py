"""Every output limit in one table, with its unit in its name, plus the exit clamp.

Text limits are in characters (Python `str` length); raw-input limits are in bytes and say
so in their name. Tools read their caps from `Limits` (a frozen copy lives on each tool
context), so a test can lower any one of them and check the exact note.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

KiB = 1024
MiB = 1024 * KiB


@dataclass(frozen=True, kw_only=True)
class Limits:
    """The SPEC §4 table. Config may override any field by name: a whole number for an `int`,
    any number for a `float` (seconds), null only where the type allows it. A count or size is
    at least 1 and a time more than 0, except the limits in `ZERO_ALLOWED`, whose comment says
    what 0 means; a limit that is also a top-level config key takes that key's bounds."""

    max_output: int = 20_000  # chars: every tool result, success and error, at the exit clamp
    tool_args_max_depth: int = 64  # nesting of one call's JSON arguments (objects and arrays)
    text_call_retries: int = 2  # answers holding a tool call written as text that cannot run, sent back per turn; 0: none
    reasoning_call_retries: int = 2  # replies with no answer whose only call is in the thinking, told to send it, per turn; 0: none
    read_file_max_bytes: int = 4 * MiB  # a file read whole
    read_file_window_lines: int = 2000  # default `limit` of read_file
    read_file_line_chars: int = 2000  # one line of read_file output
    read_file_count_bytes: int = 4 * MiB  # read past a window's end to count the lines; beyond it "of at least N"
    binary_sniff_bytes: int = 8 * KiB  # NUL in this prefix means binary
    list_dir_entries: int = 300  # entries one list_dir returns
    edit_file_max_bytes: int = 32 * MiB  # a file edit_file or apply_patch loads whole
    edit_diff_chars: int = 20_000  # the diff of an edit shown to people (approval prompt, UI)
    grep_matches: int = 200  # hits one grep returns
    grep_file_max_bytes: int = 1 * MiB  # larger files are skipped and counted
    grep_line_chars: int = 240  # each hit line, clipped with …
    grep_max_files: int = 50_000  # files visited by grep/glob walks
    glob_results: int = 500  # paths one glob returns
    glob_alternatives: int = 256  # patterns one glob or grep include spells out of its `{a,b}`; past it, refused
    run_command_capture_bytes: int = 256 * KiB  # per stream: its first and last halves
    run_command_max_timeout_secs: int = 3600  # upper clamp of run_command `timeout_secs`
    task_capture_bytes: int = 512 * KiB  # per stream of a background task, unread: first and newest halves
    task_timeout_secs: float = 3600.0  # hard timeout of a background task
    command_kill_grace_secs: float = 2.0  # between TERM and KILL of a command's process group; 0: KILL at once
    command_pipe_grace_secs: float = 2.0  # wait for grandchildren holding the pipes after the shell exits; 0: none
    git_timeout_secs: float = 120.0  # one git_* call (commit hooks included)
    sandbox_refusals_listed: int = 5  # what the sandbox refused, named per command, the rest counted (0: all counted)
    secret_scan_entries: int = 20_000  # files and folders looked at for secret files a command would read
    secret_scan_secs: float = 1.0  # time for that look; over either bound the command is asked (0: always over)
    sandbox_secret_scan_entries: int = 200_000  # files and folders of the workspace looked through for secret files
    sandbox_secret_scan_secs: float = 5.0  # time for that look, reusing unchanged folders' listings (0: always over)
    sandbox_secret_files: int = 1000  # withheld from sandboxed commands; past any of these 3 bounds a program is asked
    sandbox_secret_value_bytes: int = 64 * KiB  # of each secret file, read for the values kept out of unapproved output
    sandbox_socket_scan_entries: int = 50_000  # entries of the folders where servers keep sockets, looked at per sandboxed command
    web_fetch_body_bytes: int = 2 * MiB  # body kept; the rest is drained and discarded
    web_fetch_timeout_secs: float = 30.0  # one fetch, redirects included
    web_fetch_max_redirects: int = 5  # redirects followed; 0: none
    web_search_timeout_secs: float = 15.0  # one search request
    web_search_snippet_chars: int = 300  # each result's title and snippet
    web_search_max_results: int = 10  # upper clamp of web_search `count`
    skill_body_chars: int = 20_000  # a loaded skill's body
    project_docs_chars: int = 20_000  # the AGENTS.md chain in the system prompt, nested files loaded later included
    doc_import_depth: int = 5  # hops of `@path` imports followed from an instruction file
    own_file_max_bytes: int = 1 * MiB  # one file nanohermes reads into the prompt by itself (instructions, commands, ...)
    command_file_output_chars: int = 10_000  # one `!` command's output, put into a command file's prompt
    todo_items: int = 50  # items in one todo_write
    memory_text_chars: int = 500  # one memory_save sentence
    memory_search_max_results: int = 50  # upper clamp of memory_search `limit`
    memory_busy_timeout_secs: float = 5.0  # wait for another process's write lock; 0: fail at once
    agent_preview_chars: int = 500  # a sub-agent's result preview in agent_list
    agent_description_chars: int = 1024  # one sub-agent's description in the subagent tool's description
    session_budget_chars: int = 120_000  # history sent to the model before compaction
    aggregate_budget_chars: int | None = None  # tool results answering one message; None: min(200,000, session budget / 2)
    persisted_preview_chars: int = 2000  # preview left for a result saved to a file (aggregate budget, context overflow)
    skill_description_chars: int = 1024  # one skill's description in the prompt index
    skill_index_chars: int = 10_000  # the whole skill index in the system prompt
    skill_files_listed: int = 100  # other files of a skill's folder listed by the skill tool; 0: none
    mcp_startup_timeout_secs: float = 30.0  # all MCP servers together, at startup
    mcp_call_timeout_secs: float = 300.0  # one MCP request (tool call, resource, prompt)
    mcp_log_max_bytes: int = 1 * MiB  # a server's stderr log is started afresh when it is larger
    mcp_instructions_chars: int = 2000  # one server's instructions in the system prompt
    mcp_http_check_secs: float = 15.0  # how often an idle HTTP MCP server's port is tried, so one that went away is noticed
    mcp_tool_specs_chars: int = 30_000  # MCP tools' specs sent whole; past it (or past max_tools) they are found with tool_search
    tool_search_results: int = 10  # tools one tool_search shows and loads
    compact_keep_chars: int | None = None  # recent history kept verbatim; None: session budget / 4
    compact_item_chars: int = 4000  # each older message as quoted into the summary request
    compact_summary_chars: int = 12_000  # the summary that replaces the older turns
    approval_guard_secs: float = 0.4  # a question takes no key until the keyboard is quiet this long since it showed; 0: none
    hook_output_bytes: int = 64 * KiB  # per stream of one hook: the rest is read and discarded
    hook_context_chars: int = 10_000  # what the hooks of one event add for the model (context, reasons)
    checkpoint_file_max_bytes: int = 4 * MiB  # larger files (git-ignored ones too) are not kept; a note names them
    checkpoint_max_files: int = 1_000_000  # a workspace with more files is not checkpointed (a note says so)
    checkpoint_store_bytes: int = 1024 * MiB  # a workspace's checkpoint store; the oldest checkpoints are pruned
    startup_scan_folders: int = 20_000  # folders looked through for virtual environments' start-up files each turn

    @property
    def aggregate_chars(self) -> int:
        if self.aggregate_budget_chars is not None:
            return self.aggregate_budget_chars
        return min(200_000, self.session_budget_chars // 2)

    @property
    def keep_chars(self) -> int:
        if self.compact_keep_chars is not None:
            return self.compact_keep_chars
        return self.session_budget_chars // 4

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """Every limit's name, in the table's order (listed once: each tool's description asks)."""
        return LIMIT_NAMES if cls is Limits else tuple(f.name for f in fields(cls))


LIMIT_NAMES: tuple[str, ...] = tuple(f.name for f in fields(Limits))


# Limits for which 0 is a meaning of its own (no grace, no redirect, nothing listed, no wait,
# no time to look for secret files so the command is asked) rather than a limit that lets
# nothing through.
ZERO_ALLOWED: frozenset[str] = frozenset({
    "command_kill_grace_secs", "command_pipe_grace_secs", "sandbox_refusals_listed", "web_fetch_max_redirects",
    "memory_busy_timeout_secs", "skill_files_listed", "secret_scan_secs", "sandbox_secret_scan_secs",
    "text_call_retries", "reasoning_call_retries", "approval_guard_secs"})


def plural(n: int, word: str, many: str = "") -> str:
    """`1 file`, `3 files` (`many`: an irregular plural): every count a note shows reads right."""
    return f"{n} {word if n == 1 else many or word + 's'}"


def truncation_note(omitted: int) -> str:
    return f"\n… output truncated ({omitted} chars omitted) …\n"


def clamp(text: str, limit: int) -> str:
    """Keep the first 3/4 and the last 1/4 of `limit` chars, with an exact note between.

    The tail is kept because tools put their own notes last ("showing lines ...",
    "stopped after ..."), and those must survive the safety net. The note is not counted.
    """
    if len(text) <= limit:
        return text
    head = limit * 3 // 4
    tail = limit - head
    omitted = len(text) - head - tail
    return text[:head] + truncation_note(omitted) + (text[-tail:] if tail else "")
