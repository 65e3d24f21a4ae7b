"""The server loop: the room's API on its Unix socket, and on loopback TCP when configured.

Like every loop it only creates turn requests and decisions, through the same calls the
owner's console makes; it never runs a turn. It lives inside the runtime's block:

    async with Runtime.open(room) as rt, serve_api(rt):
        ...

The socket is `agent.sock` in the room, mode 0600 from the moment it has its name (it is
bound in a private directory, then renamed into place). One left by a crash is replaced;
one that answers is never touched. While it serves, the room is in the machine's registry
of rooms (engine/rooms_registry.py), removed again when it stops. TCP is off unless
`[server] listen` is set; every TCP request then needs the bearer token in the room's
`server.token` (0600).
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import secrets
import shutil
import socket
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import uvicorn

from engine.api.app import make_api
from engine.api.client import ServerError
from engine.api.hub import EventHub
from engine.api.local import LocalClient
from engine.api.problems import Gate
from engine.api.sockets import answers, bind_path
from engine.config import split_listen
from engine.loops.connections import MAX_REQUESTS, Connection
from engine.room import Room
from engine.rooms_registry import Registration, RegistryError, register, unregister
from engine.runtime import Runtime

log = logging.getLogger("agentdeck")
STOP_WAIT = 3  # seconds the API's requests get to finish when the runtime stops


@dataclass
class Serving:
    """What the server loop serves: the socket, and the TCP address if any."""

    socket: Path
    listen: str | None = None
    hub: EventHub | None = None
    servers: list[uvicorn.Server] = field(default_factory=list)


class _Server(uvicorn.Server):
    """uvicorn inside the runtime's process: the process keeps its own signal handling."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def uvicorn_server(app: object) -> uvicorn.Server:
    """uvicorn serving `app` inside this process (the hook loop's listener uses it too)."""
    return _Server(_config(app))


def _config(app: object) -> uvicorn.Config:
    return uvicorn.Config(
        app, lifespan="off", log_config=None, access_log=False, http=Connection, ws="none",  # type: ignore[arg-type]
        proxy_headers=False, server_header=False, timeout_keep_alive=30,
        limit_concurrency=MAX_REQUESTS,  # connections stay under it (engine/loops/connections.py)
        timeout_graceful_shutdown=STOP_WAIT,
    )  # fmt: skip


@contextlib.asynccontextmanager
async def serve_api(rt: Runtime) -> AsyncIterator[Serving]:
    """Serve `rt`'s API until the block exits; then end streams and requests, and remove
    the socket."""
    cfg = rt.config.server
    listeners: list[tuple[object, socket.socket]] = []
    hub = EventHub(rt.run_id, cfg.event_buffer)
    closing = anyio.Event()
    # Building the routes takes FastAPI and pydantic a tenth of a second or more: in a
    # thread, so the event loop (a console's keys, the turns) goes on meanwhile.
    api = await anyio.to_thread.run_sync(make_api, LocalClient(rt, seq=lambda: hub.head), hub,
                                         closing)  # fmt: skip
    unix, inode = bind_unix(rt.room.socket)
    listeners.append((Gate(api, max_body=cfg.max_body), unix))
    serving = Serving(rt.room.socket, hub=hub)
    try:
        if cfg.listen:
            tcp = bind_tcp(cfg.listen, cfg.allow_remote)
            listeners.append((Gate(api, max_body=cfg.max_body, token=ensure_token(rt.room)), tcp))
            host, port = tcp.getsockname()[:2]
            serving.listen = f"{host}:{port}"
        unsubscribe = rt.subscribe(hub.publish)
        rt.api = {
            "socket": str(serving.socket),
            **({"listen": serving.listen} if serving.listen else {}),
        }
        rt.summary_file.write()
        try:
            async with anyio.create_task_group() as tg:
                stopped: list[anyio.Event] = []
                for app, sock in listeners:
                    server = uvicorn_server(app)
                    serving.servers.append(server)
                    stopped.append(anyio.Event())
                    tg.start_soon(serve_on, server, sock, stopped[-1])
                registered = _register(rt)  # the machine's list of rooms (`agentdeck inbox`)
                try:
                    yield serving
                finally:
                    if registered is not None:  # (the lock still held: never a newer owner's)
                        unregister(registered)
                    with anyio.CancelScope(shield=True):
                        closing.set()  # long polls answer now, event streams say bye
                        hub.close()
                        for server in serving.servers:
                            server.should_exit = True
                        with anyio.move_on_after(STOP_WAIT + 1):
                            for event in stopped:
                                await event.wait()
                        tg.cancel_scope.cancel()
                    unsubscribe()
                    rt.api = {}
        except BaseExceptionGroup as group:  # the caller's own error comes out as itself
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from group
            raise
    finally:
        for _, sock in listeners:
            sock.close()
        _remove_if_ours(rt.room.socket, inode)


