"""Can this run log to W&B online right now? One authenticated request to W&B's API, bounded in time, and the
cause named when the answer is no. No wandb import: the check works (and is tested) without the package.

The request is the GraphQL `viewer` query the wandb client itself sends, with the API key, to `<base URL>/graphql`,
through the proxy the environment names (as wandb does). Only W&B's own answer counts: a proxy or a captive portal
that answers HTTP (a 404, a login page with 200) is not W&B, and a key W&B refuses is not a way to log online.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import ssl
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

DEFAULT_BASE_URL = "https://api.wandb.ai"
VIEWER_QUERY = "query Viewer { viewer { id entity username } }"
"""The smallest form of the viewer query of the wandb client: who does this API key belong to?"""
MAX_ANSWER_BYTES = 1 << 16
PORTAL_HINT = "(a proxy or captive portal?)"
NO_KEY = "no W&B API key: set WANDB_API_KEY or run `wandb login`"


@dataclass(frozen=True)
class Check:
    """The answer: `online`, or `cause`, one short phrase saying why not (e.g. 'DNS name x not resolved')."""

    online: bool
    cause: str = ""


@dataclass(frozen=True)
class Endpoint:
    """Where the check's connection goes: W&B's host, or the proxy's when one applies (`label` names both)."""

    host: str
    port: int
    label: str
    proxied: bool = False

    @property
    def name(self) -> str:
        """The host connected to, said to be the proxy when it is."""
        return f"{self.host} (the proxy)" if self.proxied else self.host

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port} (the proxy)" if self.proxied else f"{self.host}:{self.port}"


def base_url() -> str:
    """W&B's API address as wandb finds it: `WANDB_BASE_URL`, else the one `wandb login --host` saved in wandb's
    settings file, else the public service. The W&B run is started with this address: the one checked."""
    return (os.environ.get("WANDB_BASE_URL") or saved_base_url() or DEFAULT_BASE_URL).rstrip("/")


def saved_base_url() -> str | None:
    """`base_url` from wandb's global settings file (`$WANDB_CONFIG_DIR/settings`, default ~/.config/wandb)."""
    import configparser
    from pathlib import Path

    path = Path(os.environ.get("WANDB_CONFIG_DIR") or "~/.config/wandb").expanduser() / "settings"
    parser = configparser.ConfigParser()
    try:
        parser.read(path)
    except (OSError, configparser.Error):
        return None
    return parser.get("default", "base_url", fallback=None) or None


def api_key(url: str) -> str | None:
    """The API key wandb would use for `url` without asking: `WANDB_API_KEY`, else the .netrc entry for its host."""
    if os.environ.get("WANDB_API_KEY"):
        return os.environ["WANDB_API_KEY"]
    try:
        from wandb.sdk.lib.wbauth import read_netrc_auth
    except ImportError:  # wandb absent, or another version: read .netrc as W&B does (the machine is the host)
        return _netrc_key(url)
    try:
        return read_netrc_auth(host=url) or None
    except Exception:  # a malformed key or URL: W&B could not use it either
        return None


def _netrc_key(url: str) -> str | None:
    import netrc

    try:
        entry = netrc.netrc(os.environ.get("NETRC") or None).authenticators(urlsplit(url).netloc)
    except (OSError, netrc.NetrcParseError):
        return None
    return entry[2] if entry and entry[2] else None


def has_identity_token() -> bool:
    """True when wandb authenticates with an identity token file (`WANDB_IDENTITY_TOKEN_FILE`) instead of a key."""
    return bool(os.environ.get("WANDB_IDENTITY_TOKEN_FILE"))


