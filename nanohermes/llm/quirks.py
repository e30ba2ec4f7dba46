"""Every provider quirk in one table: what a server sends or says that the OpenAI wire does not.

`QUIRKS` lists them, each a `Quirk`: its id, the providers it belongs to, the wire (chat
completions, the Responses API), what it is, the source that documents it, and its data, whose
type is its kind:

- `Shape` (stream shape): a way of splitting or wrapping an answer that code reads. The entry
  names that code (`code`), and the code carries the entry's id in a `# quirk: <id>` comment.
- `Wording` (error wording): the words an error says what it means in. `llm/failures.py`'s
  judgements and `llm/http.py`'s classifier read them through `matcher`.
- `Reasoning` (reasoning field): a field or event the model's thinking comes in, read by the
  chat and Responses parsers.
- `WindowField` (window source): where an endpoint names the model's context window, read by
  `window.py`.
- `Hint` (doctor hint): how doctor tells a local server and the start-up flag it needs for tool
  calls.
- `TextFormat` (text call format): a format a model writes a call in as text, read back by
  `llm/textcalls.py` (whose finders, in `llm/textfinders/`, are keyed by the entry's id).

A quirk is one entry here plus its fake-server test, tagged `@pytest.mark.quirk("<id>")`:
`tests/test_quirks.py` fails while an entry has no such test, a tag names no entry, or an entry
and its code do not name each other. Nothing here imports the rest of nanohermes
but `modes`, where the wire APIs are named.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Literal, TypeVar

from nanohermes.common.modes import WIRES, Wire

BOTH: tuple[Wire, ...] = WIRES
CHAT: tuple[Wire, ...] = ("chat",)
RESPONSES: tuple[Wire, ...] = ("responses",)

# What an error's words say: the request does not fit the window ("overflow"), it is too large
# for a rate limit itself ("too large"), a rate limit, a server failing for now, a refused key,
# plain HTTP sent to a TLS port, a request option the endpoint refuses.
Meaning = Literal["overflow", "too large", "rate limit", "failing", "refused key", "plain http to tls",
                  "option refused"]
# Where the words are looked for: the error's message; its code, status and type ("fields");
# both ("error", message first); the raw text of the answer ("body").
Place = Literal["message", "fields", "error", "body"]


@dataclass(frozen=True, kw_only=True)
class Shape:
    """A shape of the stream or of a body that code handles; `code` is where (a dotted name)."""

    code: str


@dataclass(frozen=True, kw_only=True)
class Wording:
    """Words an error says what it means in: `pattern` is a regular expression searched in
    `looks_at`, ignoring case unless `case`."""

    means: Meaning
    looks_at: Place
    pattern: str
    case: bool = False


@dataclass(frozen=True, kw_only=True)
class Reasoning:
    """Where thinking comes: a text field of a chat delta ("text"), OpenRouter's structured
    details ("details"), a Responses event whose delta is thinking ("event"), or a field of a
    Responses reasoning item that is sent back ("item")."""

    field: str
    form: Literal["text", "details", "event", "item"]
    code: str = ""


@dataclass(frozen=True, kw_only=True)
class WindowField:
    """A field an endpoint names the context window in: `route` answers it, `field` is its
    dotted path in an entry (`*` any key), `label` how the window's source is shown."""

    route: str
    field: str
    label: str
    code: str = ""

    @property
    def source(self) -> str:
        return f"endpoint {self.route} {self.label}"


@dataclass(frozen=True, kw_only=True)
class Hint:
    """A local server doctor recognises (words in its /models owners or Server header, an exact
    owner, its usual port) and what makes its models call tools."""

    server: str
    text: str
    names: tuple[str, ...] = ()
    owners: tuple[str, ...] = ()
    port: int | None = None


@dataclass(frozen=True, kw_only=True)
class TextFormat:
    """A format a call is written in as text: its name and a whole call in it (what the model
    is told when an attempt cannot run); the markers its finder looks for (none when it is found
    inside another format's block, or when it is a `tail`); more strings that open a call in it,
    only held back while they stream (`held`); `special` for reserved tokens, which are looked for
    inside code fences too; the token that may close a JSON call (`closer`); `tail` for a format
    with no marker of its own (a bare JSON call, a pythonic list), taken where it ends the answer
    (a JSON call also inside prose, when it is a complete call of an offered tool)."""

    name: str
    example: str
    markers: tuple[str, ...] = ()
    held: tuple[str, ...] = ()
    special: bool = False
    closer: str = ""
    tail: bool = False


Data = Shape | Wording | Reasoning | WindowField | Hint | TextFormat
D = TypeVar("D", bound=Data)

