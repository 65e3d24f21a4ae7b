"""The body of `POST /v1/gc` (`RoomClient.gc`); its answer is engine/domain/retention.py's."""

from __future__ import annotations

from pydantic import Field

from engine.api.models import _Body


class GcBody(_Body):
    """A pass of retention: `dry_run` changes nothing; `vacuum` gives all freed space back
    (rewriting the database where it must); `days`, `gb` replace [retention]'s this once."""

    dry_run: bool = False
    vacuum: bool = False
    days: float | None = Field(None, gt=0, le=36_500, allow_inf_nan=False)
    gb: float | None = Field(None, gt=0, le=1_000_000, allow_inf_nan=False)
