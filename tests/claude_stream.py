"""A parser of Claude Code's stream-json, written from the message types its Agent SDK
publishes (`SDKMessage`: SDKSystemMessage, SDKAssistantMessage, SDKUserMessage,
SDKResultMessage, SDKToolProgressMessage, SDKPartialAssistantMessage), for checking that
nanohermes's output reads as Claude Code's does. Fields the types require are required here, with their types; fields they
do not name are allowed (so are nanohermes's own, beside them). A line of a type Claude Code
does not use is skipped, as the SDK's own parser skips it; a line of a type it does use must
match that type whole.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class McpServerStatus(_Open):
    name: str
    status: str


class SystemInit(_Open):
    type: Literal["system"]
    subtype: Literal["init"]
    uuid: str
    session_id: str
    apiKeySource: str
    cwd: str
    tools: list[str]
    mcp_servers: list[McpServerStatus]
    model: str
    permissionMode: Literal["default", "acceptEdits", "bypassPermissions", "plan", "dontAsk"]
    slash_commands: list[str]
    output_style: str


class TextBlock(_Open):
    type: Literal["text"]
    text: str


class ThinkingBlock(_Open):
    type: Literal["thinking"]
    thinking: str
    signature: str


class ToolUseBlock(_Open):
    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, Any]


class ToolResultBlock(_Open):
    type: Literal["tool_result"]
    tool_use_id: str
    content: str | list[dict[str, Any]]
    is_error: bool | None = None


class Usage(_Open):
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int | None
    cache_read_input_tokens: int | None


AssistantBlock = Annotated[TextBlock | ThinkingBlock | ToolUseBlock, Field(discriminator="type")]
UserBlock = Annotated[TextBlock | ToolResultBlock, Field(discriminator="type")]


class APIAssistantMessage(_Open):
    id: str
    type: Literal["message"]
    role: Literal["assistant"]
    model: str
    content: list[AssistantBlock]
    stop_reason: Literal["end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal"] | None
    stop_sequence: str | None
    usage: Usage


class AssistantMessage(_Open):
    type: Literal["assistant"]
    uuid: str
    session_id: str
    parent_tool_use_id: str | None
    message: APIAssistantMessage


class APIUserMessage(_Open):
    role: Literal["user"]
    content: str | list[UserBlock]


class UserMessage(_Open):
    type: Literal["user"]
    session_id: str
    parent_tool_use_id: str | None
    message: APIUserMessage


class PermissionDenial(_Open):
    tool_name: str
    tool_use_id: str
    tool_input: dict[str, Any]


class NonNullableUsage(_Open):
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int


class _Result(_Open):
    type: Literal["result"]
    uuid: str
    session_id: str
    duration_ms: int | float
    duration_api_ms: int | float
    is_error: bool
    num_turns: int
    total_cost_usd: int | float
    usage: NonNullableUsage
    permission_denials: list[PermissionDenial]


class ResultSuccess(_Result):
    subtype: Literal["success"]
    result: str


class ResultError(_Result):
    subtype: Literal["error_max_turns", "error_during_execution", "error_max_budget_usd",
                     "error_max_structured_output_retries"]


class ToolProgress(_Open):
    type: Literal["tool_progress"]
    tool_use_id: str
    tool_name: str
    parent_tool_use_id: str | None
    elapsed_time_seconds: int | float
    uuid: str
    session_id: str


# --include-partial-messages: the Messages API's raw stream events, each wrapped as an
# SDKPartialAssistantMessage.
class MessageStart(_Open):
    type: Literal["message_start"]
    message: APIAssistantMessage


class ContentBlockStart(_Open):
    type: Literal["content_block_start"]
    index: int
    content_block: AssistantBlock


class TextDelta(_Open):
    type: Literal["text_delta"]
    text: str


class ThinkingDelta(_Open):
    type: Literal["thinking_delta"]
    thinking: str


class InputJsonDelta(_Open):
    type: Literal["input_json_delta"]
    partial_json: str


class ContentBlockDelta(_Open):
    type: Literal["content_block_delta"]
    index: int
    delta: Annotated[TextDelta | ThinkingDelta | InputJsonDelta, Field(discriminator="type")]


class ContentBlockStop(_Open):
    type: Literal["content_block_stop"]
    index: int


class MessageDeltaBody(_Open):
    stop_reason: Literal["end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal"] | None
    stop_sequence: str | None


class MessageDeltaUsage(_Open):
    output_tokens: int


class MessageDelta(_Open):
    type: Literal["message_delta"]
    delta: MessageDeltaBody
    usage: MessageDeltaUsage


class MessageStop(_Open):
    type: Literal["message_stop"]


RawEvent = Annotated[MessageStart | ContentBlockStart | ContentBlockDelta | ContentBlockStop | MessageDelta | MessageStop,
                     Field(discriminator="type")]


class StreamEvent(_Open):
    type: Literal["stream_event"]
    event: RawEvent
    parent_tool_use_id: str | None
    uuid: str
    session_id: str


Result = Annotated[ResultSuccess | ResultError, Field(discriminator="subtype")]
# Every message type of the SDK's union; anything else is not Claude Code's.
CLAUDE_TYPES = frozenset({"system", "assistant", "user", "result", "stream_event", "tool_progress", "auth_status",
                          "rate_limit_event", "conversation_reset", "control_request", "control_response",
                          "control_cancel_request", "keep_alive", "tool_use_summary", "prompt_suggestion"})
_RESULT = TypeAdapter(Result)
_BY_TYPE: dict[str, Any] = {"assistant": TypeAdapter(AssistantMessage), "user": TypeAdapter(UserMessage),
                            "tool_progress": TypeAdapter(ToolProgress), "stream_event": TypeAdapter(StreamEvent)}

Message = SystemInit | AssistantMessage | UserMessage | ResultSuccess | ResultError | ToolProgress | StreamEvent


def parse_line(line: str) -> Message | None:
    """One line of stream-json as Claude Code's message it is; None for a type it does not use.
    Raises pydantic's ValidationError for a line of Claude Code's types that does not match."""
    data = json.loads(line)
    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
        raise ValueError(f"a stream-json line is a JSON object with a `type`: {line[:200]}")
    kind = data["type"]
    if kind not in CLAUDE_TYPES:
        return None
    if kind == "system":
        if data.get("subtype") == "init":
            return SystemInit.model_validate(data)
        raise ValueError(f"a system message of a subtype this parser does not model: {data.get('subtype')!r}")
    if kind == "result":
        parsed: Message = _RESULT.validate_python(data)
        return parsed
    if kind in _BY_TYPE:
        out: Message = _BY_TYPE[kind].validate_python(data)
        return out
    raise ValueError(f"{kind!r} is a Claude Code message type nanohermes must not print")


def parse_stream(text: str) -> tuple[list[Message], list[dict[str, Any]]]:
    """Every line: Claude Code's messages, parsed, and the other lines as they are."""
    messages: list[Message] = []
    others: list[dict[str, Any]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parsed = parse_line(line)
        if parsed is None:
            others.append(json.loads(line))
        else:
            messages.append(parsed)
    return messages, others
