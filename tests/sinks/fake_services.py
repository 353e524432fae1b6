"""Local stand-ins for the networks a W&B user meets, on 127.0.0.1 only: a proxy or captive portal that answers
HTTP, a black hole that accepts and never answers, a refused port, and a fake W&B that answers the viewer query.
Every server handles a bounded number of connections for a bounded time, then stops by itself."""

from __future__ import annotations

import base64
import http.server
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

MAX_CONNECTIONS = 50
MAX_SECONDS = 60.0
KEY = "0123456789abcdef0123456789abcdef01234567"
VIEWER = {"id": "VXNlcjox", "entity": "tester", "username": "tester"}


class Quiet(http.server.BaseHTTPRequestHandler):
    """A handler that records what it was asked and prints nothing."""

    timeout = 5.0  # a connection that never sends a request is dropped, not waited for

    def log_message(self, *args) -> None:
        pass

    def answer(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def received(self) -> dict:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        request = {"method": self.command, "path": self.path, "authorization": self.headers.get("Authorization"),
                   "body": body}
        self.server.requests.append(request)
        return request


class Portal404(Quiet):
    """A proxy or captive portal that answers 404 to everything."""

    def do_any(self) -> None:
        self.received()
        self.answer(404, b"<html>not found</html>", "text/html")

    do_GET = do_POST = do_HEAD = do_any  # noqa: N815 - the names http.server calls


class PortalLogin(Quiet):
    """A captive portal that answers every request with its login page, status 200."""

    def do_any(self) -> None:
        self.received()
        self.answer(200, b"<html><form>Log in to the guest network</form></html>", "text/html")

    do_GET = do_POST = do_HEAD = do_any  # noqa: N815


class FakeWandb(Quiet):
    """Answers W&B's viewer query as W&B does: the key's user with the right key, 401 without it; 404 to
    anything else (so a real `wandb.init` online fails after the check passed)."""

    def do_POST(self) -> None:  # noqa: N802
        self.respond(self.received())

    def respond(self, request: dict) -> None:
        good = "Basic " + base64.b64encode(f"api:{KEY}".encode()).decode()
        if request["path"] != "/graphql" or b"viewer" not in request["body"]:
            self.answer(404, json.dumps({"errors": [{"message": "not found"}]}).encode())
        elif request["authorization"] != good:
            self.answer(401, json.dumps({"errors": [{"message": "user is not logged in"}]}).encode())
        else:
            self.answer(200, json.dumps({"data": {"viewer": VIEWER}}).encode())

    def do_GET(self) -> None:  # noqa: N802
        self.received()
        self.answer(404, b"{}")


class BoundedServer(http.server.HTTPServer):
    """An HTTP server that records requests and handles at most `MAX_CONNECTIONS` within `MAX_SECONDS`."""

    def __init__(self, handler: type[Quiet]):
        super().__init__(("127.0.0.1", 0), handler)
        self.requests: list[dict] = []
        self.connections = 0
        self.stopping = threading.Event()
        self.timeout = 0.1  # how long one `handle_request` waits for a connection

    def process_request(self, request, client_address) -> None:
        self.connections += 1
        super().process_request(request, client_address)

    def serve_bounded(self) -> None:
        deadline = time.monotonic() + MAX_SECONDS
        while self.connections < MAX_CONNECTIONS and time.monotonic() < deadline and not self.stopping.is_set():
            self.handle_request()


@contextmanager
def http_service(handler: type[Quiet]) -> Iterator[tuple[str, BoundedServer]]:
    """(base URL, server) of an HTTP server on 127.0.0.1 answering with `handler`."""
    server = BoundedServer(handler)
    thread = threading.Thread(target=server.serve_bounded, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", server
    finally:
        server.stopping.set()
        thread.join(5)
        server.server_close()


@contextmanager
def black_hole() -> Iterator[str]:
    """The base URL of a port that accepts connections and never answers (a service or proxy that hangs)."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    stopping, held = threading.Event(), []

    def accept_and_hold() -> None:
        deadline = time.monotonic() + MAX_SECONDS
        while len(held) < MAX_CONNECTIONS and time.monotonic() < deadline and not stopping.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue
        for connection in held:
            connection.close()

    thread = threading.Thread(target=accept_and_hold, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stopping.set()
        thread.join(5)
        listener.close()


def refused_url() -> str:
    """The base URL of a local port nothing listens on (connecting is refused)."""
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


UNRESOLVABLE_URL = "http://rlfit-no-such-host.invalid"
"""A name that never resolves (RFC 6761); `no_dns_for_invalid` answers for it without asking the network."""


def no_dns_for_invalid(monkeypatch) -> None:
    """Resolves `.invalid` names as 'not known' at once, never asking a DNS server; other names as usual."""
    real = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):
        if isinstance(host, str) and host.rstrip(".").endswith(".invalid"):
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
