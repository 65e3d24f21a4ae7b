"""Any headers, on the room's API (issue 25): names and values of any bytes (control
characters, CR and LF, latin-1, very long, hundreds of them), an odd `Last-Event-ID`,
`Authorization`, `Content-Type` or `Content-Length`, are answered with a 2xx or a 4xx,
never a 5xx; the server answers a plain request after each; and nothing the runtime logs
holds a traceback.

Requests go over real HTTP, on the room's Unix socket and its loopback TCP listener (where
every request needs the token): through httpx where its client takes the headers, and as
raw bytes on a socket for what no client would send.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx
import pytest
from anyio.abc import SocketStream
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from engine.api.sockets import connect_path
from engine.config import Config, ServerConfig
from tests.fuzz.rooms import ROOMY
from tests.test_api import served
from tests.wait import PATIENCE

# Headers are large on purpose (60 kB, 2,000 of them): hypothesis may say their repr is
# large as it reports a failure, which must not hide the failure itself.
pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings(
        "ignore:Generating overly large repr:hypothesis.errors.HypothesisWarning"
    ),
]

# One server serves every example of a test (a runtime opens in about a second).
SERVED = settings(
    ROOMY, suppress_health_check=[*settings.default.suppress_health_check,
                                  HealthCheck.function_scoped_fixture],
)  # fmt: skip
SUBMIT = json.dumps({"thread_id": "fuzz:headers", "text": "hello"}).encode()
ROUTES = st.sampled_from([
    ("GET", "/v1/health", b""),
    ("GET", "/v1/pending", b""),
    ("POST", "/v1/messages", SUBMIT),
    ("GET", "/v1/events", b""),
    ("GET", "/v1/turns/t_nope?wait=0", b""),
])  # fmt: skip
NAMES = st.sampled_from([
    b"Last-Event-ID", b"Authorization", b"Content-Type", b"Content-Length", b"Accept",
    b"Transfer-Encoding", b"Host", b"Connection", b"Expect", b"Cookie", b"Range",
    b"X-Forwarded-For", b"Accept-Encoding", b"Upgrade", b"Origin",
])  # fmt: skip
ODD = [
    b"", b" ", b"\x00", b"\r\n", b"\r", b"\n", b"\x1b[2J", b"\xff\xfe", b"\xc3\x28",
    b"r_1:\xb2", b"x:" + b"9" * 5000, b":", b"::", b"-1", b"1e400", b"NaN", b"0x10",
    b"Bearer", b"Bearer ", b"Bearer \x00", b"bearer " + b"a" * 43, b"Basic Zm9vOmJhcg==",
    b"application/json; charset=\xff", b"multipart/form-data; boundary=", b"text/plain",
    b"application/x-www-form-urlencoded", b"chunked", b"gzip, chunked", b"100-continue",
    b"websocket", b"99999999999999999999999", b"+5", b" 5", b"5, 5",
]  # fmt: skip
# What httpx's client sends as it is (h11 refuses control characters and line breaks)
TOKEN_CHARS = b"!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
VALUE_CHARS = bytes([*range(0x21, 0x7F), *range(0x80, 0x100)])
token = st.binary(min_size=1, max_size=40).map(
    lambda b: bytes(TOKEN_CHARS[c % len(TOKEN_CHARS)] for c in b)
)
sendable_value = st.one_of(
    st.binary(max_size=60).map(lambda b: bytes(VALUE_CHARS[c % len(VALUE_CHARS)] for c in b)),
    st.integers(1, 60_000).map(lambda n: b"v" * n),  # very long
    st.sampled_from([v for v in ODD if v == v.strip() and all(0x20 <= c != 0x7F for c in v)]),
)
any_value = st.one_of(
    st.binary(max_size=80),
    st.text(max_size=40).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.text(st.characters(max_codepoint=0xFF), max_size=40).map(lambda t: t.encode("latin-1")),
    st.integers(1, 60_000).map(lambda n: b"\x7f" * n),
    st.sampled_from(ODD),
)
any_name = NAMES | token | st.binary(max_size=30)


class Logged(logging.Handler):
    """What agent.log would hold: the runtime configures no logging, so Python's last resort
    writes every record of WARNING and above to stderr, the log, tracebacks included."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))

    def tracebacks(self) -> list[str]:
        return [line for line in self.lines if "Traceback" in line]


@dataclass
class Api:
    """The served room: its run, socket, TCP address and token, and what it logged."""

    run_id: str
    room: Path
    listen: str
    token: str
    log: Logged
    unix: httpx.AsyncClient
    tcp: httpx.AsyncClient

    async def still_answers(self, what: object) -> None:
        """A plain request is answered on both listeners, and no traceback was logged."""
        assert (await self.unix.get("/v1/health")).status_code == 200, what
        assert (await self.tcp.get("/v1/health")).status_code == 200, what
        assert self.log.tracebacks() == [], (what, self.log.tracebacks()[0][:3000])


