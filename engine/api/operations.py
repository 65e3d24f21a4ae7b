"""The room's operations, declared once: what an operator can ask of a room's runtime.

Each operation is a method of `RoomClient` (engine/api/client.py) decorated with
`@operation`: its signature is the request (typed, with defaults), its return annotation the
response, its docstring what it does, and the decorator says how it travels over HTTP (verb,
path, status, the errors it answers with, whether it changes the room). From that one
declaration:

- the API's routes are made (engine/api/app.py, `add_routes`), `/openapi.json` included;
- `RemoteClient` carries every operation over the owner's socket (one `carry` method);
- `LocalClient` implements each one over the runtime in this process (the only code a new
  operation needs besides its declaration); `tests/test_operations.py` checks that every
  operation has all three.

Over HTTP: the path's `{names}` are parameters of that name; a GET's other parameters are
its query; another verb's body is its one model parameter (a `Decision`), or `body`, a
model whose fields are the other parameters (`CancelBody` for `reason`). The event stream is
not an operation (a stream, not a request and an answer): `RoomClient.follow`.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
import typing
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])
PATH_NAME = re.compile(r"{(\w+)}")


@dataclass(frozen=True)
class Operation:
    """How one operation travels: `verb` `path` answered with `status`, or one of `errors`
    (besides those any request may get; one that `mutates` may also get 507, a full disk)."""

    name: str
    verb: str
    path: str
    mutates: bool
    status: int = 200
    errors: tuple[int, ...] = ()
    body_name: str | None = None  # the model carrying the parameters not in the path
    constraints: dict[str, dict[str, Any]] = field(default_factory=dict)  # per parameter
    long_poll: str | None = None  # the parameter holding seconds the answer may take
    stub: Any = None  # the declaring function
    types: Mapping[str, Any] = field(default_factory=dict)  # the names its types have

    @property
    def path_names(self) -> tuple[str, ...]:
        return tuple(PATH_NAME.findall(self.path))

    @functools.cached_property
    def signature(self) -> inspect.Signature:
        """The request's parameters (without `self`), with their types resolved."""
        hints = self.hints
        params = [p.replace(annotation=hints[p.name])
                  for p in inspect.signature(self.stub).parameters.values() if p.name != "self"]  # fmt: skip
        return inspect.Signature(params, return_annotation=hints["return"])

    @functools.cached_property
    def hints(self) -> dict[str, Any]:
        """Parameter and return types (resolved when first needed: a client that never
        carries an operation never imports its models)."""
        return typing.get_type_hints(self.stub, localns=self.types)  # type: ignore[arg-type]

    @property
    def body(self) -> Any:
        return None if self.body_name is None else self.types[self.body_name]

    @property
    def result(self) -> Any:
        return self.hints["return"]

    @property
    def summary(self) -> str:
        return inspect.cleandoc(self.stub.__doc__ or "").split("\n\n")[0].replace("\n", " ")

    @functools.cached_property
    def _call_signature(self) -> inspect.Signature:
        return inspect.signature(self.stub)  # (unresolved: binding needs no types)

    def arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """A call's arguments by name, defaults filled in (TypeError as for any call)."""
        bound = self._call_signature.bind(None, *args, **kwargs)
        bound.apply_defaults()
        return {k: v for k, v in bound.arguments.items() if k != "self"}

    def model_parameter(self) -> str | None:
        """The one parameter outside the path that is itself the body (a pydantic model)."""
        rest = [n for n in self.signature.parameters if n not in self.path_names]
        if self.verb == "GET" or self.body is not None or len(rest) != 1:
            return None
        return rest[0] if hasattr(self.signature.parameters[rest[0]].annotation,
                                  "model_validate") else None  # fmt: skip


class Types(Mapping[str, Any]):
    """Names of types, each imported from its module when first looked up."""

    def __init__(self, where: dict[str, tuple[str, ...]]) -> None:
        self._module = {name: module for module, names in where.items() for name in names}

    def __getitem__(self, name: str) -> Any:
        if name not in self._module:
            raise KeyError(name)
        return getattr(importlib.import_module(self._module[name]), name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._module)

    def __len__(self) -> int:
        return len(self._module)


OPERATIONS: dict[str, Operation] = {}


def declarer(where: dict[str, tuple[str, ...]]) -> Callable[..., Callable[[F], F]]:
    """`operation`, for declarations whose types are named in `where` ({module: names}):
    they are imported when an operation is first carried or served, not before."""
    types = Types(where)

    def operation(verb: str, path: str, *, mutates: bool, status: int = 200,
                  errors: tuple[int, ...] = (), body: str | None = None,
                  constraints: dict[str, dict[str, Any]] | None = None,
                  long_poll: str | None = None) -> Callable[[F], F]:  # fmt: skip
        """Declare the decorated `RoomClient` method an operation (see the module's text).
        Its body is replaced by `self.carry(operation, arguments)`: what a client that does
        not implement the operation itself (`RemoteClient`) does with it."""

        def declare(stub: F) -> F:
            op = Operation(stub.__name__, verb, path, mutates, status, errors, body,
                           constraints or {}, long_poll, stub, types)  # fmt: skip
            OPERATIONS[op.name] = op

            @functools.wraps(stub)
            async def carried(self: Any, *args: Any, **kwargs: Any) -> Any:
                return await self.carry(op, op.arguments(args, kwargs))

            carried.operation = op  # type: ignore[attr-defined]
            return carried  # type: ignore[return-value]

        return declare

    return operation
