"""Groups whose entries are one computation up to parameter names merge into the older group
(minicache.build.merge): two stories told around one subtraction become one group, whose entry
reads both stories' wording; different computations, and an engine with merging off, keep theirs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fakes import Domain, FakeSmall, HashEmbedder, first_build_request, numbers_in, request_of
from minicache.build.computations import ComputationIndex
from minicache.build.merge import merged_profile
from minicache.config.engine import VerifyConfig
from minicache.engine import EngineConfig, MiniCache
from minicache.errors import HitRefused
from minicache.hit.checks import Check
from minicache.hit.profile import learn_profile
from minicache.hit.words_after import check_written
from minicache.models import FakeBackend, GenerationOptions, Message
from minicache.programs.computation import computation_of
from minicache.store import Entry, EntryStatus, Example, SQLiteStore, Variable, new_id

COOKIES = Domain(
    name="cookies",
    keyword="cookies",
    wording="Paco had {0} cookies. He ate {1} of them. How many cookies did Paco have left?",
    params=(("cookies", "cookies Paco had"), ("eaten", "cookies he ate")),
    expression="cookies - eaten",
    compute=lambda had, ate: had - ate,
)
MARBLES = Domain(
    name="marbles",
    keyword="marbles",
    wording=(
        "A jar holds {0} marbles and a child takes away {1} marbles from the jar. "
        "How many marbles remain in the jar?"
    ),
    params=(("marbles", "marbles in the jar"), ("taken", "marbles taken away")),
    expression="marbles - taken",
    compute=lambda held, taken: held - taken,
)
PAGES = Domain(
    name="pages",
    keyword="pages",
    wording="Lisa read {0} pages on Monday and {1} pages on Tuesday. How many pages did she read altogether?",
    params=(("monday_pages", "pages read on Monday"), ("tuesday_pages", "pages read on Tuesday")),
    expression="monday_pages + tuesday_pages",
    compute=lambda monday, tuesday: monday + tuesday,
)
STORIES = (COOKIES, MARBLES, PAGES)
VALUES = [(36, 14), (50, 21), (47, 9), (80, 33), (63, 28)]


def story_of(text: str) -> Domain:
    return next(d for d in STORIES if d.keyword in text)


class StoryTarget(FakeBackend):
    """Writes each story's plain PoT program (and, asked to generalize, its parameterized one)."""

    def __init__(self) -> None:
        super().__init__(self._reply, name="story-target")
        self.during_miss: Callable[[], None] | None = None  # runs once, while a miss waits on us
        self.answers_only = False  # plain programs that return the answer, which does not lift

    def _reply(self, messages: list[Message], options: GenerationOptions) -> Any:
        if "Request:\n" in messages[1].content:
            question = request_of(messages)
            during, self.during_miss = self.during_miss, None
            if during is not None:
                during()
            story, numbers = story_of(question), numbers_in(question)
            program = story.plain_program(numbers)
            if self.answers_only:
                program = f"def solve():\n    return {story.answer(*numbers)}\n"
        else:
            question = first_build_request(messages)
            program = story_of(question).program(numbers_in(question))
        return f"```python\n{program}```"


@pytest.fixture
def make(tmp_path, sandbox):
    made: list[MiniCache] = []

    def factory(store: SQLiteStore | None = None, **config: Any) -> tuple[MiniCache, FakeSmall]:
        small = FakeSmall()
        engine = MiniCache(
            StoryTarget(),
            small,
            store=store or SQLiteStore(tmp_path / f"mc{len(made)}.db"),
            embedder=HashEmbedder(),
            config=EngineConfig(
                background_builds=False,
                audit_rate=0.0,
                build_early=0,
                verify=VerifyConfig(probation=0),
                **config,
            ),
            sandbox=sandbox,
        )
        made.append(engine)
        return engine, small

    yield factory
    for engine in made:
        engine.close()


def served(
    engine: MiniCache, story: Domain, values: tuple[int, int], tenant: str = "default"
) -> Any:
    result = engine.solve(story.ask(*values), tenant=tenant)
    assert result.answer == pytest.approx(story.answer(*values)), result
    return result