KINDS: dict[type, str] = {Shape: "stream shape", Wording: "error wording", Reasoning: "reasoning field",
                          WindowField: "window source", Hint: "doctor hint", TextFormat: "text call format"}


@dataclass(frozen=True, kw_only=True)
class Quirk:
    """One entry of the table: a provider's way, where it is documented, and its data."""

    id: str
    providers: tuple[str, ...]
    wires: tuple[Wire, ...]
    what: str
    source: str  # a URL, or the project file that holds the bytes as a provider sends them
    data: Data

    @property
    def kind(self) -> str:
        return KINDS[type(self.data)]

    @property
    def code(self) -> str:
        """Where code handles it beyond reading its data ("" when a generic reader does)."""
        return self.data.code if isinstance(self.data, (Shape, Reasoning, WindowField)) else ""


def _shape(qid: str, providers: tuple[str, ...], what: str, source: str, code: str, wires: tuple[Wire, ...] = CHAT) -> Quirk:
    return Quirk(id=qid, providers=providers, wires=wires, what=what, source=source, data=Shape(code=code))


def _words(qid: str, providers: tuple[str, ...], means: Meaning, looks_at: Place, pattern: str, what: str, source: str,
           case: bool = False, wires: tuple[Wire, ...] = BOTH) -> Quirk:
    return Quirk(id=qid, providers=providers, wires=wires, what=what, source=source,
                 data=Wording(means=means, looks_at=looks_at, pattern=pattern, case=case))


def _window(qid: str, providers: tuple[str, ...], route: str, field: str, label: str, source: str, code: str = "") -> Quirk:
    return Quirk(id=qid, providers=providers, wires=BOTH, what=f"the window as `{field}` on {route}", source=source,
                 data=WindowField(route=route, field=field, label=label, code=code))


def _text(qid: str, providers: tuple[str, ...], source: str, fmt: TextFormat) -> Quirk:
    return Quirk(id=qid, providers=providers, wires=BOTH, what=f"a call written as text: {fmt.name}", source=source,
                 data=fmt)


_CHAT_PY = "nanohermes.llm.chat"
_HTTP_PY = "nanohermes.llm.http"
_SSE_PY = "nanohermes.llm.sse"
_FAILURES_PY = "nanohermes.llm.failures"
_FEED = f"{_CHAT_PY}.CallAssembler.feed"