def _register(rt: Runtime) -> Registration | None:
    """This room in the machine's registry (engine/rooms_registry.py), so one console and
    `agentdeck inbox` find it; one that cannot be written is said, and the room is served
    all the same."""
    try:
        return register(rt.room, kind=rt.kind, run_id=rt.run_id, started_at=rt.started_at)
    except RegistryError as exc:
        rt.notice("warning", f"this room is not in the machine's list of rooms ({exc}): "
                  "other consoles' overview and `agentdeck inbox` do not show it")  # fmt: skip
        return None


async def serve_on(server: uvicorn.Server, sock: socket.socket, stopped: anyio.Event) -> None:
    """Serve until `server.should_exit`; `stopped` is set when it has."""
    try:
        await server.serve([sock])
    finally:
        stopped.set()


def bind_unix(path: Path) -> tuple[socket.socket, int]:
    """A listening socket at `path`, mode 0600; returns it and its inode."""
    if path.exists() or path.is_symlink():
        if answers(path):
            raise ServerError(f"{path}: a live server answers on it; it is left alone")
        path.unlink()  # left by a runtime that died
    private = Path(tempfile.mkdtemp(prefix=".sock-", dir=path.parent))  # 0700
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with bind_path(private / "s") as where:
            sock.bind(where)
        os.chmod(private / "s", 0o600)
        os.rename(private / "s", path)
        sock.listen(128)
        sock.setblocking(False)
        return sock, path.stat().st_ino
    except BaseException:
        sock.close()
        raise
    finally:
        shutil.rmtree(private, ignore_errors=True)


def _remove_if_ours(path: Path, inode: int) -> None:
    with contextlib.suppress(OSError):
        if path.stat().st_ino == inode:
            path.unlink()


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind_tcp(listen: str, allow_remote: str | None) -> socket.socket:
    """A listening TCP socket; a non-loopback host only if `allow_remote` names it."""
    host, port = split_listen(listen)
    if not is_loopback(host):
        if allow_remote != host:
            raise ServerError(
                f"refusing to listen on {listen}: {host} is not a loopback address. To accept "
                f"requests from the network (each needs the room's server.token), set "
                f'[server] allow_remote = "{host}" in agentdeck.toml'
            )
        log.warning("the API listens on %s, beyond this machine (token required)", listen)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, not 0: asyncio sets TCP_NODELAY only on connections whose socket
    # says TCP, and without it every answer (headers, then body) waited ~40 ms for the
    # client's delayed ACK (Nagle); the listener's own TCP_NODELAY is inherited besides.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
        sock.listen(128)
        sock.setblocking(False)
        return sock
    except OSError as exc:
        sock.close()
        raise ServerError(f"cannot listen on {listen}: {exc.strerror or exc}") from None


def ensure_token(room: Room) -> str:
    """The room's bearer token (made once, kept 0600)."""
    try:
        fd = os.open(room.token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        os.chmod(room.token, 0o600)
        token = room.token.read_text().strip()
        if len(token) >= 32:
            return token
        fd = os.open(room.token, os.O_WRONLY | os.O_TRUNC)
    with os.fdopen(fd, "w") as f:
        token = secrets.token_urlsafe(32)
        f.write(token + "\n")
    return token
