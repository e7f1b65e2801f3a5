"""The templates' helpers: shareable query strings, readable times and
durations, statuses shown with an icon and a word, and `make up`'s banner
naming the UI."""

from __future__ import annotations

import datetime
from pathlib import Path

from sluiceway.devenv import up
from sluiceway.ui import views
from sluiceway.ui.statuses import SEVERITY, shown, worst

NOW = datetime.datetime(2026, 12, 24, 18, 0, tzinfo=datetime.UTC)


def test_a_query_string_keeps_repeated_values_and_drops_what_is_cleared() -> None:
    params = {"status": ["FAILED", "TIMED_OUT"], "workflow": ["pay"], "cursor": ["abc"]}
    assert views.query(params, cursor=None) == "?status=FAILED&status=TIMED_OUT&workflow=pay"
    assert views.query(params, workflow="a b&c", cursor=None, status=None) == "?workflow=a+b%26c"
    assert views.query({}) == "?"


def test_since_becomes_the_instant_the_api_takes() -> None:
    assert views.started_after("1h", NOW) == "2026-12-24T17:00:00Z"
    assert views.started_after("forever", NOW) is None and views.started_after(None, NOW) is None


def test_times_and_durations_read_as_people_say_them() -> None:
    assert views.when("2026-12-24T17:00:00.5Z") == "2026-12-24 17:00:00 UTC"
    assert views.when(None) == "—"
    assert [views.duration(s) for s in (0.25, 7, 600, 36_000)] == ["250 ms", "7.0 s", "10.0 min", "10.0 h"]
    assert views.between("2026-12-24T17:59:00Z", None, NOW) == "60.0 s"


def test_every_status_has_an_icon_and_a_word_besides_its_colour() -> None:
    for status in SEVERITY:
        found = shown(status)
        assert found.icon and found.label and found.css in {"ok", "bad", "busy", "wait", "off", "warn"}
    assert shown("SOMETHING_NEW").label == "something new"
    assert worst({"COMPLETED": 10, "IN_PROGRESS": 1}) == "IN_PROGRESS"
    assert worst({"COMPLETED": 10, "TIMED_OUT": 1, "IN_PROGRESS": 3}) == "TIMED_OUT"


def test_make_up_prints_the_ui_address(tmp_path: Path) -> None:
    text = up.banner(tmp_path / "kubeconfig", [tmp_path], "http://127.0.0.1:8080", tmp_path)
    assert "The web UI is at http://127.0.0.1:8080/ui" in text
