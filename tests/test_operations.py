"""The table of operations (engine/api/operations.py): every operation declared on
`RoomClient` has a route (in /openapi.json, with its errors), a remote form (carried, not
written again) and an in-process implementation; nothing else is a route but the event
stream."""

from __future__ import annotations

import anyio
import pytest

from engine.api.app import make_api
from engine.api.client import RoomClient
from engine.api.local import LocalClient
from engine.api.operations import OPERATIONS
from engine.api.remote import RemoteClient

pytestmark = pytest.mark.anyio


class Anything:
    def __getattr__(self, name: str) -> object:
        async def answer(**kw: object) -> None:
            return None

        return answer


def test_every_operation_has_a_route_a_remote_form_and_an_implementation() -> None:
    api = make_api(Anything(), None, anyio.Event())  # type: ignore[arg-type]
    spec = api.openapi()
    routes = {(verb.upper(), path) for path, item in spec["paths"].items() for verb in item}
    assert routes == {(op.verb, op.path) for op in OPERATIONS.values()} | {("GET", "/v1/events")}
    for op in OPERATIONS.values():
        doc = spec["paths"][op.path][op.verb.lower()]
        assert doc["operationId"].startswith(op.name) and doc["summary"], op.name
        assert {str(s) for s in op.errors} <= set(doc["responses"]), op.name
        assert ("507" in doc["responses"]) == op.mutates, op.name
        assert op.name in vars(LocalClient), f"LocalClient does not implement {op.name}"
        assert op.name not in vars(RemoteClient), f"RemoteClient writes {op.name} again"
        assert getattr(RemoteClient, op.name) is getattr(RoomClient, op.name)


def test_an_operation_called_wrongly_is_a_type_error_before_anything_is_sent() -> None:
    op = OPERATIONS["cancel"]
    assert op.arguments(("t_1",), {}) == {"turn_id": "t_1", "reason": "cancelled by operator"}
    with pytest.raises(TypeError):
        op.arguments((), {"nonsense": 1})


async def test_a_client_that_carries_nothing_says_which_operation(tmp_path) -> None:
    class Bare(RoomClient):
        pass

    with pytest.raises(NotImplementedError, match="Bare does not carry pending"):
        await Bare().pending()
