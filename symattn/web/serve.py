"""``symattn serve``: a local web page to edit the numbers and watch the derivation and the check.

This module is the command: it checks the address, listens, prints the page's address (and opens it),
and runs :func:`symattn.web.app.create_app`'s application under uvicorn until Ctrl-C.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from symattn.input.errors import SymattnError, shown
from symattn.input.limits import REQUEST_SECONDS
from symattn.web.app import create_app, web_extra


class ServeError(SymattnError, ValueError):
    """symattn serve cannot start as asked (address, port)."""


def _is_loopback(host: str) -> bool:
    import ipaddress
    import socket

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        # an IP address for the internet families (the only ones a host name resolves to)
        found = {info[4][0] for info in socket.getaddrinfo(host, None) if isinstance(info[4][0], str)}
    except (OSError, UnicodeError):
        raise ServeError(f"--host {shown(host)}: cannot resolve this name") from None
    return bool(found) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in found)


def _listen(host: str, port: int):
    import socket

    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        raise ServeError(f"--host {shown(host)}: cannot resolve this name") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ServeError(f"--port {port}: cannot listen on {shown(host)}: {exc.strerror or exc}") from None
    sock.set_inheritable(False)
    return sock


def _initial(path: str | None) -> dict[str, Any] | None:
    """The spec the page opens with, checked now so that a bad file stops the command (exit 2)."""
    if path is None:
        return None
    from symattn.input.files import read_table
    from symattn.input.spec import spec_from_mapping

    data = read_table(path)
    spec_from_mapping(data, path)
    return data


def serve(args) -> int:
    """Run the server until Ctrl-C. Prints the page's address first."""
    host = args.host
    if not host or not host.strip():
        raise ServeError("--host: empty")
    loopback = _is_loopback(host)
    if not loopback and not args.allow_remote:
        raise ServeError(
            f"--host {shown(host)} is not a loopback address: anyone who can reach it could use the "
            "page; add --allow-remote to listen there anyway"
        )
    web_extra()
    import uvicorn

    initial = _initial(args.spec)
    seconds = args.request_seconds or REQUEST_SECONDS
    sock = _listen(host, args.port)
    port = sock.getsockname()[1]
    shown_host = f"[{host.strip('[]')}]" if ":" in host else host
    url = f"http://{shown_host}:{port}/"
    if not loopback:
        print(
            f"symattn: warning: listening on {shown(host)}, which is not loopback: anyone who can reach it can "
            "use the page (no login, no encryption)",
            file=sys.stderr,
            flush=True,
        )
    hosts = None if not loopback else tuple({"127.0.0.1", "localhost", "::1", host.strip("[]")})
    app = create_app(initial, seconds, hosts=hosts)
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=3)
    )
    print(f"symattn serve: {url} (Ctrl-C stops)", flush=True)
    if args.open:
        _open_when_ready(server, url)
    server.run(sockets=[sock])
    return 0


def _open_when_ready(server, url: str) -> None:
    import threading
    import webbrowser

    def wait() -> None:
        for _ in range(600):
            if server.started:
                webbrowser.open(url)
                return
            time.sleep(0.05)

    threading.Thread(target=wait, name="symattn-open", daemon=True).start()
