"""A real HTTP server on 127.0.0.1 for the web tool tests: pages, redirects, big and slow bodies.

Routes are plain functions of the request handler; a test adds its own with `site.route()`.
Handlers that wait use `site.stopping` so stopping the server is never slow.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

Handler = Callable[["_Handler"], None]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # the stdlib's signature
        pass

    @property
    def query(self) -> dict[str, list[str]]:
        return parse_qs(urlsplit(self.path).query)

    def send(self, status: int, body: bytes, ctype: str | None, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        if ctype is not None:
            self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def send_chunked(self, status: int, ctype: str, chunks: Any) -> None:
        """A body without Content-Length: the client only knows its size by reading it."""
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            for data in chunks:
                if self.server.site.stopping.is_set():
                    return
                self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _dispatch(self, method: str) -> None:
        site = self.server.site
        path = urlsplit(self.path).path
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        site.requests.append({"method": method, "path": self.path, "headers": dict(self.headers), "body": body})
        fn = site.routes.get((method, path)) or site.routes.get(("*", path))
        if fn is None:
            self.send(404, b"<html><body><h1>Not Found</h1><p>Nothing lives at " + path.encode() + b".</p></body></html>",
                      "text/html; charset=utf-8")
            return
        fn(self)

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    site: LocalSite

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients hanging up mid-body are part of the tests


class LocalSite:
    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Handler] = {}
        self.requests: list[dict[str, Any]] = []
        self.stopping = threading.Event()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.site = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def url(self, path: str) -> str:
        return self.base + path

    def route(self, path: str, method: str = "GET") -> Callable[[Handler], Handler]:
        def add(fn: Handler) -> Handler:
            self.routes[(method, path)] = fn
            return fn
        return add

    def static(self, path: str, body: bytes | str, ctype: str | None, status: int = 200) -> None:
        data = body.encode() if isinstance(body, str) else body
        self.routes[("GET", path)] = lambda h: h.send(status, data, ctype)

    def json(self, path: str, payload: Any, method: str = "GET") -> None:
        self.routes[(method, path)] = lambda h: h.send(200, json.dumps(payload).encode(), "application/json")

    def start(self) -> LocalSite:
        self._thread.start()
        return self

    def __enter__(self) -> LocalSite:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