def build(engine: MiniCache, story: Domain) -> str:
    """Three misses of ``story``, which build its group's entry; returns the group."""
    groups = {served(engine, story, values).group for values in VALUES[:3]}
    engine.wait_for_builds()
    assert len(groups) == 1
    group = groups.pop()
    assert any(e["event"] == "build" and e["ok"] and e["group"] == group for e in engine.events)
    return group


def build_apart(
    engine: MiniCache, stories: tuple[Domain, ...], tenant: str = "default"
) -> list[str]:
    """Two misses of each story while no group has an entry, then a third of each, which builds
    its group's entry: each story is built in its own group (while one story has an entry, another
    story's miss of its computation joins it instead). Returns the groups, in order."""
    groups: list[set[str]] = [set() for _ in stories]
    for values in VALUES[:3]:
        for story, seen in zip(stories, groups, strict=True):
            seen.add(served(engine, story, values, tenant).group)
            engine.wait_for_builds()
    assert all(len(seen) == 1 for seen in groups)
    built = [seen.pop() for seen in groups]
    builds = {e["group"] for e in engine.events if e["event"] == "build" and e["ok"]}
    assert set(built) <= builds
    return built


def merges(engine: MiniCache) -> list[dict[str, Any]]:
    return [e for e in engine.events if e["event"] == "merge"]


# -- one computation up to names ---------------------------------------------------------------


def test_programs_that_differ_only_in_their_names_are_one_computation():
    ours = computation_of(
        "def solve(cookies=36, eaten=14):\n    left = cookies - eaten\n    return left\n"
    )
    theirs = computation_of(
        "def solve(taken=9, marbles=47):  # written the other way round\n"
        '    """How many remain."""\n'
        "    remain = marbles - taken\n"
        "    return remain\n"
    )
    assert ours is not None and theirs is not None
    assert ours.shape == theirs.shape
    # the parameters pair up by their use, not by their place in the signature
    assert dict(zip(theirs.roles, ours.roles, strict=True)) == {
        "marbles": "cookies",
        "taken": "eaten",
    }


@pytest.mark.parametrize(
    "other",
    [
        "def solve(a=1, b=2):\n    return a + b\n",  # another operation
        "def solve(a=1, b=2, c=3):\n    return a - b - c\n",  # another parameter
        "def solve(a=1, b=2):\n    return (a - b) * 12\n",  # another constant
    ],
)
def test_programs_that_compute_otherwise_are_not_one_computation(other):
    ours = computation_of("def solve(cookies=36, eaten=14):\n    return cookies - eaten\n")
    theirs = computation_of(other)
    assert ours is not None and theirs is not None and ours.shape != theirs.shape


def test_a_parameter_the_program_never_uses_has_no_role_to_match():
    assert computation_of("def solve(a=1, b=2, unused=3):\n    return a - b\n") is None


# -- merged profiles ----------------------------------------------------------------------------


def test_a_merged_exemplar_that_reads_as_a_kept_one_is_not_kept_twice():
    """Two exemplars that differ only in their requests' words (learned with word slots: a
    skeleton each) are one reading: kept twice, the duplicate would count twice where every
    exemplar must read a request alike (minicache.hit.verify.HitVerifier.aligned)."""
    template = [Variable("first"), Variable("second")]
    ask = "On Monday the shop sold {a} cups and {b} plates to a customer called {n}. Total sold?"
    ours, theirs = (
        learn_profile(
            template,
            [(ask.format(a=4, b=9, n=n), {"first": 4, "second": 9})],
            [13],
            word_slots=True,
        )
        for n in ("Tom", "Maria")
    )
    assert ours["exemplars"] != theirs["exemplars"]  # their skeletons differ
    merged = merged_profile(ours, theirs, {"first": "first", "second": "second"}, [], [])
    assert merged["exemplars"] == ours["exemplars"]


# -- groups merging -----------------------------------------------------------------------------