@contextlib.contextmanager
def logged() -> Iterator[Logged]:
    """What the runtime logs while the block runs."""
    handler, root = Logged(), logging.getLogger()
    root.addHandler(handler)
    try:
        yield handler
    finally:
        root.removeHandler(handler)


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    room = tmp_path / "room"
    config = Config(server=ServerConfig(listen="127.0.0.1:0"))
    with logged() as log:
        unix_transport = httpx.AsyncHTTPTransport(uds=connect_path(room / "agent.sock"))
        async with (
            served(room, config) as rt,
            httpx.AsyncClient(
                transport=unix_transport, base_url="http://agentdeck", timeout=PATIENCE
            ) as unix,
        ):
            listen, secret = rt.api["listen"], (room / "server.token").read_text().strip()
            auth = {"Authorization": f"Bearer {secret}"}
            async with httpx.AsyncClient(base_url=f"http://{listen}", headers=auth,
                                         timeout=PATIENCE) as tcp:  # fmt: skip
                yield Api(rt.run_id, room, listen, secret, log, unix, tcp)


async def exchange(api: Api, over: str, request: bytes, *, half_close: bool = False,
                   until: bytes = b"\r\n") -> int:  # fmt: skip
    """Send `request` as it is on a new connection; the status of the answer (0: the
    server closed the connection without one), once `until` has come (or the end)."""
    stream: SocketStream
    if over == "unix":
        stream = await anyio.connect_unix(connect_path(api.room / "agent.sock"))
    else:
        host, _, port = api.listen.rpartition(":")
        stream = await anyio.connect_tcp(host, int(port))
    async with stream:
        await stream.send(request)
        if half_close:
            await stream.send_eof()
        got = b""
        with anyio.fail_after(PATIENCE):
            while until not in got:
                try:
                    got += await stream.receive()
                except anyio.EndOfStream:
                    break
    status = got.split(b"\r\n", 1)[0].split(b" ")
    if not got:
        return 0
    assert until in got or b"connection: close" in got.lower(), got[:300]
    assert status[0] == b"HTTP/1.1" and status[1].isdigit(), got[:200]
    return int(status[1])


def owns_framing(name: bytes) -> bool:
    """Headers that frame the body: httpx writes them itself (and refuses a mismatch), and
    the framing test sends them raw."""
    return name.strip().lower() in (b"content-length", b"transfer-encoding")


many = st.integers(50, 2000).map(lambda n: [(b"X-H%d" % i, b"v" * (i % 7)) for i in range(n)])
sendable_headers = st.lists(st.tuples(NAMES | token, sendable_value), max_size=10) | many
any_headers = st.lists(st.tuples(any_name, any_value), max_size=10) | many
OVER = st.sampled_from(["unix", "tcp"])


@SERVED
@given(route=ROUTES, headers=sendable_headers, over=OVER)
@example(route=("GET", "/v1/events", b""), headers=[(b"Last-Event-ID", b"x:\xb2")], over="tcp")
@example(route=("GET", "/v1/health", b""), headers=[(b"X", b"v" * 60_000), (b"Authorization", b"")],
         over="tcp")  # fmt: skip
async def test_headers_a_client_sends_are_answered_without_a_5xx(
    api: Api, route: tuple[str, str, bytes], headers: list[tuple[bytes, bytes]], over: str
) -> None:
    method, path, body = route
    headers = [(n, v) for n, v in headers if not owns_framing(n)]
    if body:
        headers.insert(0, (b"Content-Type", b"application/json"))
    client = api.unix if over == "unix" else api.tcp
    try:
        async with client.stream(method, path, content=body or None, headers=headers) as r:
            status = r.status_code
    except httpx.LocalProtocolError:  # the client would not send these (two Hosts)
        event("refused by httpx")
        await api.still_answers((method, path, headers[:5]))
        return
    event(f"{over} {status}")
    assert status < 500, (status, method, path, headers[:5])
    if over == "tcp" and any(n.lower() == b"authorization" for n, _ in headers):
        # only the room's token opens it (headers past h11's 16 KiB are a 400 before that)
        assert status in (400, 401), (status, headers[:5])
    await api.still_answers((method, path, headers[:5]))


def request(method: str, path: str, body: bytes, headers: list[tuple[bytes, bytes]]) -> bytes:
    head = [f"{method} {path} HTTP/1.1".encode(), b"Host: agentdeck"]
    head += [name + b": " + value for name, value in headers]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


@SERVED
@given(route=ROUTES, headers=any_headers, over=OVER, token_first=st.booleans())
@example(route=("POST", "/v1/messages", SUBMIT), headers=[(b"Transfer-Encoding", b"chunked")],
         over="unix", token_first=True)  # fmt: skip
@example(route=("GET", "/v1/health", b""), headers=[(b"X\x00", b"\x1b[2J\r\nX: y")],
         over="tcp", token_first=True)  # fmt: skip
