"""A `/models` answer that is no model list (a web page, another JSON shape, a redirect): the
REPL's `/model` says which, and a name can still be set unchecked. On a pty, against the
loopback server (doctor's handling of the same answers is in test_doctor_checks.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_repl_pty import Term

from nanohermes.testing import FakeServer, Raw


@pytest.mark.parametrize(("answer", "why"), [
    (Raw(body=b"<html><title>Sign in</title></html>", content_type="text/html"), "not JSON"),
    (Raw(body=json.dumps([{"id": "fake-model"}]).encode(), content_type="application/json"), 'JSON without a "data" list'),
    (Raw(body=b"", status=302, content_type="text/html", headers=(("Location", "https://login.example/"),)),
     "redirected (302)"),
])
def test_model_says_why_the_list_is_missing(workspace: Any, home: Any, answer: Raw, why: str) -> None:
    with FakeServer(models_answer=answer) as s:
        t = Term(workspace, home, s)
        try:
            t.prompt()
            t.type("/model")
            t.wait("model: fake-model")
            t.wait("could not list the endpoint's models (the endpoint's model list is ")
            t.wait(why[:12])  # the screen may wrap the rest
            t.prompt()
            t.type("/model other-model")
            t.wait("model: other-model (from the next call)")
            t.wait("could not check the name against the endpoint")
            t.leave()
        finally:
            if t.child.isalive():
                t.child.terminate(force=True)
