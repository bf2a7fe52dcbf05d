"""Groups another replica deletes (merged, or deleted on the dashboard) stop being routed to: the
router asks the store whether a group it would join still exists, at most once a refresh interval
per group, and forgets one it no longer has (minicache.route.router).

Replicas are two store objects (and two engines or routers) on one SQLite file."""

from __future__ import annotations

import pytest

from fakes import CR_VALUES, CURRENT_RATIO, FakeSmall, FakeTarget, HashEmbedder
from minicache.engine import EngineConfig, MiniCache
from minicache.route.router import Router, embed_request
from minicache.store import Example, SQLiteStore, new_id


@pytest.fixture
def replicas(tmp_path):
    stores = [SQLiteStore(tmp_path / "mc.db"), SQLiteStore(tmp_path / "mc.db")]
    yield stores
    for store in stores:
        store.close()


def record(store, group: str, question: str) -> None:
    """An example of ``question`` in ``group``, as a replica's miss records it."""
    store.ensure_group("default", group)
    store.add_example(
        Example(
            id=new_id("ex"),
            tenant="default",
            group_id=group,
            question=question,
            context=None,
            program="def solve():\n    return 1\n",
            answer=1,
            variables={},
            embedding=embed_request(HashEmbedder(), question),
        )
    )


def test_a_group_another_engine_deletes_is_no_longer_routed_to(tmp_path, sandbox):
    engines = [
        MiniCache(
            FakeTarget(),
            FakeSmall(),
            store=SQLiteStore(tmp_path / "mc.db"),
            embedder=HashEmbedder(),
            sandbox=sandbox,
            config=EngineConfig(background_builds=False, route_refresh_s=0.0),
        )
        for _ in range(2)
    ]
    a, b = engines
    try:
        group = a.solve(CURRENT_RATIO.ask(*CR_VALUES[0])).group
        assert b.solve(CURRENT_RATIO.ask(*CR_VALUES[1])).group == group  # B routes there
        a.store.delete_group("default", group)
        decision = b.router.route("default", CURRENT_RATIO.ask(*CR_VALUES[2]))
        assert decision.group_id != group and decision.new_group
        assert b.router.index.stats("default")["groups"] == 0  # its rows are gone from B's index
        assert b.store.get_group("default", group) is None  # and routing recreated nothing
    finally:
        for mc in engines:
            mc.close()


def test_a_request_of_a_merged_groups_wording_goes_to_the_group_that_kept_its_examples(replicas):
    writer, reader = replicas
    question = CURRENT_RATIO.ask(*CR_VALUES[0])
    record(writer, "merged", question)
    record(writer, "survivor", question)  # the merge copied its examples to the survivor
    router = Router(reader, HashEmbedder(), refresh_s=0.0)
    assert router.route("default", question).group_id == "merged"  # the first of two equals
    writer.delete_group("default", "merged")
    decision = router.route("default", question)
    assert (decision.group_id, decision.new_group) == ("survivor", False)


def test_a_group_is_asked_of_the_store_at_most_once_a_refresh_interval(replicas, monkeypatch):
    writer, reader = replicas
    record(writer, "g", CURRENT_RATIO.ask(*CR_VALUES[0]))
    router = Router(reader, HashEmbedder(), refresh_s=3600.0)
    asked: list[str] = []
    get_group = reader.get_group
    monkeypatch.setattr(reader, "get_group", lambda t, g: asked.append(g) or get_group(t, g))
    for values in CR_VALUES[1:4]:
        assert router.route("default", CURRENT_RATIO.ask(*values)).group_id == "g"
    assert asked == ["g"]