QUIRKS: tuple[Quirk, ...] = (
    # -- stream shapes: tool calls -------------------------------------------------------
    _shape("calls.parallel-whole-at-index-0", ("Ollama",),
           "parallel calls sent whole, each with its own id, all at index 0",
           "https://github.com/ollama/ollama/issues/15457", _FEED),
    _shape("calls.parallel-streamed-at-index-0", ("SGLang", "vLLM"),
           "parallel calls streamed in pieces one after the other, the next again at index 0 with a new id and name",
           "https://github.com/InternLM/lmdeploy/issues/3412", _FEED),
    _shape("calls.no-index", ("Gemini",), "tool-call fragments without an index",
           "https://github.com/open-webui/computer/issues/224", _FEED),
    _shape("calls.name-on-every-fragment", ("MiniMax via NVIDIA NIM", "Fireworks", "Kimi"),
           "the tool's whole name repeated on every fragment of one call",
           "https://github.com/NousResearch/hermes-agent/pull/12230", _FEED),
    _shape("calls.new-id-on-every-fragment", ("LM Studio",),
           "a new call id on every fragment of one call, the name on the first only",
           "https://github.com/NousResearch/hermes-agent/pull/5331", _FEED),
    _shape("calls.object-arguments", ("llama.cpp", "MiniMax"), "the arguments sent as a JSON object, not as text",
           "https://github.com/ggml-org/llama.cpp/issues/20198", f"{_CHAT_PY}.argument_text"),
    _shape("calls.empty-object-placeholder", ("Gemini",),
           "an opening fragment with `{}` arguments, then the real arguments streamed as text",
           "https://github.com/microsoft/autogen/pull/7549", f"{_CHAT_PY}.joined_arguments"),
    _shape("calls.prefixed-name", ("Kimi K2", "gpt-oss", "Gemini"),
           "the tool's name prefixed (`functions.read_file`, `default_api/read_file`)",
           "https://github.com/MoonshotAI/Kimi-K2/blob/main/docs/tool_call_guidance.md", f"{_CHAT_PY}.known_name"),
    _shape("calls.provider-fields", ("Gemini 3",),
           "fields of the provider's own on a tool call (`extra_content.google.thought_signature`), needed back as sent",
           "https://ai.google.dev/gemini-api/docs/thought-signatures", _FEED),
    _shape("stream.content-parts", ("Mistral",), "the answer's content sent as a list of parts, not as text",
           "https://docs.mistral.ai/capabilities/reasoning/", f"{_CHAT_PY}._text_of"),
    # -- stream shapes: the event stream ---------------------------------------------------
    _shape("stream.comment-keepalive", ("OpenRouter",), "SSE comment lines (`: OPENROUTER PROCESSING`) as keep-alive",
           "https://openrouter.ai/docs/api-reference/streaming", f"{_SSE_PY}.sse_events", BOTH),
    _shape("stream.error-line", ("llama.cpp",), "a failure mid-stream sent on an `error:` line, not as a data event",
           "https://github.com/ggml-org/llama.cpp/pull/16109", f"{_SSE_PY}.sse_events", BOTH),
    _shape("stream.named-error-event", ("Anthropic behind a proxy",),
           "an `event: error` whose data is the error itself, not wrapped in `error`",
           "https://docs.claude.com/en/docs/build-with-claude/streaming", f"{_HTTP_PY}.HttpWire._events", BOTH),
    _shape("stream.done-without-finish-reason", ("Gemini behind OpenAI-compatible proxies", "other compatible servers"),
           "a stream ended by `data: [DONE]` with no chunk naming a finish_reason",
           "https://github.com/alfredapp/openai-workflow/pull/52", f"{_CHAT_PY}.ChatParser.ended"),
    _shape("stream.done-on-responses", ("LiteLLM proxy", "Responses-compatible servers"),
           "a Responses stream ended by `data: [DONE]`, even before `response.completed`",
           "https://github.com/BerriAI/litellm/pull/34095", "nanohermes.llm.responses.ResponsesParser.ended", RESPONSES),
    _shape("body.whole-json-answer", ("servers that ignore `stream`",),
           "a streamed request answered with one whole JSON completion",
           "https://github.com/BaseIntelligence/bounty-challenge/issues/17821", f"{_HTTP_PY}.HttpWire._once", BOTH),
    _shape("body.json-labelled-as-stream", ("proxies",),
           "a whole JSON answer (or error) under the `text/event-stream` label",
           "https://github.com/decolua/9router/issues/3492", f"{_HTTP_PY}.HttpWire._once", BOTH),
    # -- stream shapes: error bodies -------------------------------------------------------
    _shape("error.list-body", ("Gemini",), "an error body that is a list: `[{\"error\": {...}}]`",
           "tests/test_provider_shapes.py", f"{_FAILURES_PY}._error_message", BOTH),
    _shape("error.string-body", ("Ollama",), "an error that is text: `{\"error\": \"prompt too long; ...\"}`",
           "https://github.com/ollama/ollama/blob/main/docs/api.md", f"{_FAILURES_PY}._error_message", BOTH),
    _shape("error.object-body", ("vLLM",), "an error body at the top level, marked `\"object\": \"error\"`",
           "https://github.com/vllm-project/vllm/issues/20409", f"{_FAILURES_PY}.is_error_body", BOTH),
    _shape("error.detail-body", ("vLLM", "SGLang", "LiteLLM proxy"),
           "an error in FastAPI's and pydantic's words: `{\"detail\": ...}` or `msg`",
           "https://fastapi.tiangolo.com/tutorial/handling-errors/", f"{_FAILURES_PY}._error_message", BOTH),
    # -- reasoning -------------------------------------------------------------------------
    Quirk(id="reasoning.reasoning-content", providers=("DeepSeek", "llama.cpp", "SGLang", "vLLM before 0.11"), wires=CHAT,
          what="thinking streamed as `reasoning_content`, needed back on assistant messages with tool calls (DeepSeek)",
          source="https://api-docs.deepseek.com/guides/thinking_mode", data=Reasoning(field="reasoning_content", form="text")),
    _shape("reasoning.on-every-tool-call", ("DeepSeek thinking mode", "Kimi thinking mode"),
           "`reasoning_content` needed back on every assistant message that made tool calls, an empty one included "
           "(else a 400: \"Missing `reasoning_content` field in the assistant message\")",
           "https://api-docs.deepseek.com/guides/thinking_mode#tool-calls", f"{_CHAT_PY}.chat_messages"),
    Quirk(id="reasoning.reasoning", providers=("vLLM 0.11 and later", "Ollama", "OpenRouter"), wires=CHAT,
          what="thinking streamed as `reasoning`", source="https://docs.vllm.ai/en/latest/features/reasoning_outputs.html",
          data=Reasoning(field="reasoning", form="text")),
    Quirk(id="reasoning.details", providers=("OpenRouter",), wires=CHAT,
          what="structured reasoning details streamed in pieces, joined per detail and sent back whole",
          source="https://openrouter.ai/docs/use-cases/reasoning-tokens",
          data=Reasoning(field="reasoning_details", form="details", code=f"{_CHAT_PY}.ChatParser._merge_details")),
    Quirk(id="reasoning.summary-events", providers=("OpenAI",), wires=RESPONSES,
          what="reasoning summaries streamed as `response.reasoning_summary_text.delta`",
          source="https://platform.openai.com/docs/api-reference/responses-streaming",
          data=Reasoning(field="response.reasoning_summary_text.delta", form="event")),
    Quirk(id="reasoning.text-events", providers=("gpt-oss on vLLM", "LM Studio"), wires=RESPONSES,
          what="raw reasoning streamed as `response.reasoning_text.delta`",
          source="https://cookbook.openai.com/articles/gpt-oss/handle-raw-cot",
          data=Reasoning(field="response.reasoning_text.delta", form="event")),
    Quirk(id="reasoning.encrypted-items", providers=("OpenAI",), wires=RESPONSES,
          what="with store=false, reasoning items come back encrypted and go back ahead of their calls, without ids",
          source="https://platform.openai.com/docs/guides/reasoning",
          data=Reasoning(field="encrypted_content", form="item", code="nanohermes.llm.responses.OpenAIResponses.build_request")),
    _shape("reasoning.think-tags", ("DeepSeek R1", "Qwen3", "Seed-OSS", "Magistral", "Gemma 4", "gpt-oss"),
           "thinking written into the answer's text (`<think>`, `<seed:think>`, `[THINK]`, Gemma 4's thought channel, "
           "Harmony's analysis channel): a call there is a draft, never run",
           "https://docs.vllm.ai/en/latest/features/reasoning_outputs.html", "nanohermes.llm.textfinders.drafts.thinking", BOTH),
    # -- request options an endpoint refuses (a 400), dropped once ---------------------------
    _words("request.stream-options-refused", ("Azure OpenAI (older API versions)", "Mistral", "proxies"), "option refused",
           "message", r"stream_options", "`stream_options` refused: sent again without it (no usage in the stream)",
           "https://github.com/QuantumNous/new-api/issues/418", wires=CHAT),
    _words("request.encrypted-reasoning-refused", ("OpenAI models without reasoning",), "option refused", "message",
           r"encrypted", "`include: reasoning.encrypted_content` refused: sent again without it",
           "tests/test_wires.py", wires=RESPONSES),
    # -- error wordings: the context is full -----------------------------------------------
    _words("overflow.openai", ("OpenAI", "DeepSeek", "vLLM"), "overflow", "error", r"context_length_exceeded|maximum context",
           "\"This model's maximum context length is N tokens\", code context_length_exceeded",
           "https://github.com/webtimemachine/wtm2/issues/579"),
    _words("overflow.responses", ("OpenAI",), "overflow", "error", r"context window",
           "\"Your input exceeds the context window of this model\"",
           "https://github.com/dyad-sh/dyad/issues/1672"),
    _words("overflow.context-length", ("LM Studio", "vLLM", "Ollama"), "overflow", "error", r"context[ _]length",
           "\"Input length N exceeds context length M\", \"(context length M)\"",
           "https://github.com/lmstudio-ai/examples/issues/29"),
    _words("overflow.llamacpp", ("llama.cpp",), "overflow", "error", r"exceed_context_size|exceeds the available context",
           "\"request (N tokens) exceeds the available context size\", type exceed_context_size_error",
           "https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md"),
    _words("overflow.vllm", ("vLLM",), "overflow", "error",
           r"too long to fit|is too long and exceeds|longer than the maximum model length|exceeds the max_model_len",
           "\"is too long to fit into the model\", \"The decoder prompt ... is longer than the maximum model length\"",
           "https://github.com/vllm-project/vllm/issues/12165"),
    _words("overflow.gemini", ("Gemini",), "overflow", "error", r"input token count.{0,40}exceeds the maximum",
           "\"The input token count (N) exceeds the maximum number of tokens allowed (M)\"",
           "https://ai.google.dev/gemini-api/docs/troubleshooting"),
    _words("overflow.anthropic", ("Anthropic behind a proxy",), "overflow", "error", r"prompt is too long|exceeds? context limit",
           "\"prompt is too long: N tokens > M maximum\", \"exceed context limit\"",
           "https://github.com/stackblitz-labs/bolt.diy/issues/401"),
    _words("overflow.bedrock", ("Anthropic on Bedrock behind a proxy",), "overflow", "error", r"input is too long",
           "\"Input is too long for requested model.\"", "https://github.com/anthropics/claude-code/issues/8637"),
    _words("overflow.ollama", ("Ollama",), "overflow", "error", r"input length exceeds|prompt too long",
           "\"the input length exceeds the context length\", \"prompt too long; exceeded max context length\"",
           "https://github.com/nano-step/nano-brain/issues/208"),
    _words("overflow.mistral", ("Mistral",), "overflow", "error", r"too large for model",
           "\"Prompt contains N tokens ..., too large for model with M maximum context length\"",
           "https://docs.mistral.ai/api/"),
    _words("overflow.reduce-messages", ("OpenAI", "vLLM", "Groq"), "overflow", "error", r"reduce the length of the messages",
           "\"Please reduce the length of the messages or completion.\"",
           "https://github.com/vllm-project/vllm/issues/20409"),
    _words("overflow.too-many-tokens", ("Ollama", "llama.cpp"), "overflow", "error", r"too many tokens",
           "\"too many tokens\" (no rate limit: that is judged first)", "https://github.com/ollama/ollama/issues/85"),
    _words("too-large.openai", ("OpenAI",), "too large", "message", r"request too large|must be reduced in order to run",
           "a request larger than the per-minute token limit itself: no wait lets it through, a shorter one may",
           "https://platform.openai.com/docs/guides/rate-limits"),
    # -- error wordings: rate limits (retried, never taken for a full context) --------------
    _words("rate-limit.code", ("OpenAI", "Anthropic"), "rate limit", "fields", r"rate_limit",
           "code rate_limit_exceeded (OpenAI), type rate_limit_error (Anthropic)", "https://docs.claude.com/en/api/errors"),
    _words("rate-limit.class-name", ("LiteLLM proxy",), "rate limit", "fields", r"ratelimit|rate limit",
           "the error named by its class (RateLimitError)", "https://docs.litellm.ai/docs/exception_mapping"),
    _words("rate-limit.gemini", ("Gemini",), "rate limit", "fields", r"resource_exhausted", "status RESOURCE_EXHAUSTED",
           "https://ai.google.dev/gemini-api/docs/troubleshooting"),
    _words("rate-limit.reason-phrase", ("proxies",), "rate limit", "fields", r"too_many_requests|too many requests",
           "the HTTP reason phrase copied into the error", "https://www.rfc-editor.org/rfc/rfc6585#section-4"),
    _words("rate-limit.openai-words", ("OpenAI",), "rate limit", "message",
           r"rate[ _-]?limit|\b(tokens|requests) per (min|minute|day)\b",
           "\"Rate limit reached ... on tokens per min\"", "https://platform.openai.com/docs/guides/rate-limits"),
    _words("rate-limit.openai-tpm", ("OpenAI",), "rate limit", "message", r"\b[TR]P[MD]\b",
           "the limit's unit in capitals: TPM, RPM, TPD, RPD", "https://platform.openai.com/docs/guides/rate-limits",
           case=True),
    # -- error wordings: a server failing for now (retried) --------------------------------
    _words("failing.anthropic", ("Anthropic",), "failing", "fields", r"overload", "type overloaded_error (529)",
           "https://docs.claude.com/en/api/errors"),
    _words("failing.openai", ("OpenAI",), "failing", "fields", r"server_error", "type server_error",
           "https://platform.openai.com/docs/guides/error-codes"),
    _words("failing.gemini", ("Gemini",), "failing", "fields", r"unavailable|internal|deadline_exceeded",
           "status UNAVAILABLE, INTERNAL or DEADLINE_EXCEEDED", "https://ai.google.dev/gemini-api/docs/troubleshooting"),
    _words("failing.timeout", ("LiteLLM proxy",), "failing", "fields", r"timeout", "the error named Timeout",
           "https://docs.litellm.ai/docs/exception_mapping"),
    # -- error wordings: the key is refused ------------------------------------------------
    _words("key.openai", ("OpenAI",), "refused key", "fields", r"invalid_api_key", "code invalid_api_key",
           "https://platform.openai.com/docs/guides/error-codes"),
    _words("key.anthropic", ("Anthropic",), "refused key", "fields", r"authentication|permission_error",
           "type authentication_error or permission_error", "https://docs.claude.com/en/api/errors"),
    _words("key.gemini", ("Gemini",), "refused key", "fields", r"unauthenticated|permission_denied",
           "status UNAUTHENTICATED or PERMISSION_DENIED", "https://ai.google.dev/gemini-api/docs/troubleshooting"),
    _words("key.gemini-400", ("Gemini",), "refused key", "message", r"\A(?=.*(?:api key|api_key))(?=.*(?:invalid|not valid))",
           "a refused key as a 400: \"API key not valid. Please pass a valid API key.\"",
           "https://ai.google.dev/gemini-api/docs/troubleshooting"),
    _words("tls.nginx-plain-http", ("nginx in front of the server",), "plain http to tls", "body",
           r"plain http request was sent to https port", "http:// sent to a TLS port: a 400 page, said at once",
           "https://nginx.org/en/docs/http/ngx_http_ssl_module.html#errors"),
    # -- where endpoints name the context window -------------------------------------------
    _window("window.vllm", ("vLLM",), "/models", "max_model_len", "vLLM max_model_len",
            "https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html"),
    _window("window.openrouter", ("OpenRouter", "Together"), "/models", "context_length", "context_length",
            "https://openrouter.ai/docs/api-reference/list-available-models"),
    _window("window.groq", ("Groq",), "/models", "context_window", "context_window", "https://console.groq.com/docs/models"),
    _window("window.mistral", ("Mistral",), "/models", "max_context_length", "max_context_length",
            "https://docs.mistral.ai/api/"),
    _window("window.openrouter-top-provider", ("OpenRouter",), "/models", "top_provider.context_length",
            "top_provider context_length", "https://openrouter.ai/docs/api-reference/list-available-models"),
    _window("window.llamacpp-props", ("llama.cpp",), "/props", "default_generation_settings.n_ctx", "n_ctx (llama.cpp)",
            "https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md", "nanohermes.turn.window.from_llamacpp"),
    _window("window.llamacpp-slots", ("llama.cpp",), "/slots", "n_ctx", "n_ctx (llama.cpp)",
            "https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md", "nanohermes.turn.window.from_llamacpp"),
    _window("window.lmstudio-loaded", ("LM Studio",), "/api/v0/models", "loaded_context_length",
            "loaded_context_length (LM Studio)", "https://lmstudio.ai/docs/api/rest-api"),
    _window("window.lmstudio-max", ("LM Studio",), "/api/v0/models", "max_context_length", "max_context_length (LM Studio)",
            "https://lmstudio.ai/docs/api/rest-api"),
    _window("window.ollama-ps", ("Ollama",), "/api/ps", "models.context_length", "context_length (Ollama)",
            "https://github.com/ollama/ollama/blob/main/docs/api.md", "nanohermes.turn.window.from_ollama_ps"),
    _window("window.ollama-num-ctx", ("Ollama",), "/api/show", "parameters.num_ctx", "num_ctx (Ollama)",
            "https://github.com/ollama/ollama/blob/main/docs/api.md", "nanohermes.turn.window.from_ollama_show"),
    _window("window.ollama-model-info", ("Ollama",), "/api/show", "model_info.*.context_length", "{key} (Ollama)",
            "https://github.com/ollama/ollama/blob/main/docs/api.md", "nanohermes.turn.window.from_ollama_show"),
    # -- doctor: a model that answers the tool probe in text, by server ---------------------
    Quirk(id="hint.llamacpp", providers=("llama.cpp",), wires=BOTH, what="tool calls need llama-server's --jinja",
          source="https://github.com/ggml-org/llama.cpp/blob/master/docs/function-calling.md",
          data=Hint(server="llama.cpp", names=("llama",),
                    text="start llama-server with --jinja (tool calls need the model's chat template)")),
    Quirk(id="hint.vllm", providers=("vLLM",), wires=BOTH, what="tool calls need vLLM's auto tool choice and a parser",
          source="https://docs.vllm.ai/en/latest/features/tool_calling.html",
          data=Hint(server="vllm", names=("vllm",),
                    text="start vLLM with --enable-auto-tool-choice --tool-call-parser <parser for the model> (e.g. hermes)")),
    Quirk(id="hint.ollama", providers=("Ollama",), wires=BOTH, what="tool calls need an Ollama model that supports tools",
          source="https://ollama.com/blog/tool-support",
          data=Hint(server="ollama", names=("ollama",), owners=("library",), port=11434,
                    text="use an Ollama model that supports tools (`ollama show MODEL` lists `tools` under Capabilities)")),
    # -- calls written as text, in the order they are looked for ----------------------------
    _text("text.deepseek", ("DeepSeek V3, R1 and V3.1 on Ollama, llama.cpp, vLLM",),
          "https://docs.vllm.ai/en/latest/features/tool_calling.html",
          TextFormat(name="DeepSeek tool-call tokens", special=True,
                     markers=("<｜tool▁calls▁begin｜>", "<|tool▁calls▁begin|>", "<|tool_calls_begin|>"),
                     example='<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>read_file<｜tool▁sep｜>{"path": "a.py"}'
                             "<｜tool▁call▁end｜><｜tool▁calls▁end｜>")),
    # Also spelled `<|tool_call_section_begin|>` (singular), which vLLM's parser accepts too.
    _text("text.kimi", ("Kimi K2",), "https://github.com/vllm-project/vllm/blob/main/vllm/tool_parsers/kimi_k2_tool_parser.py",
          TextFormat(name="Kimi tool-call tokens", special=True,
                     markers=("<|tool_calls_section_begin|>", "<|tool_call_section_begin|>"), held=("<|tool_call_begin|>",),
                     example='<|tool_calls_section_begin|><|tool_call_begin|>functions.read_file:0'
                             '<|tool_call_argument_begin|>{"path": "a.py"}<|tool_call_end|><|tool_calls_section_end|>')),
    _text("text.kimi-k3", ("Kimi K3",), "https://github.com/vllm-project/vllm/blob/main/vllm/tool_parsers/kimi_k3_tool_parser.py",
          TextFormat(name="Kimi K3 tools channel", special=True, markers=("<|open|>tools<|sep|>",),
                     example='<|open|>tools<|sep|><|open|>call tool="read_file" index="1"<|sep|><|open|>argument key="path" '
                             'type="string"<|sep|>a.py<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>')),
    _text("text.gemma4", ("Gemma 4",), "https://ai.google.dev/gemma/docs/capabilities/text/function-calling-gemma4",
          TextFormat(name="Gemma 4 tool-call tokens", special=True, markers=("<|tool_call>",),
                     example='<|tool_call>call:read_file{path:<|"|>a.py<|"|>}<tool_call|>')),
    _text("text.tool-code", ("Gemma 2", "Gemma 3"), "https://ai.google.dev/gemma/docs/meme-generator",
          TextFormat(name="tool_code block", special=True, markers=("```tool_code",),
                     example='```tool_code\nread_file(path="a.py")\n```')),
    _text("text.hermes", ("Hermes", "Qwen2.5", "Qwen3"), "https://github.com/NousResearch/Hermes-Function-Calling",
          TextFormat(name="Hermes <tool_call> JSON", markers=("<tool_call>",),
                     example='<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}\n</tool_call>')),
    _text("text.qwen3-coder", ("Qwen3-Coder", "Seed-OSS"),
          "https://huggingface.co/Qwen/Qwen3-Coder-480B-A35B-Instruct/blob/main/qwen3coder_tool_parser.py",
          TextFormat(name="Qwen3-Coder XML", markers=("<function=",), held=("<seed:tool_call>",),
                     example="<tool_call>\n<function=read_file>\n<parameter=path>\na.py\n</parameter>\n"
                             "</function>\n</tool_call>")),
    _text("text.invoke", ("MiniMax M2",), "https://docs.vllm.ai/en/latest/features/tool_calling.html",
          TextFormat(name="<invoke> XML", markers=("<invoke name=",), held=("<minimax:tool_call>",),
                     example='<invoke name="read_file">\n<parameter name="path">a.py</parameter>\n</invoke>')),
    _text("text.mistral", ("Mistral",), "https://docs.vllm.ai/en/latest/features/tool_calling.html",
          TextFormat(name="Mistral [TOOL_CALLS]", markers=("[TOOL_CALLS]",),
                     example='[TOOL_CALLS][{"name": "read_file", "arguments": {"path": "a.py"}}]')),
    _text("text.llama", ("Llama 3.1, 3.2, 3.3",), "https://www.llama.com/docs/model-cards-and-prompt-formats/llama3_1/",
          TextFormat(name="Llama JSON call", markers=("<|python_tag|>",), closer="<|eom_id|>",
                     example='<|python_tag|>{"name": "read_file", "parameters": {"path": "a.py"}}')),
    _text("text.granite", ("IBM Granite",), "https://docs.vllm.ai/en/latest/features/tool_calling.html",
          TextFormat(name="JSON call list", markers=("<|tool_call|>",),
                     example='<|tool_call|>[{"name": "read_file", "arguments": {"path": "a.py"}}]')),
    # Told to write the list form it shares with Granite when an attempt cannot run.
    _text("text.command-r", ("Cohere Command R",), "https://docs.cohere.com/docs/tool-use",
          TextFormat(name="JSON call list", markers=("<|START_ACTION|>",), closer="<|END_ACTION|>",
                     example='<|tool_call|>[{"name": "read_file", "arguments": {"path": "a.py"}}]')),
    # The recipient may stand in the role header too (`<|start|>assistant to=functions.x<|channel|>commentary
    # json<|message|>`); the analysis channel is thinking, never a call, whatever it addresses
    # (`llm.textfinders.thinking`).
    _text("text.harmony", ("gpt-oss",), "https://cookbook.openai.com/articles/openai-harmony",
          TextFormat(name="gpt-oss harmony", markers=("to=functions.",), held=("<|start|>", "<|channel|>"),
                     example='<|channel|>commentary to=functions.read_file <|constrain|>json<|message|>'
                             '{"path": "a.py"}<|call|>')),
    _text("text.glm", ("GLM-4.5", "GLM-4.6"), "https://docs.vllm.ai/en/latest/features/tool_calling.html",
          TextFormat(name="GLM <arg_key> XML",
                     example="<tool_call>read_file\n<arg_key>path</arg_key>\n<arg_value>a.py</arg_value>\n</tool_call>")),
    _text("text.functionary", ("Functionary", "Llama 3.1"), "https://github.com/MeetKai/functionary",
          TextFormat(name="<function=...> JSON", example='<function=read_file>{"path": "a.py"}</function>')),
    # -- calls with no marker: where they end the answer (a complete JSON call in prose too) --
    _text("text.json", ("Llama 3.1-3.3", "Llama 4", "models served without a tool parser"),
          "https://github.com/vllm-project/vllm/blob/main/tests/tool_parsers/test_llama3_json_tool_parser.py",
          TextFormat(name="JSON call", tail=True, example='{"name": "read_file", "parameters": {"path": "a.py"}}')),
    _text("text.pythonic", ("Llama 3.2", "Llama 4", "Gemma 3"),
          "https://github.com/vllm-project/vllm/blob/main/tests/tool_parsers/test_pythonic_tool_parser.py",
          TextFormat(name="pythonic call list", tail=True, held=("<|python_start|>",), example='[read_file(path="a.py")]')),
    _text("text.glm4-0414", ("GLM-4-0414", "GLM-Z1"),
          "https://github.com/modelscope/ms-swift/blob/main/swift/plugin/agent_template/glm4.py",
          TextFormat(name="GLM-4 name and JSON", tail=True, held=("<|assistant|>",), example='read_file\n{"path": "a.py"}')),
    # Told to write the whole call, tokens included, when an attempt cannot run.
    _text("text.gemma4-bare", ("Gemma 4",),
          "https://github.com/vllm-project/vllm/blob/main/tests/tool_parsers/test_gemma4_regex_and_bare_calls.py",
          TextFormat(name="Gemma 4 call without its tokens", tail=True, held=("call:",),
                     example='<|tool_call>call:read_file{path:<|"|>a.py<|"|>}<tool_call|>')),
)

