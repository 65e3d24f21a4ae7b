"""Bad input to the API is a 4xx with a reason, never a 500 and a traceback in agent.log
(issue 25, low items): a `Last-Event-ID` whose sequence is not plain digits, or 5,000 of
them; a rule expiring at NaN or 1e400 (it made a rule that never expired); a delivery id
past the store's integers."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_api import raw, served

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("last", [b"x:\xb2", b"r:" + b"9" * 5000, b"r:-1", b":"])
async def test_a_bad_last_event_id_resumes_from_the_buffer(tmp_path: Path, last: bytes) -> None:
    async with served(tmp_path / "room"), raw(tmp_path / "room") as http:
        async with http.stream("GET", "/v1/events", headers={"Last-Event-ID": last}) as r:
            assert r.status_code == 200


@pytest.mark.parametrize("expires", ["NaN", "Infinity", "1e400", "-5"])
async def test_a_rule_must_expire_at_a_time(tmp_path: Path, expires: str) -> None:
    body = f'{{"effect": "allow", "tool": "shell", "expires_at": {expires}}}'
    async with served(tmp_path / "room"), raw(tmp_path / "room") as http:
        r = await http.post("/v1/rules", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 422, r.text
        assert (await http.get("/v1/rules")).json() == []


async def test_a_delivery_id_past_the_stores_integers_is_no_delivery(tmp_path: Path) -> None:
    async with served(tmp_path / "room"), raw(tmp_path / "room") as http:
        r = await http.post(f"/v1/deliveries/{'9' * 23}/retry")
        assert r.status_code == 404, r.text
