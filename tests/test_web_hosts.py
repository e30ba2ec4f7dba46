"""web_fetch hosts: canonical forms for every IP spelling, names judged by the addresses they
resolve to, each redirect hop checked, and the question per host (real HTTP on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from localweb import LocalSite

from nanohermes.config import Config
from nanohermes.common.events import ApprovalRequest, RecordingUI
from nanohermes.guard.hosts import canonical_host, canonical_ip, resolve
from nanohermes.common.messages import ToolCall
from nanohermes.guard.permissions import Policy, Rule
from nanohermes.turn.runtime import DENIED, Runtime
from nanohermes.testing import FakeServer, Reply, call, tool_reply
from nanohermes.tools.web import WebFetch

R = Rule.parse
SPELLINGS = ["127.0.0.1", "127.1", "2130706433", "0x7f.1", "0x7f000001", "0177.0.0.1", "017700000001",
             "127.0.0.1.", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]"]


@pytest.fixture
def site() -> Iterator[LocalSite]:
    s = LocalSite()
    s.static("/notes.txt", "first line\n", "text/plain")
    with s:
        yield s


def port(site: LocalSite) -> int:
    return int(site.url("/").rsplit(":", 1)[1].split("/")[0])


def fetch(ws: Path, url: str, policy: Policy, *, config: Config | None = None,
          ui: RecordingUI | None = None) -> str:
    rt = Runtime(tools=[WebFetch()], config=config or Config(), workspace=ws, ui=ui or RecordingUI(), policy=policy)
    [msg] = asyncio.run(rt.run_calls([ToolCall(id="c", name="web_fetch", arguments=json.dumps({"url": url}))]))
    return msg.content or ""


@pytest.mark.parametrize("text", SPELLINGS)
def test_every_spelling_of_an_ip_has_one_canonical_form(text: str) -> None:
    assert canonical_host(text) == "127.0.0.1"


@pytest.mark.parametrize("text,canon", [
    ("Docs.Python.org", "docs.python.org"), ("example.com.", "example.com"), ("[::1]", "::1"),
    ("0:0:0:0:0:0:0:1", "::1"), ("1.2.3", "1.2.0.3"), ("1e100.net", "1e100.net"), ("256.1.1.1", "256.1.1.1"),
])
def test_canonical_names_and_addresses(text: str, canon: str) -> None:
    assert canonical_host(text) == canon
    assert (canonical_ip(text) is None) is (canon in ("docs.python.org", "example.com", "1e100.net", "256.1.1.1"))


def test_a_name_resolves_to_its_addresses() -> None:
    assert "127.0.0.1" in resolve("localhost")
    assert resolve("0x7f.1") == ("127.0.0.1",)
    assert resolve("no-such-host.invalid") == ()


@pytest.mark.parametrize("host", SPELLINGS)
def test_denied_hosts_catch_every_spelling_before_any_request(site: LocalSite, workspace: Path, host: str) -> None:
    cfg = Config.from_dict({"web_fetch": {"denied_hosts": ["127.0.0.1", "localhost"]}})
    out = fetch(workspace, f"http://{host}:{port(site)}/notes.txt", Policy(mode="goal"), config=cfg)
    assert out.startswith("ERROR: host 127.0.0.1 ") and " web_fetch.denied_hosts (127.0.0.1);" in out, out
    assert site.requests == []


@pytest.mark.parametrize("host", SPELLINGS)
def test_a_deny_rule_catches_every_spelling(site: LocalSite, workspace: Path, host: str) -> None:
    policy = Policy(mode="goal", deny=(R("web_fetch(domain:127.1)"),))
    out = fetch(workspace, f"http://{host}:{port(site)}/notes.txt", policy)
    assert out == "ERROR: denied by rule web_fetch(domain:127.1)"
    assert site.requests == []


def test_a_name_that_resolves_to_a_denied_address_is_denied(site: LocalSite, workspace: Path) -> None:
    cfg = Config.from_dict({"web_fetch": {"denied_hosts": ["0x7f.0.0.1"]}})
    out = fetch(workspace, f"http://localhost:{port(site)}/notes.txt", Policy(mode="goal"), config=cfg)
    assert out.startswith("ERROR: host localhost (") and " 127.0.0.1)" in out, out  # the address it resolves to
    assert " web_fetch.denied_hosts (0x7f.0.0.1);" in out
    cidr = Config.from_dict({"web_fetch": {"denied_hosts": ["127.0.0.0/8"]}})
    out = fetch(workspace, f"http://localhost:{port(site)}/notes.txt", Policy(mode="goal"), config=cidr)
    assert out.startswith("ERROR: host localhost (") and " web_fetch.denied_hosts (127.0.0.0/8)" in out, out
    rule = Policy(mode="goal", deny=(R("web_fetch(domain:127.0.0.1)"),))
    assert fetch(workspace, f"http://localhost:{port(site)}/notes.txt", rule) == (
        "ERROR: denied by rule web_fetch(domain:127.0.0.1)")
    assert site.requests == []


def test_allowed_hosts_do_not_grant_by_address(site: LocalSite, workspace: Path) -> None:
    cfg = Config.from_dict({"web_fetch": {"allowed_hosts": ["127.0.0.1"]}})
    assert fetch(workspace, f"http://0x7f.1:{port(site)}/notes.txt", Policy(mode="goal"), config=cfg).endswith(
        "first line\n")
    out = fetch(workspace, f"http://localhost:{port(site)}/notes.txt", Policy(mode="goal"), config=cfg)
    assert out.startswith("ERROR: host localhost ") and " web_fetch.allowed_hosts (127.0.0.1)" in out, out


# -- redirects -----------------------------------------------------------------------------
def test_a_redirect_hop_is_judged_by_the_rules_of_its_own_host(site: LocalSite, workspace: Path) -> None:
    target = f"http://localhost:{port(site)}/notes.txt"
    site.routes[("GET", "/away")] = lambda h: h.send(302, b"", "text/plain", {"Location": target})
    start = site.url("/away")
    # Allowed for 127.0.0.1 only: the hop to localhost would be asked, which cannot happen mid-fetch.
    out = fetch(workspace, start, Policy(allow=(R("web_fetch(domain:127.0.0.1)"),)))
    assert out.startswith(f"ERROR: {start} redirects to {target}, ") and "needs approval" in out, out
    denied = Policy(mode="goal", deny=(R("web_fetch(domain:localhost)"),))
    out = fetch(workspace, start, denied)
    assert out.startswith(f"ERROR: {start} redirects to {target}, ") and " web_fetch(domain:localhost);" in out, out
    assert [r["path"] for r in site.requests] == ["/away", "/away"]  # the hop itself was never requested
    both = Policy(allow=(R("web_fetch(domain:127.0.0.1)"), R("web_fetch(domain:localhost)")))
    assert fetch(workspace, start, both).endswith("first line\n")
    assert fetch(workspace, start, Policy(mode="goal")).endswith("first line\n")


def test_a_redirect_to_a_denied_address_spelled_otherwise_is_refused(site: LocalSite, workspace: Path) -> None:
    site.routes[("GET", "/away")] = lambda h: h.send(302, b"", "text/plain",
                                                     {"Location": f"http://[0:0:0::0:1]:{port(site)}/notes.txt"})
    cfg = Config.from_dict({"web_fetch": {"denied_hosts": ["::1"]}})
    out = fetch(workspace, site.url("/away"), Policy(mode="goal"), config=cfg)
    assert out.startswith("ERROR: host ::1 ") and " web_fetch.denied_hosts (::1);" in out, out
    assert out.endswith(f" {site.url('/away')})")
    assert [r["path"] for r in site.requests] == ["/away"]


# -- the question per host -----------------------------------------------------------------
@pytest.mark.parametrize("mode", ["default", "accept-edits"])
def test_each_host_is_asked_once_and_always_remembers_the_domain(site: LocalSite, workspace: Path, mode: str) -> None:
    ui = RecordingUI(answers=["deny", "always"])
    rt = Runtime(tools=[WebFetch()], config=Config(), workspace=workspace, ui=ui, policy=Policy(mode=mode))

    def get(url: str) -> str:
        [msg] = asyncio.run(rt.run_calls([ToolCall(id="c", name="web_fetch", arguments=json.dumps({"url": url}))]))
        return msg.content or ""

    assert get(site.url("/notes.txt")) == DENIED
    assert site.requests == []
    assert get(site.url("/notes.txt")).endswith("first line\n")
    assert get(f"http://127.1:{port(site)}/notes.txt").endswith("first line\n")  # the same host, spelled otherwise
    reqs = ui.of(ApprovalRequest)
    assert [(r.tool, r.rule) for r in reqs] == [("web_fetch", "web_fetch(domain:127.0.0.1)")] * 2
    assert all(r.reason.startswith("fetches from 127.0.0.1,") for r in reqs)
    [learned] = [line for line in rt.permissions_report() if "web_fetch(domain:127.0.0.1)" in line]
    assert learned.split()[:2] == ["allow", "web_fetch(domain:127.0.0.1)"] and "learned" in learned
    assert get(f"http://localhost:{port(site)}/notes.txt") == DENIED  # another host: asked again
    assert len(ui.of(ApprovalRequest)) == 3


@pytest.mark.parametrize("policy", [
    Policy(allow=(R("web_fetch(domain:127.0.0.1)"),)), Policy(allow=(R("web_fetch(domain:0x7f.1)"),)),
    Policy(allow=(R("web_fetch"),)), Policy(mode="goal"), Policy(auto_approve=True), Policy(mode="plan"),
], ids=["rule", "rule-other-spelling", "whole-tool", "goal", "yes", "plan"])
def test_what_skips_the_question(site: LocalSite, workspace: Path, policy: Policy) -> None:
    ui = RecordingUI()
    assert fetch(workspace, site.url("/notes.txt"), policy, ui=ui).endswith("first line\n")
    assert ui.of(ApprovalRequest) == []


def test_without_a_terminal_an_unknown_host_is_refused(turn, server: FakeServer, site: LocalSite) -> None:
    server.add(tool_reply(call("web_fetch", {"url": site.url("/notes.txt")}, id="f")), Reply(text="ok"))
    r = turn("-p", "fetch it", server=server)
    assert r.code == 0, r.err
    assert server.requests[1]["messages"][-1]["content"] == DENIED
    assert site.requests == []
    server.add(tool_reply(call("web_fetch", {"url": site.url("/notes.txt")}, id="g")), Reply(text="ok"))
    r = turn("-p", "fetch it", server=server, config={"permissions": {"allow": ["web_fetch(domain:127.0.0.1)"]}})
    assert r.code == 0, r.err
    assert server.requests[3]["messages"][-1]["content"].endswith("first line\n")


def test_the_request_goes_to_the_address_that_was_checked(site: LocalSite, workspace: Path) -> None:
    """The name is not looked up again after the check (a resolver answering otherwise the
    second time cannot redirect the request): here it cannot be resolved at all, yet the
    fetch reaches the address the Target holds, with the name in the Host header."""
    from nanohermes.common.budget import Limits
    from nanohermes.guard.permissions import Target
    from nanohermes.tools import Attempt, ToolContext

    url = f"http://no-such-host.invalid:{port(site)}/notes.txt"
    target = Target(kind="host", effect="read", subjects=("no-such-host.invalid",), addresses=("127.0.0.1",))
    ctx = ToolContext(workspace=workspace, limits=Limits(), config=Config())
    tool = WebFetch()
    out = asyncio.run(tool.run(tool.parse({"url": url}), ctx, Attempt(target=target)))
    assert out == f"URL: {url} (200, text/plain)\n\nfirst line\n"
    assert [r["headers"]["Host"] for r in site.requests] == [f"no-such-host.invalid:{port(site)}"]
