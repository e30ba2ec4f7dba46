"""Run-ending errors: the ones that stop nanohermes with one clear line, a hint and an exit code.

Tool failures are no NanohermesError: they are `ToolError` (here, so that a layer below the tools, the
MCP client, raises it; the tool contract names it: `nanohermes.tools.ToolError`), shown to the model as
an `ERROR: ...` result, and the turn goes on.

    NanohermesError            exit 1 unless a subclass says otherwise
    ├── Cancelled              exit 0  the person cancelled a question (the session picker): no message
    ├── ConfigError            exit 2  bad config file, bad flag value
    ├── UsageError             exit 2  bad command-line usage
    └── EndpointError          exit 1  the model endpoint failed for good
        ├── AuthError                  401/403: the key was refused
        ├── UnreachableError           connection refused, DNS, no connection in time, TLS mix-up
        ├── TimedOutError              connected, but nothing came for request_timeout seconds
        ├── StreamBrokenError          the server was reached; its answer broke off mid-way
        ├── RateLimitedError           429 or a rate-limit error, after the retries
        ├── ServerFailedError          5xx or a server error, after the retries
        ├── ModelNotFoundError         the endpoint does not serve the model
        └── ContextTooLongError        the request does not fit the model's context

`cli.py` catches these once and prints `error: <message>` and `hint: <hint>`.

    OutputClosed               exit 141  stdout's reader went away (`| head`): no message

OutputClosed is no NanohermesError: nothing failed, so the session is kept and nothing is said.
"""

from __future__ import annotations


class NanohermesError(Exception):
    """Base of every run-ending error."""

    exit_code: int = 1

    def __init__(self, message: str, *, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class Cancelled(NanohermesError):
    exit_code = 0


class ConfigError(NanohermesError):
    exit_code = 2


class UsageError(NanohermesError):
    exit_code = 2


class EndpointError(NanohermesError):
    pass


class AuthError(EndpointError):
    pass


class UnreachableError(EndpointError):
    pass


class TimedOutError(EndpointError):
    pass


class StreamBrokenError(EndpointError):
    pass


class RateLimitedError(EndpointError):
    pass


class ServerFailedError(EndpointError):
    pass


class ModelNotFoundError(EndpointError):
    pass


class ContextTooLongError(EndpointError):
    pass


class OutputClosed(Exception):
    """stdout was closed by its reader (`nanohermes -p … | head -c1`). The run ends quietly
    with 141, the status a shell shows for a program that SIGPIPE ended (as `git log | head`
    does); the session is saved as after any other turn."""

    exit_code = 141


class ToolError(Exception):
    """A failure the model should see as `ERROR: <text>`; the turn goes on."""