def check_service(url: str, key: str | None, timeout_s: float) -> Check:
    """Asks W&B at `url` who `key` belongs to; returns within about `timeout_s`, whatever the network does.

    The request runs on a helper thread that is left behind, not waited for, when it takes longer (a name lookup
    cannot be interrupted). With `key` None (an identity token, which only wandb can exchange), any answer of W&B's
    viewer query counts: the check then shows the service is W&B, not that the token is valid.
    """
    if timeout_s <= 0:
        return Check(False, "run.wandb_timeout_s is 0: no time to ask W&B")
    endpoint = endpoint_for(url)
    answers: list[Check] = []
    resolved = threading.Event()

    def ask() -> None:
        answers.append(ask_viewer(url, key, timeout_s, endpoint, resolved))

    thread = threading.Thread(target=ask, name="rlfit-wandb-check", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if answers:
        return answers[0]
    if not resolved.is_set():
        return Check(False, f"DNS name {endpoint.name} not resolved within {timeout_s:g}s")
    return Check(False, f"no answer from {endpoint.label} within {timeout_s:g}s")


def endpoint_for(url: str) -> Endpoint:
    """The host and port a request to `url` connects to, honouring the proxy settings of the environment."""
    parts = urlsplit(url)
    default_port = 443 if parts.scheme == "https" else 80
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxy and not urllib.request.proxy_bypass(parts.hostname or ""):
        via = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        return Endpoint(via.hostname or "", via.port or (443 if via.scheme == "https" else 80),
                        f"{parts.netloc} via proxy {via.netloc}", proxied=True)
    return Endpoint(parts.hostname or "", parts.port or default_port, parts.netloc)


def ask_viewer(url: str, key: str | None, timeout_s: float, endpoint: Endpoint, resolved: threading.Event) -> Check:
    """One viewer query (name lookup first, so that a failed lookup is named as such); sets `resolved` after it."""
    try:
        socket.getaddrinfo(endpoint.host, endpoint.port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return Check(False, f"DNS name {endpoint.name} not resolved")
    except (OSError, UnicodeError) as error:
        return Check(False, f"cannot look up {endpoint.name}: {short(error)}")
    resolved.set()
    headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": "rlfit"}
    if key:
        headers["Authorization"] = "Basic " + base64.b64encode(f"api:{key}".encode()).decode()
    request = urllib.request.Request(f"{url}/graphql", data=json.dumps({"query": VIEWER_QUERY}).encode(),
                                     headers=headers, method="POST")
    try:
        # a fresh opener reads the proxy settings now (`urlopen` keeps those of its first call)
        with urllib.request.build_opener().open(request, timeout=timeout_s) as response:
            return judge_answer(response.status, response.read(MAX_ANSWER_BYTES), key, endpoint.label)
    except urllib.error.HTTPError as error:
        return judge_answer(error.code, b"", key, endpoint.label)
    except (urllib.error.URLError, OSError, ValueError) as error:
        return Check(False, network_cause(error, endpoint, timeout_s))


def judge_answer(status: int, body: bytes, key: str | None, label: str) -> Check:
    """Online only for W&B's own answer naming the key's user (any viewer answer when there is no key)."""
    if status in (401, 403) and key:
        return Check(False, f"API key rejected by {label} (HTTP {status}): run `wandb login --relogin`")
    if status != 200:
        return Check(False, f"HTTP {status} from {label} {PORTAL_HINT}")
    data = graphql_data(body)
    if data is None or "viewer" not in data:
        return Check(False, f"HTTP 200 from {label} is not W&B's answer {PORTAL_HINT}")
    if key and not isinstance(data["viewer"], dict):
        return Check(False, f"API key rejected by {label} (no user for it): run `wandb login --relogin`")
    return Check(True)


def graphql_data(body: bytes) -> dict[str, Any] | None:
    """The `data` object of a GraphQL answer, or None when `body` is not one."""
    try:
        answer = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    data = answer.get("data") if isinstance(answer, dict) else None
    return data if isinstance(data, dict) else None


def network_cause(error: BaseException, endpoint: Endpoint, timeout_s: float) -> str:
    """What went wrong on the way to W&B, in words a user can act on."""
    reason = error.reason if isinstance(error, urllib.error.URLError) else error
    if isinstance(reason, socket.gaierror):
        return f"DNS name {endpoint.name} not resolved"
    if isinstance(reason, ConnectionRefusedError):
        return f"connection refused by {endpoint.address}"
    if isinstance(reason, TimeoutError | socket.timeout):
        return f"no answer from {endpoint.label} within {timeout_s:g}s"
    if isinstance(reason, ssl.SSLError | ssl.CertificateError):
        return f"TLS with {endpoint.label} failed: {short(reason)} {PORTAL_HINT}"
    if isinstance(reason, ConnectionResetError):
        return f"connection reset by {endpoint.label}"
    return f"cannot reach {endpoint.label}: {short(reason)}"


def short(error: BaseException | str) -> str:
    """An exception (or its reason) as one short line."""
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= 200 else text[:197] + "..."
