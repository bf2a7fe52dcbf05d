"""The engine's event log stays bounded and keeps list-style cursors valid."""

from __future__ import annotations

import pytest

from minicache.events import EventLog


def test_cursor_reading_works_as_on_a_list_while_old_events_are_dropped():
    log = EventLog(capacity=3)
    seen = len(log)
    for i in range(2):
        log.append({"n": i})
    assert log[seen:] == [{"n": 0}, {"n": 1}]
    seen = len(log)
    for i in range(2, 7):
        log.append({"n": i})
    assert len(log) == 7  # every event ever appended
    assert log[seen:] == [{"n": 4}, {"n": 5}, {"n": 6}]  # 2 and 3 were dropped: only 3 are kept
    assert log[-1] == {"n": 6} and list(log) == [{"n": 4}, {"n": 5}, {"n": 6}]
    assert log == [{"n": 4}, {"n": 5}, {"n": 6}] and EventLog() == []
    with pytest.raises(IndexError, match="no longer kept"):
        log[0]


def test_the_engine_event_log_is_bounded(tmp_path):
    from fakes import FakeSmall, FakeTarget, HashEmbedder
    from minicache.engine import EngineConfig, MiniCache

    with MiniCache(
        FakeTarget(),
        FakeSmall(),
        store=str(tmp_path / "e.db"),
        embedder=HashEmbedder(),
        config=EngineConfig(background_builds=False, max_events=5),
    ) as mc:
        for i in range(12):
            mc.events.append({"event": "test", "n": i})
        assert len(mc.events) == 12 and [e["n"] for e in mc.events[0:]] == [7, 8, 9, 10, 11]


def test_a_listener_sees_each_event_as_it_is_appended_and_its_failure_stays_its_own():
    log = EventLog(capacity=2)
    seen: list[dict[str, int]] = []

    def broken(event: dict[str, int]) -> None:
        raise RuntimeError("listener bug")

    log.listen(broken)
    log.listen(seen.append)
    for i in range(3):
        log.append({"n": i})  # the broken listener raises nothing here
    assert seen == [{"n": 0}, {"n": 1}, {"n": 2}]  # every event, also those no longer kept
    assert list(log) == [{"n": 1}, {"n": 2}]