def test_two_stories_of_one_subtraction_merge_and_the_newer_storys_requests_hit_the_survivor(make):
    engine, small = make(merge_groups=True)
    cookies, marbles = build_apart(engine, (COOKIES, MARBLES))
    assert cookies != marbles

    # the newer group's examples are the older group's now, and the newer group is gone
    store = engine.store
    assert [g.id for g in store.list_groups("default")] == [cookies]
    assert store.get_group("default", marbles) is None
    questions = [x.question for x in store.examples("default", cookies)]
    assert len(questions) == 6 and sum("marbles" in q for q in questions) == 3
    assert [e.group_id for e in store.list_entries("default", "active")] == [cookies]
    (event,) = merges(engine)
    assert event["group"] == cookies and event["merged"] == marbles and event["examples"] == 3
    assert event["basis"] == "entries"
    assert event["names"] == {"marbles": "cookies", "taken": "eaten"}
    entry = store.active_entry("default", cookies)
    assert entry is not None and entry.id == event["entry"]
    assert [m["group"] for m in entry.validation["merged"]] == [marbles]

    # a later request told as the merged story routes to the survivor and hits without the small
    # model: the survivor's entry reads that wording with the merged entry's exemplars
    small.mode = "raise"
    hit = served(engine, MARBLES, VALUES[3])
    assert (hit.route, hit.group, hit.entry_id) == ("hit", cookies, entry.id)
    assert hit.variables == {"cookies": VALUES[3][0], "eaten": VALUES[3][1]}
    again = served(engine, COOKIES, VALUES[4])  # and the survivor's own story still hits
    assert (again.route, again.group) == ("hit", cookies)


def test_a_build_event_names_its_tenant_and_the_merge_it_prompts_runs_in_that_tenant(make):
    engine, _ = make(merge_groups=True)
    groups = build_apart(engine, (COOKIES, MARBLES), tenant="acme")
    builds = [e for e in engine.events if e["event"] == "build" and e["ok"]]
    assert [(e["tenant"], e["group"]) for e in builds] == [("acme", g) for g in groups]
    assert [g.id for g in engine.store.list_groups("acme")] == [groups[0]]
    assert [e["merged"] for e in merges(engine)] == [groups[1]]


def test_different_computations_do_not_merge(make):
    engine, _ = make(merge_groups=True)
    cookies = build(engine, COOKIES)
    pages = build(engine, PAGES)
    assert {g.id for g in engine.store.list_groups("default")} == {cookies, pages}
    assert {e.group_id for e in engine.store.list_entries("default", "active")} == {cookies, pages}
    assert merges(engine) == []


def test_with_merging_off_one_computations_groups_stay_apart(make):
    engine, _ = make()
    assert engine.config.merge_groups is False
    cookies = build(engine, COOKIES)
    marbles = build(engine, MARBLES)
    assert {g.id for g in engine.store.list_groups("default")} == {cookies, marbles}
    assert merges(engine) == []
    assert served(engine, MARBLES, VALUES[3]).group == marbles


# -- a group without an entry joins the entry of its computation --------------------------------


def test_a_new_storys_first_miss_joins_the_entry_of_its_computation_and_its_next_request_hits(make):
    engine, small = make(merge_groups=True)
    cookies = build(engine, COOKIES)

    first = served(engine, MARBLES, VALUES[0])  # one miss: too few for a build of its own
    assert first.route == "miss" and first.group != cookies
    engine.wait_for_builds()
    store = engine.store
    assert [g.id for g in store.list_groups("default")] == [cookies]
    assert sum("marbles" in x.question for x in store.examples("default", cookies)) == 1
    (event,) = merges(engine)
    assert (event["group"], event["merged"], event["examples"]) == (cookies, first.group, 1)
    assert event["basis"] == "programs" and event["names"] == {
        "marbles": "cookies",
        "taken": "eaten",
    }
    entry = store.active_entry("default", cookies)
    assert entry is not None and entry.id == event["entry"]
    assert [(m["group"], m["entry"]) for m in entry.validation["merged"]] == [(first.group, None)]

    # the story's second request routes to the entry's group and hits, read by the exemplar the
    # joined example taught the entry (the small model is not asked)
    small.mode = "raise"
    hit = served(engine, MARBLES, VALUES[1])
    assert (hit.route, hit.group, hit.entry_id) == ("hit", cookies, entry.id)
    assert hit.variables == {"cookies": VALUES[1][0], "eaten": VALUES[1][1]}


