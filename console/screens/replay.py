"""The replay dialog (`P` on a turn, in the live timeline or in history): answer the turn's
message again in a scratch thread, on its recorded results (no tool runs; a call unlike
the record's waits for a decision), against another model, strategy or instructions.

The fields: the model as `provider:model` (empty: the thread's), the strategy (the
turn's, or another), instructions for the scratch thread (empty: the thread's own as
the room tells them), the group it runs in. Ctrl+s starts it through the room's client;
a refusal is said on the line above the hint and the dialog stays open. Esc backs out.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Input, Select, TextArea

from console.widgets.inputs import OneLineInput
from console.widgets.text import Label, Static

if TYPE_CHECKING:
    from engine.api.fork_models import ReplayBody
    from engine.domain.forks import Forked

STRATEGIES = (("the turn's", ""), ("react", "react"), ("direct", "direct"),
              ("plan_execute", "plan_execute"))  # fmt: skip
Replay = Callable[["ReplayBody"], Awaitable["Forked"]]


class ReplayScreen(ModalScreen["Forked | None"]):
    """Dismissed with the scratch thread made (its turn started), or None (Esc)."""

    BINDINGS = [
        Binding("escape", "dismiss(None)", "Back out"),
        Binding("ctrl+s", "replay", "Replay", priority=True),
    ]
    DEFAULT_CSS = """
    ReplayScreen {
        .replay-field { height: auto; margin-top: 1; }
        .replay-field > Label { width: 13; padding-top: 1; }
        .replay-field > Input, .replay-field > Select { width: 1fr; }
        #replay-instructions { height: 6; width: 1fr; }
        #replay-check { margin-top: 1; text-style: bold; color: $text-error; }
    }
    """

    def __init__(self, turn_id: str, thread_id: str, group: str, groups: list[str],
                 save: Replay) -> None:  # fmt: skip
        super().__init__()
        self.turn_id, self.thread_id, self.group, self.groups = turn_id, thread_id, group, groups
        self.save = save

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="wide"):
            yield Label(f"Replay turn {self.turn_id} of {self.thread_id}", id="question")
            yield Static("Its message is answered again in a scratch thread on the recorded "
                         "results: no tool runs, and a call unlike the record's waits for "
                         "your decision.")  # fmt: skip
            with Horizontal(classes="replay-field"):
                yield Label("model")
                yield OneLineInput(placeholder="provider:model, e.g. offline:b, openai:gpt-4o "
                                   "(empty: the thread's)", id="replay-model")  # fmt: skip
            with Horizontal(classes="replay-field"):
                yield Label("strategy")
                yield Select([(Content(w), v) for w, v in STRATEGIES], value="",
                             allow_blank=False, id="replay-strategy")  # fmt: skip
            with Horizontal(classes="replay-field"):
                yield Label("instructions")
                yield TextArea("", language=None, id="replay-instructions")
            with Horizontal(classes="replay-field"):
                yield Label("group")
                yield Select([(Content(g), g) for g in self.groups], value=self.group,
                             allow_blank=False, id="replay-group")  # fmt: skip
            yield Static("", id="replay-check")
            yield Label("ctrl+s replay · Esc back · tab: the next field (empty instructions: "
                        "the thread's)", classes="hint")  # fmt: skip

    def on_mount(self) -> None:
        self.query_one("#replay-model").focus()

    def typed(self) -> dict[str, Any]:
        """The replay's fields as typed (empty ones: None, the turn's or thread's)."""
        strategy = self.query_one("#replay-strategy", Select).value
        group = self.query_one("#replay-group", Select).value
        told = self.query_one("#replay-instructions", TextArea).text
        return {"model": self.query_one("#replay-model", Input).value.strip() or None,
                "strategy": strategy if isinstance(strategy, str) and strategy else None,
                "instructions": told if told.strip() else None,
                "group": group if isinstance(group, str) else None}  # fmt: skip

    async def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        await self.action_replay()

    async def action_replay(self) -> None:
        from pydantic import ValidationError

        from engine.api.client import ApiError
        from engine.api.fork_models import ReplayBody

        try:
            made = await self.save(ReplayBody(turn_id=self.turn_id, by="operator", **self.typed()))
        except ValidationError as exc:
            self._say("; ".join(_said(e) for e in exc.errors()))
            return
        except (ApiError, RuntimeError) as exc:  # refused, or no runtime reachable now
            self._say(f"Not replayed: {exc}")
            return
        self.dismiss(made)

    def _say(self, text: str) -> None:
        self.query_one("#replay-check", Static).update(text)


def _said(error: Any) -> str:
    """A field the body refused, in the dialog's words."""
    field = str(error["loc"][0]) if error.get("loc") else ""
    if field == "model":
        return "model: give it as provider:model (offline:b, openai:gpt-4o, anthropic:…)"
    return f"{field}: {error['msg']}" if field else str(error["msg"])
