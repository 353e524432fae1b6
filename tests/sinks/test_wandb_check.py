"""The W&B online check against local stand-ins of real networks (a proxy or captive portal, a black hole, a
refused port, a name that does not resolve, a fake W&B): the answer, the cause it names, and its bound in time.
Needs neither wandb nor a network."""

from __future__ import annotations

import base64
import json
import threading
import time

import pytest

from rlfit.sinks.wandb_check import VIEWER_QUERY, Check, base_url, check_service
from tests.sinks.fake_services import (KEY, UNRESOLVABLE_URL, FakeWandb, Portal404, PortalLogin, Quiet, black_hole,
                                       http_service, no_dns_for_invalid, refused_url)

BOUND_S = 1.5
MARGIN_S = 2.0
"""Slack for a loaded machine: the failures guarded against take 10 s or more."""


@pytest.fixture
def no_proxy(monkeypatch):
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy", "no_proxy",
                 "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def timed_check(url: str, key: str | None = KEY, timeout_s: float = BOUND_S) -> tuple[Check, float]:
    start = time.monotonic()
    check = check_service(url, key, timeout_s)
    return check, time.monotonic() - start


def test_a_fake_wandb_answering_the_viewer_query_for_the_key_is_online(no_proxy):
    with http_service(FakeWandb) as (url, server):
        check, took = timed_check(url)
    assert check == Check(True) and took < BOUND_S + MARGIN_S
    [request] = server.requests
    assert request["method"] == "POST" and request["path"] == "/graphql"
    assert json.loads(request["body"]) == {"query": VIEWER_QUERY}
    assert base64.b64decode(request["authorization"].removeprefix("Basic ")) == f"api:{KEY}".encode()


def test_a_key_wandb_refuses_is_named_as_such(no_proxy):
    with http_service(FakeWandb) as (url, _):
        check, _ = timed_check(url, key="f" * 40)
    host = url.removeprefix("http://")
    assert check == Check(False, f"API key rejected by {host} (HTTP 401): run `wandb login --relogin`")


class AnonymousViewer(Quiet):
    """W&B's answer to a viewer query it cannot tie to a user: 200, `viewer` null."""

    def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
        self.received()
        self.answer(200, json.dumps({"data": {"viewer": None}}).encode())


def test_a_viewer_answer_without_a_user_rejects_a_key_and_passes_an_identity_token(no_proxy):
    with http_service(AnonymousViewer) as (url, server):
        with_key, _ = timed_check(url)
        token_only, _ = timed_check(url, key=None)
    assert with_key == Check(False, f"API key rejected by {url.removeprefix('http://')} (no user for it): run "
                                    "`wandb login --relogin`")
    assert token_only == Check(True)
    assert server.requests[1]["authorization"] is None


def test_a_proxy_or_portal_answering_404_is_not_wandb(no_proxy):
    with http_service(Portal404) as (url, server):
        check, took = timed_check(url)
    assert check == Check(False, f"HTTP 404 from {url.removeprefix('http://')} (a proxy or captive portal?)")
    assert took < BOUND_S + MARGIN_S and len(server.requests) == 1


def test_a_captive_portal_login_page_with_status_200_is_not_wandb(no_proxy):
    with http_service(PortalLogin) as (url, _):
        check, _ = timed_check(url)
    assert check == Check(False, f"HTTP 200 from {url.removeprefix('http://')} is not W&B's answer (a proxy or "
                                 "captive portal?)")


def test_a_black_hole_is_given_up_within_the_bound(no_proxy):
    with black_hole() as url:
        check, took = timed_check(url)
    assert check == Check(False, f"no answer from {url.removeprefix('http://')} within {BOUND_S:g}s")
    assert BOUND_S - 0.1 <= took < BOUND_S + MARGIN_S


def test_a_refused_port_is_named_at_once(no_proxy):
    url = refused_url()
    check, took = timed_check(url)
    assert check == Check(False, f"connection refused by {url.removeprefix('http://')}")
    assert took < MARGIN_S


def test_a_name_that_does_not_resolve_is_named_as_a_dns_failure(no_proxy):
    no_dns_for_invalid(no_proxy)
    check, took = timed_check(UNRESOLVABLE_URL)
    assert check == Check(False, "DNS name rlfit-no-such-host.invalid not resolved")
    assert took < MARGIN_S


def test_a_name_lookup_that_hangs_is_given_up_within_the_bound_and_named(no_proxy):
    import socket

    released = threading.Event()

    def hanging_getaddrinfo(*args, **kwargs):
        released.wait(BOUND_S + 5)  # a resolver that does not answer (bounded, so the thread ends by itself)
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    no_proxy.setattr(socket, "getaddrinfo", hanging_getaddrinfo)
    try:
        check, took = timed_check(UNRESOLVABLE_URL)
    finally:
        released.set()
    assert check == Check(False, f"DNS name rlfit-no-such-host.invalid not resolved within {BOUND_S:g}s")
    assert BOUND_S - 0.1 <= took < BOUND_S + MARGIN_S


def test_through_a_proxy_the_proxy_is_asked_and_named(no_proxy):
    with http_service(Portal404) as (proxy, server):
        no_proxy.setenv("http_proxy", proxy)
        check, _ = timed_check("http://api.wandb.invalid")  # never resolved here: the proxy would
    via = proxy.removeprefix("http://")
    assert check == Check(False, f"HTTP 404 from api.wandb.invalid via proxy {via} (a proxy or captive portal?)")
    assert server.requests[0]["path"] == "http://api.wandb.invalid/graphql"


def test_an_unresolvable_proxy_is_named(no_proxy):
    no_dns_for_invalid(no_proxy)
    no_proxy.setenv("https_proxy", "http://proxy.corp.invalid:3128")
    check, _ = timed_check("https://api.wandb.ai")
    assert check == Check(False, "DNS name proxy.corp.invalid (the proxy) not resolved")


def test_no_time_to_ask_is_offline_without_asking(no_proxy):
    with http_service(FakeWandb) as (url, server):
        check, _ = timed_check(url, timeout_s=0)
    assert not check.online and "run.wandb_timeout_s is 0" in check.cause and server.requests == []


def test_the_base_url_is_the_environment_s_else_the_one_wandb_login_saved(no_proxy, tmp_path):
    no_proxy.delenv("WANDB_BASE_URL", raising=False)
    no_proxy.setenv("WANDB_CONFIG_DIR", str(tmp_path))
    assert base_url() == "https://api.wandb.ai"
    (tmp_path / "settings").write_text("[default]\nbase_url = https://wandb.example.org/\n")
    assert base_url() == "https://wandb.example.org"
    no_proxy.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")
    assert base_url() == "http://127.0.0.1:9"