def test_a_join_keeps_the_words_the_entry_accepts_after_a_number_and_adds_the_joined_ones(make):
    """The joined group's one example records no word after a number by itself, but the entry's
    program reproduced its answer: 'marbles' is accepted beside 'cookies', and a word neither group
    wrote is still refused."""
    engine, _ = make(merge_groups=True)
    cookies = build(engine, COOKIES)
    built = engine.store.active_entry("default", cookies)
    assert built is not None
    assert built.validation["profile"]["words_after"] == {"cookies": ["cookies"]}
    served(engine, MARBLES, VALUES[0])
    engine.wait_for_builds()
    (event,) = merges(engine)
    entry = engine.store.active_entry("default", cookies)
    assert entry is not None and entry.id == event["entry"]
    profile = entry.validation["profile"]
    assert profile["words_after"] == {"cookies": ["cookies", "marbles"]}
    biscuits = COOKIES.ask(40, 15).replace("cookies", "biscuits")
    with pytest.raises(HitRefused) as refused:
        check_written(profile, {"cookies": 40, "eaten": 15}, biscuits)
    assert refused.value.check == Check.WORD_AFTER
    check_written(profile, {"cookies": 40, "eaten": 15}, COOKIES.ask(40, 15))


def test_a_miss_of_another_computation_does_not_join(make):
    engine, _ = make(merge_groups=True)
    cookies = build(engine, COOKIES)
    pages = served(engine, PAGES, VALUES[0]).group
    engine.wait_for_builds()
    assert {g.id for g in engine.store.list_groups("default")} == {cookies, pages}
    assert merges(engine) == []
    assert served(engine, PAGES, VALUES[1]).route == "miss"


def test_with_merging_off_a_miss_of_the_same_computation_does_not_join(make):
    engine, _ = make()
    cookies = build(engine, COOKIES)
    marbles = served(engine, MARBLES, VALUES[0]).group
    engine.wait_for_builds()
    assert {g.id for g in engine.store.list_groups("default")} == {cookies, marbles}
    assert merges(engine) == []
    again = served(engine, MARBLES, VALUES[1])
    assert (again.route, again.group) == ("miss", marbles)


def test_an_example_whose_program_does_not_run_to_its_answer_never_joins(make):
    """An example's recorded answer is what joins it: one its program does not compute in the
    sandbox (as an imported example may hold) keeps its group apart, though its program's shape is
    the entry's computation."""
    engine, _ = make(merge_groups=True)
    cookies = build(engine, COOKIES)
    question = MARBLES.ask(*VALUES[0])
    store = engine.store
    store.ensure_group("default", "grp_imported")
    store.add_example(
        Example(
            id=new_id("ex"),
            tenant="default",
            group_id="grp_imported",
            question=question,
            context=None,
            program=MARBLES.plain_program(numbers_in(question)),
            answer=MARBLES.answer(*VALUES[0]) + 1,
            variables={"marbles": VALUES[0][0], "taken": VALUES[0][1]},
        )
    )
    assert engine.joins.join("default", "grp_imported") is None
    assert {g.id for g in store.list_groups("default")} == {cookies, "grp_imported"}
    assert merges(engine) == []


def test_an_evicted_entry_takes_no_group_in_though_the_index_still_lists_it(make):
    engine, _ = make(merge_groups=True, route_refresh_s=3600.0)
    cookies = build(engine, COOKIES)
    served(engine, PAGES, VALUES[0])  # a look at the index: it now knows the cookies entry
    engine.wait_for_builds()
    assert engine.invalidate(group=cookies) == 1
    marbles = served(engine, MARBLES, VALUES[0]).group
    engine.wait_for_builds()
    assert engine.store.get_group("default", marbles) is not None
    assert merges(engine) == []


# -- what a merge or a join reads -----------------------------------------------------------------