BY_ID: dict[str, Quirk] = {q.id: q for q in QUIRKS}


def get(qid: str) -> Quirk:
    return BY_ID[qid]


def entries(kind: type[D], wire: Wire | None = None) -> list[tuple[Quirk, D]]:
    """The entries whose data is a `kind`, in table order (for `wire` only, when given)."""
    return [(q, q.data) for q in QUIRKS if isinstance(q.data, kind) and (wire is None or wire in q.wires)]


def data(qid: str, kind: type[D]) -> D:
    """The data of entry `qid`, which must be a `kind`."""
    found = BY_ID[qid].data
    if not isinstance(found, kind):
        raise TypeError(f"quirk {qid} is a {KINDS[type(found)]}, not a {KINDS[kind]}")
    return found


_NEVER = re.compile(r"(?!)")


@cache
def matcher(means: Meaning, looks_at: Place) -> re.Pattern[str]:
    """One pattern for every wording that `means` something in `looks_at` (one that never
    matches when there is none)."""
    parts = [f"(?{'' if w.case else 'i'}s:{w.pattern})" for _, w in entries(Wording)
             if w.means == means and w.looks_at == looks_at]
    return re.compile("|".join(parts)) if parts else _NEVER


@cache
def pattern(qid: str) -> re.Pattern[str]:
    """The compiled pattern of wording `qid` alone."""
    w = data(qid, Wording)
    return re.compile(w.pattern, re.DOTALL if w.case else re.IGNORECASE | re.DOTALL)


__all__ = ["BOTH", "BY_ID", "CHAT", "KINDS", "QUIRKS", "RESPONSES", "Hint", "Meaning", "Place", "Quirk", "Reasoning",
           "Shape", "TextFormat", "WindowField", "Wire", "Wording", "data", "entries", "get", "matcher", "pattern"]