async def test_any_header_bytes_are_answered_without_a_5xx(
    api: Api, route: tuple[str, str, bytes], headers: list[tuple[bytes, bytes]], over: str,
    token_first: bool,
) -> None:  # fmt: skip
    """As raw bytes on a socket: what h11 refuses is a 400 from uvicorn, what it takes
    reaches the gate and the routes."""
    method, path, body = route
    # A body is framed as it is sent (the next test frames it any way)
    sent = [(n, v) for n, v in headers if not (body and owns_framing(n))]
    if body:
        sent[:0] = [(b"Content-Type", b"application/json"), (b"Content-Length", b"%d" % len(body))]
    if over == "tcp" and token_first:
        sent.insert(0, (b"Authorization", b"Bearer " + api.token.encode()))
    status = await exchange(api, over, request(method, path, body, sent))
    event(f"{over} {status}")
    assert 0 < status < 500, (status, method, path, sent[:5])
    await api.still_answers((method, path, sent[:5]))


@st.composite
def framings(draw: st.DrawFn) -> tuple[list[tuple[bytes, bytes]], bytes, bool]:
    """Headers that frame SUBMIT's body, the bytes sent after them, and whether they surely
    end the request (else the server may wait for more, and the client gives up)."""
    kind = draw(st.sampled_from(["length", "chunked", "both"]))
    if kind == "length":
        declared = draw(st.integers(0, 2 * len(SUBMIT)) | st.sampled_from([10**6, 2**63]))
        return [(b"Content-Length", b"%d" % declared)], SUBMIT, declared <= len(SUBMIT)
    cuts = sorted(draw(st.lists(st.integers(0, len(SUBMIT)), max_size=4)))
    edges = [0, *cuts, len(SUBMIT)]
    body, exact = b"", True
    for a, b in zip(edges, edges[1:], strict=False):
        size = draw(st.sampled_from([b"%x" % (b - a), b"%X" % (b - a), b"%04x" % (b - a),
                                     b"%x;ext=1" % (b - a), b"zz", b"-1", b"f" * 20, b""]))  # fmt: skip
        exact = exact and size.split(b";")[0].lower().lstrip(b"0") == (b"%x" % (b - a)).lstrip(b"0")
        body += size + b"\r\n" + SUBMIT[a:b] + b"\r\n"
    end = draw(st.sampled_from([b"0\r\n\r\n", b"0\r\nX-Trailer: \x01\r\n\r\n", b"", b"0\r\n"]))
    exact = exact and end.endswith(b"\r\n\r\n")
    headers = [(b"Transfer-Encoding", draw(st.sampled_from([b"chunked", b"gzip, chunked",
                                                            b"chunked, chunked", b"identity"])))]  # fmt: skip
    exact = exact and headers[0][1] == b"chunked"
    if kind == "both":
        headers.append((b"Content-Length", b"%d" % draw(st.integers(0, 2 * len(body)))))
    return headers, body + end, exact


@SERVED
@given(framing=framings(), over=OVER)
@example(framing=([(b"Content-Length", b"%d" % (len(SUBMIT) + 1))], SUBMIT, False), over="unix")
async def test_a_body_framed_any_way_is_answered_without_a_5xx(
    api: Api, framing: tuple[list[tuple[bytes, bytes]], bytes, bool], over: str
) -> None:
    """A Content-Length that is not the body's, chunks of any size, both at once: a
    shorter body leaves another (bad) request behind; for a longer one, the client gives
    up and closes its side, and the request is never answered."""
    framed, body, ends = framing
    sent = [(b"Content-Type", b"application/json"), *framed]
    if over == "tcp":
        sent.insert(0, (b"Authorization", b"Bearer " + api.token.encode()))
    status = await exchange(api, over, request("POST", "/v1/messages", body, sent),
                            half_close=not ends)  # fmt: skip
    event(f"{'ends' if ends else 'may not end'}: {status}")
    assert status < 500 and (status > 0 or not ends), (status, framed, body)
    await api.still_answers((framed, body))


@SERVED
@given(
    last=st.one_of(
        any_value,
        st.tuples(
            st.sampled_from([b"", b"r_", b"RUN", b"\xff"]) | any_value,
            st.integers(-(2**70), 2**70).map(lambda n: b"%d" % n) | any_value,
        ).map(b":".join),
    ),
    over=OVER,
    ours=st.booleans(),
)
async def test_any_last_event_id_opens_the_stream(
    api: Api, last: bytes, over: str, ours: bool
) -> None:
    """The events stream starts (its `hello`) whatever the Last-Event-ID HTTP allows; a
    value it does not allow may be a 400. `ours`: the run is this runtime's."""
    if ours:
        last = api.run_id.encode() + b":" + last.rpartition(b":")[2]
    sent = [(b"Last-Event-ID", last)]
    if over == "tcp":
        sent.insert(0, (b"Authorization", b"Bearer " + api.token.encode()))
    status = await exchange(api, over, request("GET", "/v1/events", b"", sent),
                            until=b"event: hello")  # fmt: skip
    event(f"{over} {status}")
    legal = last == last.strip(b" \t") and all(c >= 0x20 and c != 0x7F or c == 9 for c in last)
    assert status == 200 or (status == 400 and not legal), (status, last)
    await api.still_answers(last)