class CountingStore(SQLiteStore):
    """A store that notes the reads a join would repeat on every miss."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reads: list[str] = []

    def list_entries(self, tenant: str, status: EntryStatus | None = None) -> list[Entry]:
        self.reads.append(f"list_entries {status}")
        return super().list_entries(tenant, status)

    def get_group(self, tenant: str, group_id: str) -> Any:
        self.reads.append(f"get_group {group_id}")
        return super().get_group(tenant, group_id)


def story_entry(story: Domain, group_id: str) -> Entry:
    names = [name for name, _ in story.params]
    return Entry(
        id=new_id("ent"),
        tenant="default",
        group_id=group_id,
        template=[Variable(name, "integer", about) for name, about in story.params],
        program=f"def solve({', '.join(names)}):\n    return {story.expression}\n",
    )


def test_the_entry_index_reads_the_store_at_most_once_per_refresh_and_again_after_a_change(
    tmp_path,
):
    store = CountingStore(tmp_path / "index.db")
    store.put_entry(story_entry(COOKIES, "grp_cookies"))
    clock = [0.0]
    index = ComputationIndex(store, refresh_s=1.0, clock=lambda: clock[0])
    subtraction = index.entries("default")[0][1]
    assert subtraction is not None and store.reads == ["list_entries active"]
    store.put_entry(story_entry(MARBLES, "grp_marbles"))  # another replica's new entry
    clock[0] = 0.9
    assert [e.group_id for e, _ in index.entries_of("default", subtraction.shape)] == [
        "grp_cookies"
    ]
    assert len(store.reads) == 1
    clock[0] = 1.0  # a refresh later: it is read again
    found = index.entries_of("default", subtraction.shape)
    assert {e.group_id for e, _ in found} == {"grp_cookies", "grp_marbles"}
    assert len(store.reads) == 2
    store.put_entry(story_entry(PAGES, "grp_pages"))  # a build of this process
    index.stale("default")
    assert len(index.entries("default")) == 3 and len(store.reads) == 3


def test_a_miss_of_no_entrys_computation_reads_no_entry_list_and_no_group_again(make, tmp_path):
    store = CountingStore(tmp_path / "counted.db")
    engine, _ = make(store=store, merge_groups=True, route_refresh_s=3600.0)
    build(engine, COOKIES)
    pages = served(engine, PAGES, VALUES[0]).group
    engine.wait_for_builds()
    store.reads.clear()
    for _ in range(3):
        assert engine.joins.join("default", pages) is None
    assert store.reads == []


# -- a request routed to a group before its merge -----------------------------------------------


def test_a_miss_routed_to_a_group_before_its_merge_moves_to_the_survivor_after_it(make):
    """The request's miss is recorded under the group it was routed to, after the merge deleted
    that group, so recording creates it again: its example moves to the survivor, and the group
    is gone again, though its program (a bare answer) does not lift and so could never join."""
    engine, small = make(merge_groups=True)
    store = engine.store
    marbles = {served(engine, MARBLES, values).group for values in VALUES[:2]}.pop()
    engine.wait_for_builds()  # two misses: no entry, nothing to join yet
    cookies = build(engine, COOKIES)
    assert {g.id for g in store.list_groups("default")} == {cookies, marbles}

    def merge_meanwhile() -> None:  # the group joins the cookies entry while the request waits
        assert engine.joins.join("default", marbles) is not None
        assert store.get_group("default", marbles) is None

    assert isinstance(engine.target, StoryTarget)
    engine.target.during_miss, engine.target.answers_only = merge_meanwhile, True
    late = served(engine, MARBLES, VALUES[2])
    assert (late.route, late.group) == ("miss", marbles)  # routed before the merge
    engine.wait_for_builds()

    assert [g.id for g in store.list_groups("default")] == [cookies]
    moved = [x for x in store.examples("default", cookies) if "marbles" in x.question]
    assert len(moved) == 3 and MARBLES.ask(*VALUES[2]) in {x.question for x in moved}
    assert engine.merges.survivor_of("default", marbles) == cookies
    assert [e["merged"] for e in merges(engine)] == [marbles]  # the join; the move is no merge
    small.mode = "raise"
    again = served(engine, MARBLES, VALUES[3])
    assert (again.route, again.group) == ("hit", cookies)
