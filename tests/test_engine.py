"""MiniCache engine behaviour, end to end, with fake models, a hash embedder and a real sandbox.

The fakes (tests/fakes.py) know two domains, current ratio and simple interest. A good fake target
writes the correct parameterized program for any request of either; a good fake small model fills
extraction templates with the request's numbers. Tests switch their ``mode`` to make them misbehave.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from fakes import (
    CR_VALUES,
    CURRENT_RATIO,
    SI_VALUES,
    SIMPLE_INTEREST,
    Domain,
    FakeSmall,
    FakeTarget,
    HashEmbedder,
    cosine,
    numbers_in,
    request_of,
)
from minicache.build import builder as build_module
from minicache.build.builder import NO_SHARED_COMPUTATION, UNBACKED_NOT_TRIED, UNREACHABLE
from minicache.config.engine import AdmissionConfig, VerifyConfig
from minicache.engine import EngineConfig, InvalidRequest, MiniCache, SolveError, format_answer
from minicache.programs.signature import parse_signature
from minicache.route.router import skeleton
from minicache.store import SQLiteStore
from minicache.store.base import Example


@dataclass
class Rig:
    mc: MiniCache
    target: FakeTarget
    small: FakeSmall
    store: SQLiteStore
    path: Path


@pytest.fixture
def make(tmp_path, sandbox):
    """Factory: a MiniCache on fakes over ``tmp_path/<db>``; every one made is closed at teardown."""
    made: list[MiniCache] = []

    def factory(
        db: str = "mc.db",
        *,
        target: FakeTarget | None = None,
        small: FakeSmall | None = None,
        **config,
    ) -> Rig:
        path = tmp_path / db
        store = SQLiteStore(path)
        target = target or FakeTarget()
        small = small or FakeSmall()
        # No sampled audits unless a test asks: an audit answers a hit again through the target, so at
        # the default 5% a test that counts the target's calls after hits failed now and then.
        config.setdefault("audit_rate", 0.0)
        # Nor probation (tests/test_probation.py): here a validated entry serves its first request.
        config.setdefault("verify", VerifyConfig(probation=0))
        config.setdefault(
            "build_early", 0
        )  # builds at build_after; early builds: tests/test_admission.py
        mc = MiniCache(
            target,
            small,
            store=store,
            embedder=HashEmbedder(),
            config=EngineConfig(background_builds=False, **config),
            sandbox=sandbox,
        )
        made.append(mc)
        return Rig(mc, target, small, store, path)

    yield factory
    for mc in made:
        mc.close()


@pytest.fixture
def rig(make) -> Rig:
    return make()


def ask(rig: Rig, domain: Domain, values, **kwargs):
    """Solve one request and check the answer is right, whatever the route."""
    result = rig.mc.solve(domain.ask(*values), **kwargs)
    assert result.answer == pytest.approx(domain.answer(*values), rel=1e-9), result
    return result


def warm(rig: Rig, domain: Domain, values_list, **kwargs):
    return [ask(rig, domain, values, **kwargs) for values in values_list]


def snapshot(store: SQLiteStore, tenant: str = "default"):
    return (
        store.counters(tenant),
        [
            (g.id, g.label, g.status, g.build_failures, g.n_examples)
            for g in store.list_groups(tenant)
        ],
        [(e.id, e.status, e.version, e.hits, e.failures) for e in store.list_entries(tenant)],
    )


def consistent(stats) -> bool:
    return stats["requests"] == stats["hits"] + stats["misses"] + stats["fallbacks"]


# -- the fake embedder --------------------------------------------------------------------------


def test_hash_embedder_gives_unit_vectors_and_separates_wordings():
    embedder = HashEmbedder()
    vectors = embedder.embed(["current ratio", "simple interest", ""])
    assert vectors.shape == (3, 256) and vectors.dtype.name == "float32"
    assert [round(float(v @ v), 5) for v in vectors] == [1.0, 1.0, 1.0]
    same = cosine(
        embedder,
        skeleton(CURRENT_RATIO.ask(*CR_VALUES[0])),
        skeleton(CURRENT_RATIO.ask(*CR_VALUES[1])),
    )
    other = cosine(
        embedder,
        skeleton(CURRENT_RATIO.ask(*CR_VALUES[0])),
        skeleton(SIMPLE_INTEREST.ask(*SI_VALUES[0])),
    )
    assert same >= 0.8 > other


# -- routing ------------------------------------------------------------------------------------


def test_same_template_requests_share_a_group_and_different_domains_do_not(rig):
    cr = warm(rig, CURRENT_RATIO, CR_VALUES[:2])
    si = warm(rig, SIMPLE_INTEREST, SI_VALUES[:2])
    assert cr[0].group == cr[1].group
    assert si[0].group == si[1].group
    assert cr[0].group != si[0].group
    assert cr[1].similarity >= 0.8 and si[0].similarity < 0.8
    assert sorted(g.n_examples for g in rig.store.list_groups("default")) == [2, 2]


def test_explicit_group_label_takes_precedence_over_similarity(rig):
    unlabeled = ask(rig, CURRENT_RATIO, CR_VALUES[0])
    labeled = ask(rig, CURRENT_RATIO, CR_VALUES[1], group="mine")
    other_domain = ask(rig, SIMPLE_INTEREST, SI_VALUES[0], group="mine")
    assert labeled.group == other_domain.group == "label:mine"
    assert labeled.group != unlabeled.group
    assert labeled.similarity == 1.0
    group = rig.store.get_group("default", "label:mine")
    assert group is not None and group.label == "mine" and group.n_examples == 2


# -- miss ---------------------------------------------------------------------------------------


def test_first_request_is_a_miss_answered_by_the_target_and_recorded(rig):
    question = CURRENT_RATIO.ask(*CR_VALUES[0])
    result = ask(rig, CURRENT_RATIO, CR_VALUES[0])
    assert result.route == "miss" and result.entry_id is None
    assert result.answer_text == "1.5"
    assert "def solve(" in result.program
    assert result.variables == {"current_assets": 45000, "current_liabilities": 30000}
    assert result.tokens["target"] > 0 and result.tokens["small"] == 0
    assert {"route_s", "target_s", "sandbox_s", "record_s", "total_s"} <= set(result.timings)
    examples = rig.store.examples("default", result.group)
    assert len(examples) == 1
    ex = examples[0]
    assert (ex.question, ex.program, ex.answer, ex.variables) == (
        question,
        result.program,
        1.5,
        result.variables,
    )
    assert ex.embedding is not None and ex.embedding.shape == (256,)
    stats = rig.mc.stats()
    assert (stats["requests"], stats["misses"], stats["hits"], stats["groups"]) == (1, 1, 0, 1)
    assert stats["target_tokens"] == result.tokens["target"]
    assert rig.mc.store.list_entries("default") == []


def test_with_miss_retries_a_broken_program_is_corrected_once(make):
    rig = make(target=FakeTarget(mode="broken_once"), miss_retries=1)
    result = ask(rig, CURRENT_RATIO, CR_VALUES[0])
    assert result.route == "miss"
    assert rig.target.miss_calls == 2
    retry = rig.target.calls[1].messages
    assert retry[-1].role == "user" and "That program failed" in retry[-1].content


def test_by_default_a_miss_is_one_target_call_like_pot_even_when_its_program_fails(make):
    rig = make(target=FakeTarget(mode="broken_once"))
    with pytest.raises(SolveError, match="the target's program failed: "):
        ask(rig, CURRENT_RATIO, CR_VALUES[0])
    assert rig.target.miss_calls == 1
    assert rig.store.list_groups("default") == []  # nothing recorded from a failed program


def test_on_route_tells_a_misss_group_and_route_once_before_the_target_writes_its_program(make):
    rig = make()
    told: list[tuple[str, str, int]] = []

    def on_route(group: str, route: str) -> None:
        told.append((group, route, rig.target.miss_calls))  # the target's calls so far

    misses = [ask(rig, CURRENT_RATIO, values, on_route=on_route) for values in CR_VALUES[:3]]
    assert told == [(r.group, "miss", n) for n, r in enumerate(misses)]
    told.clear()
    assert ask(rig, CURRENT_RATIO, CR_VALUES[3], on_route=on_route).route == "hit"
    assert told == []  # a hit is answered whole: nothing to tell before it
    refused = rig.mc.solve(CURRENT_RATIO.ask(64, 16), on_route=on_route)  # outside the seen range
    assert refused.route == "fallback" and told == [(refused.group, "fallback", 3)]


def test_a_miss_that_fails_after_a_refused_hit_says_why_the_hit_was_refused(make):
    rig = make()
    for values in CR_VALUES[:3]:
        ask(rig, CURRENT_RATIO, values)
    assert rig.mc.solve(CURRENT_RATIO.ask(*CR_VALUES[3])).route == "hit"
    rig.target.mode = "broken"
    with pytest.raises(
        SolveError
    ) as failed:  # assets were 9,000 to 120,000: 64 is refused, then the miss fails
        rig.mc.solve(CURRENT_RATIO.ask(64, 16))
    assert (failed.value.fallback_reason or "").startswith("HitRefused: range")
    with pytest.raises(SolveError) as failed:  # no entry, no hit attempt
        rig.mc.solve(SIMPLE_INTEREST.ask(*SI_VALUES[0]))
    assert failed.value.fallback_reason is None


@pytest.mark.parametrize("mode", ["broken", "raise"])
def test_target_failure_raises_solve_error_and_records_no_example(make, mode):
    rig = make(target=FakeTarget(mode=mode))
    with pytest.raises(SolveError):
        rig.mc.solve(CURRENT_RATIO.ask(*CR_VALUES[0]))
    assert rig.store.list_groups("default") == []
    assert rig.store.counters("default").get("misses", 0) == 0


def test_context_is_passed_to_the_target_and_dict_context_becomes_json(rig):
    result = ask(rig, CURRENT_RATIO, CR_VALUES[0], context={"company": "Acme"})
    assert result.route == "miss"
    prompt = rig.target.calls[-1].messages[1].content
    assert 'Context:\n{"company": "Acme"}' in prompt
    assert rig.store.examples("default", result.group)[0].context == '{"company": "Acme"}'


def test_utf8_bytes_question_is_accepted(rig):
    result = rig.mc.solve(CURRENT_RATIO.ask(*CR_VALUES[0]).encode("utf-8"))
    assert result.answer == pytest.approx(1.5)


def test_an_action_object_is_an_answer_compared_key_by_key():
    from minicache.engine import check_answer
    from minicache.errors import AnswerError, SandboxError
    from minicache.programs.signature import answers_match

    action = check_answer({"keywords": "red shoes", "max_price": "40.00"})
    assert action == {"keywords": "red shoes", "max_price": 40.0}
    assert (
        format_answer(action, "Write the Search action")
        == '{"keywords": "red shoes", "max_price": 40.0}'
    )
    assert answers_match(action, {"keywords": "Red Shoes", "max_price": 40})
    assert answers_match(
        action, {"keywords": "shoes, red, size 9", "max_price": 40}
    )  # both words of the shorter
    assert not answers_match(action, {"keywords": "red hat", "max_price": 40})  # 1 of 2
    assert not answers_match(action, {"keywords": "red shoes", "max_price": 41})
    assert check_answer({"keywords": ["red", "shoes"], "max_price": 40}) == {
        "keywords": "red shoes",
        "max_price": 40,
    }
    assert not answers_match(action, {"keywords": "red shoes"}) and not answers_match(action, 40.0)
    for bad in ({}, {"k": None}, {"k": "x" * 3000}):
        with pytest.raises(AnswerError) as caught:
            check_answer(bad)
        assert not isinstance(
            caught.value, SandboxError
        )  # the sandbox did its job; the value is wrong


def test_answer_text_uses_requested_decimal_places():
    assert format_answer(1.5, "What is X? Round to 2 decimal places.") == "1.50"
    assert format_answer(2 / 3, "Give it to three decimal places") == "0.667"
    assert format_answer(7, "How many?") == "7"


# -- build and hit ------------------------------------------------------------------------------


def test_a_request_sent_again_counts_once_toward_a_build(rig):
    # Found racing four clients (test_concurrent_solves_are_correct_and_counted): a group whose held
    # examples were one request sent three times took the whole request, its numbers included, as the
    # group's shared boilerplate, and built an entry missing the variables written there.
    again = warm(rig, CURRENT_RATIO, [CR_VALUES[0]] * 3)
    assert [r.route for r in again] == ["miss"] * 3
    assert rig.store.list_entries("default") == []  # one distinct request: nothing to build from
    warm(rig, CURRENT_RATIO, CR_VALUES[1:3])
    (entry,) = rig.store.list_entries("default", "active")
    assert [v.name for v in entry.template] == ["current_assets", "current_liabilities"]
    hit = ask(rig, CURRENT_RATIO, CR_VALUES[3])
    assert hit.route == "hit" and hit.variables == dict(
        zip(CURRENT_RATIO.names, CR_VALUES[3], strict=True)
    )


def test_entry_is_built_after_build_after_misses_and_next_request_hits(rig):
    first = warm(rig, CURRENT_RATIO, CR_VALUES[:2])
    assert [r.route for r in first] == ["miss", "miss"]
    assert rig.store.list_entries("default") == []
    third = ask(rig, CURRENT_RATIO, CR_VALUES[2])
    assert third.route == "miss"
    entries = rig.store.list_entries("default", "active")
    assert len(entries) == 1
    entry = entries[0]
    assert entry.group_id == third.group
    assert [v.name for v in entry.template] == ["current_assets", "current_liabilities"]
    assert entry.template[0].description.startswith("current assets, dollars (in the example: ")
    assert entry.template[0].unit == "dollars"
    assert entry.validation["extraction"] == "choice"
    assert entry.validation["passed"] >= 2 and entry.validation["of"] == 3
    assert entry.validation["source"] == "lifted"  # the plain miss programs, lifted
    assert rig.store.get_group("default", third.group).status == "cached"
    assert rig.mc.events[-1]["event"] == "build" and rig.mc.events[-1]["ok"] is True

    values = CR_VALUES[3]
    hit = ask(rig, CURRENT_RATIO, values)
    assert hit.route == "hit"
    assert hit.group == third.group and hit.entry_id == entry.id
    assert hit.program == entry.program
    assert hit.variables == dict(zip(CURRENT_RATIO.names, values, strict=True))
    assert {"route_s", "extract_s", "sandbox_s", "total_s"} <= set(hit.timings)
    assert hit.tokens["target"] == 0
    assert hit.similarity >= 0.8
    stats = rig.mc.stats()
    assert (stats["hits"], stats["misses"], stats["builds_ok"], stats["entries_active"]) == (
        1,
        3,
        1,
        1,
    )
    assert stats["hit_rate"] == pytest.approx(0.25)
    assert consistent(stats)
    assert rig.store.get_entry("default", entry.id).hits == 1


def test_hit_with_model_extraction_reports_small_tokens(make):
    rig = make(use_rules=False)
    warm(rig, SIMPLE_INTEREST, SI_VALUES[:3])
    calls = len(rig.small.calls)
    hit = ask(rig, SIMPLE_INTEREST, SI_VALUES[3])
    assert hit.route == "hit" and hit.extraction == "choice"
    assert len(rig.small.calls) == calls + 1
    assert hit.tokens["small"] > 0
    assert rig.mc.stats()["small_tokens"] == hit.tokens["small"]


def test_learned_rules_serve_hits_without_the_small_model(rig):
    warm(rig, SIMPLE_INTEREST, SI_VALUES[:3])
    entry = rig.store.list_entries("default", "active")[0]
    assert set(entry.rules) == {"principal", "rate_pct", "years"}
    assert all(rule["kind"] in ("anchor", "position") for rule in entry.rules.values())
    calls = len(rig.small.calls)
    for values in SI_VALUES[3:]:
        hit = ask(rig, SIMPLE_INTEREST, values)
        assert hit.route == "hit" and hit.extraction == "rule"
        assert hit.variables == dict(zip(SIMPLE_INTEREST.names, values, strict=True))
        assert hit.tokens["small"] == 0
    assert len(rig.small.calls) == calls


def test_miss_asks_for_the_same_plain_program_as_the_pot_baseline(rig):
    from minicache.miss.prompts import plain_pot_messages

    question = CURRENT_RATIO.ask(*CR_VALUES[0])
    ask(rig, CURRENT_RATIO, CR_VALUES[0])
    assert rig.target.calls[-1].messages == plain_pot_messages(question)


def test_a_miss_names_its_group_so_the_target_can_keep_the_groups_prompt_prefix(make):
    rig = make()
    first = ask(rig, CURRENT_RATIO, CR_VALUES[0])
    second = ask(rig, CURRENT_RATIO, CR_VALUES[1])
    keys = [call.options.prefix_key for call in rig.target.calls]
    assert first.group == second.group and keys == [f"default/{first.group}"] * 2
    off = make("off.db", keep_group_prefix=False)
    ask(off, CURRENT_RATIO, CR_VALUES[0])
    assert off.target.calls[-1].options.prefix_key is None


def test_parameterized_miss_programs_become_entries_as_written(make):
    rig = make(target=FakeTarget(mode="parameterized"))
    results = warm(rig, CURRENT_RATIO, CR_VALUES[:3])
    entry = rig.store.active_entry("default", results[0].group)
    assert entry.validation["source"] == "miss-program"
    assert entry.program == CURRENT_RATIO.program(list(CR_VALUES[2]))
    assert rig.target.build_calls == 0


class OneWrongTarget(FakeTarget):
    """Writes a wrong plain program (a sum, not a ratio) for one request, right ones for the others."""

    def __init__(self, wrong: str) -> None:
        super().__init__()
        self.wrong = wrong

    def _miss(self, messages):
        reply = super()._miss(messages)
        if self.wrong in messages[1].content:
            reply = reply.replace(
                "current_assets / current_liabilities", "current_assets + current_liabilities"
            )
        return reply


def test_build_prefers_the_program_the_other_examples_agree_with(make):
    wrong = CURRENT_RATIO.ask(*CR_VALUES[2])
    rig = make(target=OneWrongTarget(wrong))
    warm(rig, CURRENT_RATIO, CR_VALUES[:2])
    last = rig.mc.solve(wrong)  # the newest example: its own program is the wrong one
    assert last.answer == sum(CR_VALUES[2])
    entry = rig.store.active_entry("default", last.group)
    assert "current_assets / current_liabilities" in entry.program
    # The right program ranked first (2 agreements, 1 disagreement) and passed on 2 of 3 held examples.
    assert [a["source"] for a in entry.validation["attempts"]] == ["lifted"]
    assert entry.validation["attempts"][0]["agreements"] == 1
    assert entry.validation["passed"] == 2
    assert ask(rig, CURRENT_RATIO, CR_VALUES[3]).route == "hit"


def test_a_recorded_miss_stores_the_embedding_routing_computed_without_embedding_again(
    make, monkeypatch
):
    """Routing already embeds the request; the miss path stores that vector instead of paying again."""
    rig = make()
    embedder = rig.mc.router.embedder
    calls: list[list[str]] = []
    embed = embedder.embed

    def counting(texts):
        calls.append(list(texts))
        return embed(texts)

    monkeypatch.setattr(embedder, "embed", counting)
    result = ask(rig, CURRENT_RATIO, CR_VALUES[0])
    assert result.route == "miss" and len(calls) == 1
    [example] = rig.store.examples("default", result.group)
    assert np.allclose(example.embedding, embed(calls[0])[0])


def test_a_build_compares_only_the_newest_build_compare_examples(make, monkeypatch):
    """Comparing programs runs candidates x examples programs: a group that gathered many examples
    (failing builds, back-off) must not make each build quadratically slower."""
    rig = make(build_after=6, build_compare=4)
    seen: list[list[str]] = []
    own = build_module.own_candidates

    def recording(examples, prefix, sandbox, limit):
        seen.append([ex.id for ex in examples])
        return own(examples, prefix, sandbox, limit)

    monkeypatch.setattr(build_module, "own_candidates", recording)
    results = warm(rig, CURRENT_RATIO, CR_VALUES[:6])
    stored = [ex.id for ex in rig.store.examples("default", results[0].group)]
    assert len(stored) == 6 and seen == [stored[-4:]]  # the newest four, oldest first
    assert rig.store.active_entry("default", results[0].group) is not None


def test_the_groups_own_programs_add_examples_to_rule_learning(make):
    rig = make(build_after=4)
    results = warm(rig, SIMPLE_INTEREST, SI_VALUES[:4])
    entry = rig.store.active_entry("default", results[0].group)
    # 3 held examples validated through the small model, plus the 4th read off its own program.
    assert entry.validation["of"] == 3 and entry.validation["rule_examples"] == 4
    assert set(entry.rules) == {"principal", "rate_pct", "years"}


def test_an_entrys_stored_records_keep_their_json_form_now_that_they_are_typed(make):
    """Validation is a dataclass and rules are typed classes in the build; what the store holds is
    the JSON entries already in users' files have: the same keys, rules as plain JSON objects."""
    from minicache.hit.rules import parse_rule

    rig = make()
    results = warm(rig, SIMPLE_INTEREST, SI_VALUES[:3])
    entry = rig.store.active_entry("default", results[0].group)
    assert set(entry.validation) == {
        "extraction",
        "passed",
        "shared_prefix",
        "of",
        "source",
        "attempts",
        "rule_examples",
        "profile",
        "held",
        "at",
        "probation",
    }
    assert [set(a) for a in entry.validation["attempts"]] == [
        {"source", "ok", "error", "agreements"}
    ]
    assert entry.rules and all(type(rule) is dict for rule in entry.rules.values())
    assert all(parse_rule(rule).to_json() == rule for rule in entry.rules.values())


@pytest.mark.parametrize("small_mode", ["wrong", "raise"])
def test_a_failed_builds_recorded_checks_say_what_each_example_got_or_why_not(make, small_mode):
    rig = make(small=FakeSmall(mode=small_mode), admission=AdmissionConfig(enabled=False))
    results = warm(rig, CURRENT_RATIO, CR_VALUES[:3])
    record = rig.store.group_failure("default", results[0].group)
    assert record["checks"] and all(
        set(c) == {"example", "expected", "got", "variables", "error"} for c in record["checks"]
    )
    for check in record["checks"]:
        if small_mode == "wrong":  # extracted and ran, but to another answer
            assert check["variables"] and check["got"] is not None and check["error"] is None
        else:  # the small model failed: nothing extracted, nothing run
            assert (
                check["variables"] is None
                and check["got"] is None
                and "small model failed" in check["error"]
            )
    assert all(set(a) == {"source", "ok", "error"} for a in record["attempts"])


def test_unparameterized_miss_programs_are_generalized_by_the_target(make):
    rig = make(target=FakeTarget(mode="constant"))
    results = warm(rig, CURRENT_RATIO, CR_VALUES[:3])
    assert results[0].variables == {}
    assert rig.target.build_calls == 1
    entry = rig.store.active_entry("default", results[0].group)
    assert entry is not None and entry.validation["source"] == "target-build"
    hit = ask(rig, CURRENT_RATIO, CR_VALUES[3])
    assert hit.route == "hit" and hit.entry_id == entry.id


class VaryingTarget(FakeTarget):
    """Writes each current-ratio request's program with its own variable names and, per ``ops``,
    its own operation: requests routed into one group that are different computations (as routing
    has put six TAT-QA derivations into one group)."""

    def __init__(self, ops: list[str]) -> None:
        super().__init__()
        self.ops, self.seen = ops, []

    def _miss(self, messages):
        question = request_of(messages)
        if question not in self.seen:
            self.seen.append(question)
        k = self.seen.index(question)
        a, b = numbers_in(question)[:2]
        program = (
            f"def solve():\n    first_{k} = {a!r}\n    second_{k} = {b!r}\n"
            f"    return first_{k} {self.ops[k]} second_{k}\n"
        )
        return f"```python\n{program}```"


def test_a_group_of_different_computations_is_not_generalized_by_the_target(make):
    """Each example's own program answers only its own example: the target is not asked (its attempt
    is the build's dearest step and is expected to fail), and the failure says why."""
    rig = make(target=VaryingTarget(["/", "-", "+"]), admission=AdmissionConfig(enabled=False))
    for values in CR_VALUES[:3]:
        rig.mc.solve(CURRENT_RATIO.ask(*values), group="mixed")
    rig.mc.wait_for_builds()
    group = rig.store.get_group("default", "label:mixed")
    assert rig.target.build_calls == 0
    assert rig.store.active_entry("default", group.id) is None and group.build_failures == 1
    attempts = rig.store.group_failure("default", group.id)["attempts"]
    assert [a["source"] for a in attempts[:-1]] and all(
        a["source"] == "lifted" for a in attempts[:-1]
    )
    assert attempts[-1] == {"source": "target-build", "ok": False, "error": NO_SHARED_COMPUTATION}


RATIO = (
    "def solve(current_assets=45000, current_liabilities=30000):\n"
    "    return current_assets / current_liabilities\n"
)


@pytest.mark.parametrize("ratios, trusted", [(2, False), (3, True)])
def test_a_backed_candidate_must_fit_more_than_half_of_its_held_examples(make, ratios, trusted):
    """Four held examples (a failed build's wrong ones join the newest), two computations: a program
    another example backs needs ``validate_min`` of them and more than half. On SVAMP an entry was
    once made on 2 of 4 in a group of five different computations; 3 of 4 is trusted."""
    rig = make()
    held = [
        Example(
            id=f"ex{i}",
            tenant="default",
            group_id="g",
            question=CURRENT_RATIO.ask(a, b),
            context=None,
            program="",
            variables={},
            answer=round(a / b if i < ratios else a - b, 4),
        )
        for i, (a, b) in enumerate(CR_VALUES[:4])
    ]
    record = rig.mc.builder.validate(RATIO, held, held[0], "", backed=True)
    assert record.passed == ratios and record.of == 4 and record.ok is trusted
    assert (
        all(c.extraction == "align" for c in record.checks) and not rig.small.calls
    )  # no model asked


def test_a_group_where_another_example_backs_an_own_program_still_asks_the_target(make):
    """Two of three examples, the first and the newest, are one computation under other names: the
    lifted program validated first (the newest) reproduces the first example but not the second, so
    validation (all three required here) fails and the target is asked. (The other unbacked program
    is then not validated, so only the one validated first can show the sharing.)"""
    rig = make(
        target=VaryingTarget(["/", "-", "/"]),
        admission=AdmissionConfig(enabled=False),
        validate_min=3,
    )
    for values in CR_VALUES[:3]:
        rig.mc.solve(CURRENT_RATIO.ask(*values), group="mixed")
    rig.mc.wait_for_builds()
    assert rig.target.build_calls == 1
    attempts = rig.store.group_failure("default", "label:mixed")["attempts"]
    assert (
        attempts[-1]["source"] == "target-build" and attempts[-1]["error"] != NO_SHARED_COMPUTATION
    )


def test_an_own_program_no_other_example_backs_stops_at_its_first_failed_model_check(
    make, monkeypatch
):
    """Three different computations, checked by the small model (no alignment): each lifted program
    answers only its own example, so it must pass every held example, and the first wrong answer
    ends its validation. Before, each spent a second extraction to reach 2 of 3 failures (TAT-QA's
    failed builds: four extractions, 20-25 s). The model is asked here as where a request writes
    too many numbers to try every choice (tests/test_reach.py has the shortcut)."""
    monkeypatch.setattr("minicache.build.validator.unreachable", lambda *args: False)
    rig = make(
        target=VaryingTarget(["/", "-", "+"]),
        admission=AdmissionConfig(enabled=False),
        use_rules=False,
    )
    for values in CR_VALUES[:3]:  # misses; the third builds the group inline
        rig.mc.solve(CURRENT_RATIO.ask(*values), group="mixed")
    rig.mc.wait_for_builds()
    failure = rig.store.group_failure("default", "label:mixed")
    validated = [
        a
        for a in failure["attempts"]
        if a["source"] == "lifted" and a["error"] != UNBACKED_NOT_TRIED
    ]
    assert len(validated) == 1 and not validated[0]["ok"]
    assert len(rig.small.calls) == 1  # one model check, and no other extraction
    assert [c["example"] for c in failure["checks"]] == [failure["examples"][0]]


def test_once_an_unbacked_own_program_fails_a_model_check_the_next_unbacked_one_is_not_validated(
    make, monkeypatch
):
    """Both lifted programs answer only their own example. The first fails the small model's check
    on a held example; the second would be checked on the same held examples, by the same model,
    and is recorded as not validated instead (on TAT-QA: 2.8-6.7 s of extraction each, none ever
    passed), so the failed build costs one extraction, not two. (The model is asked, as in the test
    above; without that, no choice of the held example's numbers gives its answer and none is.)"""
    monkeypatch.setattr("minicache.build.validator.unreachable", lambda *args: False)
    rig = make(
        target=VaryingTarget(["/", "-", "+"]),
        admission=AdmissionConfig(enabled=False),
        use_rules=False,
    )
    for values in CR_VALUES[:3]:
        rig.mc.solve(CURRENT_RATIO.ask(*values), group="mixed")
    rig.mc.wait_for_builds()
    attempts = rig.store.group_failure("default", "label:mixed")["attempts"]
    assert [(a["source"], a["error"] == UNBACKED_NOT_TRIED) for a in attempts] == [
        ("lifted", False),
        ("lifted", True),
        ("target-build", False),
    ]
    assert attempts[-1]["error"] == NO_SHARED_COMPUTATION  # and the target is still not asked
    assert rig.target.build_calls == 0 and len(rig.small.calls) == 1


def test_a_mixed_group_fails_its_build_without_asking_the_small_model(make):
    """The same three computations, with the model-free shortcut on (minicache.build.reach): the first lifted
    program divides, and no choice of the held example's two numbers gives its answer by division,
    so the check fails without a model call, and the build with it (on SVAMP: 1.0-1.2 s a failed
    build before, 0.0 s after)."""
    rig = make(
        target=VaryingTarget(["/", "-", "+"]),
        admission=AdmissionConfig(enabled=False),
        use_rules=False,
    )
    for values in CR_VALUES[:3]:
        rig.mc.solve(CURRENT_RATIO.ask(*values), group="mixed")
    rig.mc.wait_for_builds()
    failure = rig.store.group_failure("default", "label:mixed")
    assert rig.store.active_entry("default", "label:mixed") is None and rig.small.calls == []
    assert [c["error"] for c in failure["checks"]] == [UNREACHABLE]


def test_an_own_program_no_other_example_backs_is_trusted_when_every_held_example_passes(make):
    """One computation written under other names by each example: the programs cannot be compared
    without a model, and the newest one is trusted after the small model's values reproduce all
    three held examples."""
    rig = make(
        target=VaryingTarget(["/", "/", "/"]),
        admission=AdmissionConfig(enabled=False),
        use_rules=False,
    )
    for values in CR_VALUES[:3]:
        rig.mc.solve(CURRENT_RATIO.ask(*values), group="mixed")
    rig.mc.wait_for_builds()
    entry = rig.store.active_entry("default", "label:mixed")
    assert entry is not None and entry.validation["passed"] == entry.validation["of"] == 3
    assert entry.validation["attempts"][0]["agreements"] == 1  # only its own example backed it


def test_a_generalized_program_without_defaults_is_stored_with_the_values_it_validated_with(make):
    """The 1.5B target, asked to generalize, often writes ``def solve(P, r_pct, t)`` with no defaults
    (all 3 of its generalizations in 225 Formula requests): validated as it is, then stored whole."""
    rig = make(target=FakeTarget(mode="constant", build_mode="no_defaults"))
    results = warm(rig, CURRENT_RATIO, CR_VALUES[:3])
    entry = rig.store.active_entry("default", results[0].group)
    assert entry is not None and entry.validation["source"] == "target-build"
    defaults = parse_signature(entry.program).defaults  # a whole signature again
    assert tuple(defaults.values()) in CR_VALUES[:3] and list(defaults) == CURRENT_RATIO.names
    assert (
        "# current assets, dollars" in entry.program
    )  # the comments that describe the variables are kept
    hit = ask(rig, CURRENT_RATIO, CR_VALUES[3])
    assert hit.route == "hit" and hit.entry_id == entry.id


def test_validation_reads_values_by_alignment_before_asking_the_small_model(make):
    """As on a hit: the candidate's own example is the exemplar. A small model that reads every value
    wrong is never asked, and the build passes (on Formula the 0.5B has swapped values in validation)."""
    rig = make(small=FakeSmall(mode="wrong"))
    results = warm(rig, SIMPLE_INTEREST, SI_VALUES[:3])
    entry = rig.store.active_entry("default", results[0].group)
    assert entry is not None and rig.small.calls == []
    hit = ask(rig, SIMPLE_INTEREST, SI_VALUES[3])
    assert hit.route == "hit" and hit.extraction in ("rule", "align") and rig.small.calls == []


def test_without_zero_model_extraction_validation_asks_the_small_model(make):
    rig = make(
        small=FakeSmall(mode="wrong"), use_rules=False, admission=AdmissionConfig(enabled=False)
    )
    results = warm(rig, SIMPLE_INTEREST, SI_VALUES[:3])
    assert rig.store.active_entry("default", results[0].group) is None and rig.small.calls


def test_wrong_extractions_fail_the_build_and_make_the_group_uncacheable(make):
    # Admission off: with fake models a build never pays (tests/test_admission.py covers admission).
    rig = make(small=FakeSmall(mode="wrong"), admission=AdmissionConfig(enabled=False))
    results = warm(rig, CURRENT_RATIO, CR_VALUES[:3])
    group_id = results[0].group
    assert rig.store.list_entries("default") == []
    assert rig.mc.stats()["builds_failed"] == 1
    assert rig.store.get_group("default", group_id).build_failures == 1
    assert rig.store.get_group("default", group_id).status == "open"
    assert rig.mc.events[-1] == {
        "event": "build",
        "tenant": "default",
        "group": group_id,
        "ok": False,
        "attempts": rig.mc.events[-1]["attempts"],
    }

    ask(rig, CURRENT_RATIO, CR_VALUES[3])  # after one failure the next example retries at once ...
    assert rig.mc.stats()["builds_failed"] == 2
    small_calls = len(rig.small.calls)
    ask(
        rig, CURRENT_RATIO, CR_VALUES[4]
    )  # ... after two it backs off in time (minicache.build.admission)
    assert len(rig.small.calls) == small_calls and rig.mc.stats()["builds_failed"] == 2
    group = rig.store.get_group("default", group_id)
    group.uncacheable_until = 0.0  # the back-off has run out: the next example retries
    rig.store.update_group(group)
    ask(rig, CURRENT_RATIO, CR_VALUES[5])
    group = rig.store.get_group("default", group_id)
    assert group.build_failures == 3 and group.status == "uncacheable"
    assert rig.mc.stats()["builds_failed"] == 3 and rig.mc.stats()["uncacheable_groups"] == 1

    small_calls, build_calls = len(rig.small.calls), rig.target.build_calls
    result = ask(rig, CURRENT_RATIO, CR_VALUES[9])
    assert result.route == "miss"
    assert (len(rig.small.calls), rig.target.build_calls) == (
        small_calls,
        build_calls,
    )  # no build tried
    assert rig.store.list_entries("default") == []
    assert rig.mc.stats()["builds_failed"] == 3


def test_failed_target_generalization_counts_as_failed_build(make):
    rig = make(target=FakeTarget(mode="constant", build_mode="raise"))
    warm(rig, CURRENT_RATIO, CR_VALUES[:3])
    assert rig.target.build_calls == 1
    assert rig.store.list_entries("default") == []
    assert rig.mc.stats()["builds_failed"] == 1


# -- fallback -----------------------------------------------------------------------------------


def test_failing_extraction_falls_back_to_the_target_and_evicts_after_max_failures(make):
    rig = make(use_rules=False)
    warm(rig, CURRENT_RATIO, CR_VALUES[:3])
    entry = rig.store.list_entries("default", "active")[0]
    rig.small.mode = "raise"

    for n, values in enumerate(CR_VALUES[3:6], start=1):
        result = ask(rig, CURRENT_RATIO, values)
        assert result.route == "fallback"
        assert "ExtractionError" in result.fallback_reason
        assert result.group == entry.group_id
        assert rig.store.get_entry("default", entry.id).failures == n
    assert rig.store.get_entry("default", entry.id).status == "evicted"
    assert rig.store.active_entry("default", entry.group_id) is None
    assert {
        "event": "evict",
        "group": entry.group_id,
        "entry": entry.id,
        "failures": 3,
    } in rig.mc.events
    stats = rig.mc.stats()
    assert (stats["fallbacks"], stats["evictions"], stats["entries_active"]) == (3, 1, 0)
    assert consistent(stats)

    after = ask(rig, CURRENT_RATIO, CR_VALUES[6])
    assert after.route == "miss"


@pytest.mark.parametrize(("kind", "failures"), [("busy", 0), ("error", 1)])
def test_a_busy_sandbox_on_a_hit_falls_back_without_counting_against_the_entry(
    make, monkeypatch, kind, failures
):
    """A pool with no free worker says nothing about the entry's program; a program error does."""
    from minicache.errors import SandboxError

    rig = make()
    warm(rig, CURRENT_RATIO, CR_VALUES[:3])
    entry = rig.store.list_entries("default", "active")[0]
    run, calls = rig.mc.sandbox.run, []

    def first_call_fails(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:  # the hit's run; the miss that follows runs normally
            raise SandboxError("no sandbox worker became free within 60 s", kind=kind)
        return run(*args, **kwargs)

    monkeypatch.setattr(rig.mc.sandbox, "run", first_call_fails)
    result = ask(rig, CURRENT_RATIO, CR_VALUES[3])
    assert result.route == "fallback" and result.fallback_reason.startswith("SandboxError")
    assert rig.store.get_entry("default", entry.id).failures == failures


@pytest.mark.parametrize("mode", ["raise", "invalid_json", "not_object", "missing", "string"])
def test_template_the_small_model_cannot_fill_falls_back_cleanly(make, mode):
    rig = make(use_rules=False)
    warm(rig, SIMPLE_INTEREST, SI_VALUES[:3])
    entry = rig.store.list_entries("default", "active")[0]
    rig.small.mode = mode
    result = ask(rig, SIMPLE_INTEREST, SI_VALUES[3])
    assert result.route == "fallback"
    assert result.fallback_reason.startswith("ExtractionError")
    assert result.tokens["target"] > 0
    assert rig.store.get_entry("default", entry.id).failures == 1
    assert rig.store.get_entry("default", entry.id).status == "active"
    stats = rig.mc.stats()
    assert (stats["fallbacks"], stats["hits"]) == (1, 0) and consistent(stats)


def test_request_a_rule_cannot_read_asks_the_small_model(rig):
    warm(rig, CURRENT_RATIO, CR_VALUES[:3], group="cr")
    calls = len(rig.small.calls)
    # Different wording, same group by label: the learned anchors ("assets are") do not apply.
    result = rig.mc.solve(
        "Current ratio please: assets 64,000 over liabilities 16,000.", group="cr"
    )
    assert result.route == "hit" and result.extraction == "choice"
    assert result.answer == pytest.approx(4.0)
    assert len(rig.small.calls) == calls + 1


# -- invalidation -------------------------------------------------------------------------------


def test_invalidate_group_by_label_evicts_its_entry(rig):
    warm(rig, CURRENT_RATIO, CR_VALUES[:3], group="cr")
    warm(rig, SIMPLE_INTEREST, SI_VALUES[:3])
    cr_entry = rig.store.active_entry("default", "label:cr")
    si_entry = [e for e in rig.store.list_entries("default", "active") if e.id != cr_entry.id][0]
    assert rig.mc.invalidate(group="cr") == 1
    assert rig.store.get_entry("default", cr_entry.id).status == "evicted"
    assert rig.store.get_entry("default", si_entry.id).status == "active"
    result = ask(rig, CURRENT_RATIO, CR_VALUES[3], group="cr")
    assert result.route == "miss"
    # Invalidation forgot the group's examples: it starts afresh and is rebuilt from new requests only.
    assert rig.store.active_entry("default", "label:cr") is None
    assert len(rig.store.examples("default", "label:cr")) == 1
    warm(rig, CURRENT_RATIO, CR_VALUES[4:6], group="cr")
    rebuilt = rig.store.active_entry("default", "label:cr")
    assert rebuilt is not None and rebuilt.id != cr_entry.id and rebuilt.version == 2
    assert rig.mc.invalidate(group="label:cr") == 1
    assert rig.store.active_entry("default", "label:cr") is None
    assert rig.mc.invalidate(group="no-such-group") == 0


def test_invalidate_group_by_group_id(rig):
    results = warm(rig, SIMPLE_INTEREST, SI_VALUES[:3])
    assert rig.mc.invalidate(group=results[0].group) == 1
    assert rig.store.active_entry("default", results[0].group) is None


def test_invalidate_entry_by_id(rig):
    results = warm(rig, CURRENT_RATIO, CR_VALUES[:3])
    entry = rig.store.active_entry("default", results[0].group)
    assert rig.mc.invalidate(entry=entry.id) == 1
    assert rig.store.get_entry("default", entry.id).status == "evicted"
    assert rig.store.get_group("default", results[0].group).status == "open"
    assert rig.mc.invalidate(entry="ent_does_not_exist") == 0
    with pytest.raises(InvalidRequest):
        rig.mc.invalidate()


# -- persistence, concurrency, tenants ----------------------------------------------------------


def test_entry_survives_a_restart_on_the_same_database(make):
    first = make("shared.db")
    warm(first, CURRENT_RATIO, CR_VALUES[:3])
    entry_id = first.store.list_entries("default", "active")[0].id
    first.mc.close()

    second = make("shared.db")
    hit = ask(second, CURRENT_RATIO, CR_VALUES[3])
    assert hit.route == "hit" and hit.entry_id == entry_id
    assert second.target.calls == []
    stats = second.mc.stats()
    assert (stats["requests"], stats["misses"], stats["hits"]) == (4, 3, 1)


def test_concurrent_solves_are_correct_and_counted(rig):
    # One request per domain first, so that both groups exist before the threads race.
    ask(rig, CURRENT_RATIO, CR_VALUES[0])
    ask(rig, SIMPLE_INTEREST, SI_VALUES[0])
    errors: list[BaseException] = []
    routes: list[str] = []
    lock = threading.Lock()

    def worker(k: int) -> None:
        try:
            for i in range(6):
                if (i + k) % 2:
                    values = CR_VALUES[(i + k) % len(CR_VALUES)]
                    result = rig.mc.solve(CURRENT_RATIO.ask(*values))
                    expected = CURRENT_RATIO.answer(*values)
                else:
                    values = SI_VALUES[(i + k) % len(SI_VALUES)]
                    result = rig.mc.solve(SIMPLE_INTEREST.ask(*values))
                    expected = SIMPLE_INTEREST.answer(*values)
                assert result.answer == pytest.approx(expected), (values, result)
                with lock:
                    routes.append(result.route)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(routes) == 24
    stats = rig.mc.stats()
    assert stats["requests"] == 26
    assert consistent(stats)
    assert stats["hits"] == routes.count("hit") and stats["fallbacks"] == 0
    assert stats["hits"] > 0
    assert stats["groups"] == 2


def test_export_import_round_trip_into_another_tenant(rig):
    warm(rig, CURRENT_RATIO, CR_VALUES[:3], group="cr", tenant="a")
    exported = rig.mc.export_entries("a")
    assert len(exported) == 1 and exported[0]["tenant"] == "a"
    assert rig.mc.import_entries(exported, tenant="b") == 1
    imported = rig.store.list_entries("b", "active")
    assert len(imported) == 1
    assert imported[0].id != exported[0]["id"] and imported[0].tenant == "b"
    assert (
        imported[0].program == exported[0]["program"] and imported[0].rules == exported[0]["rules"]
    )
    hit = ask(rig, CURRENT_RATIO, CR_VALUES[3], group="cr", tenant="b")
    assert hit.route == "hit" and hit.entry_id == imported[0].id
    assert rig.target.miss_calls == 3  # tenant b never asked the target
    assert rig.mc.stats("b")["hits"] == 1 and rig.mc.stats("a")["hits"] == 0


def test_imported_entries_serve_unlabelled_requests(rig):
    warm(rig, CURRENT_RATIO, CR_VALUES[:3], tenant="a")
    assert rig.mc.import_entries(rig.mc.export_entries("a"), tenant="b") == 1
    hit = ask(rig, CURRENT_RATIO, CR_VALUES[3], tenant="b")
    assert hit.route == "hit"


def test_warm_start_reads_exported_entries_from_a_file(rig, tmp_path):
    import json

    warm(rig, CURRENT_RATIO, CR_VALUES[:3], group="cr")
    path = tmp_path / "entries.json"
    path.write_text(json.dumps(rig.mc.export_entries()), encoding="utf-8")
    assert rig.mc.warm_start(path, tenant="c") == 1
    assert ask(rig, CURRENT_RATIO, CR_VALUES[4], group="cr", tenant="c").route == "hit"
    path.write_text('{"not": "a list"}', encoding="utf-8")
    with pytest.raises(InvalidRequest):
        rig.mc.warm_start(path, tenant="d")
    with pytest.raises(InvalidRequest):
        rig.mc.warm_start(tmp_path / "missing.json", tenant="d")
    assert rig.store.list_entries("d") == []


def test_entry_in_one_tenant_is_not_a_hit_in_another(rig):
    warm(rig, CURRENT_RATIO, CR_VALUES[:3], tenant="a")
    assert ask(rig, CURRENT_RATIO, CR_VALUES[3], tenant="a").route == "hit"
    other = ask(rig, CURRENT_RATIO, CR_VALUES[4], tenant="b")
    assert other.route == "miss"
    labelled = warm(rig, SIMPLE_INTEREST, SI_VALUES[:3], group="si", tenant="a")
    assert labelled[-1].route == "miss"
    assert ask(rig, SIMPLE_INTEREST, SI_VALUES[3], group="si", tenant="b").route == "miss"
    assert rig.store.list_entries("b") == []
    assert rig.mc.stats("b")["requests"] == 2 and rig.mc.stats("b")["hits"] == 0
    assert rig.mc.stats("a")["hits"] == 1


# -- bad input ----------------------------------------------------------------------------------

GOOD = CURRENT_RATIO.ask(*CR_VALUES[0])

BAD_REQUESTS = {
    "empty question": dict(question=""),
    "whitespace question": dict(question=" \n\t "),
    "None question": dict(question=None),
    "1 MB question": dict(question=GOOD + " " + "x" * 1_000_000),
    "non-UTF-8 bytes": dict(question=b"What is the current ratio \xff\xfe?"),
    "NUL in question": dict(question=GOOD + "\x00"),
    "question is a number": dict(question=42),
    "question is a dict": dict(question={"q": GOOD}),
    "context is an object": dict(question=GOOD, context=object()),
    "non-UTF-8 context": dict(question=GOOD, context=b"\x80\x81"),
    "too-long group label": dict(question=GOOD, group="g" * 201),
    "blank group label": dict(question=GOOD, group="   "),
    "group label not text": dict(question=GOOD, group=7),
    "empty tenant": dict(question=GOOD, tenant=""),
    "too-long tenant": dict(question=GOOD, tenant="t" * 201),
}


@pytest.mark.parametrize("case", list(BAD_REQUESTS), ids=list(BAD_REQUESTS))
def test_bad_request_is_rejected_and_changes_nothing(make, case):
    rig = make()
    warm(rig, CURRENT_RATIO, CR_VALUES[:3])  # a store with a group and an active entry
    tenants = ["default", "", "t" * 201]
    before = [snapshot(rig.store, t) for t in tenants]
    calls = (len(rig.target.calls), len(rig.small.calls))
    kwargs = dict(BAD_REQUESTS[case])
    question = kwargs.pop("question")
    with pytest.raises(InvalidRequest):
        rig.mc.solve(question, **kwargs)
    assert [snapshot(rig.store, t) for t in tenants] == before
    assert (len(rig.target.calls), len(rig.small.calls)) == calls


def test_too_long_context_is_rejected(make):
    rig = make(max_context_chars=100)
    with pytest.raises(InvalidRequest):
        rig.mc.solve(GOOD, context="c" * 101)
    assert rig.store.counters("default") == {}


# -- no_cache / no_store / force_refresh --------------------------------------------------------


def test_no_cache_skips_an_active_entry(rig):
    warm(rig, CURRENT_RATIO, CR_VALUES[:3])
    result = ask(rig, CURRENT_RATIO, CR_VALUES[3], no_cache=True)
    assert result.route == "miss"
    assert rig.store.examples("default", result.group)[-1].question == CURRENT_RATIO.ask(
        *CR_VALUES[3]
    )


def test_force_refresh_recomputes_with_the_target_and_records_it(rig):
    warm(rig, CURRENT_RATIO, CR_VALUES[:3])
    calls = rig.target.miss_calls
    result = ask(rig, CURRENT_RATIO, CR_VALUES[0], force_refresh=True)
    assert result.route == "miss" and rig.target.miss_calls == calls + 1
    assert len(rig.store.examples("default", result.group)) == 4


def test_no_store_miss_records_nothing(rig):
    ask(rig, CURRENT_RATIO, CR_VALUES[0])
    before = snapshot(rig.store)
    result = ask(rig, CURRENT_RATIO, CR_VALUES[1], no_store=True)
    assert result.route == "miss"
    assert snapshot(rig.store) == before


def test_no_store_hit_records_nothing(rig):
    warm(rig, CURRENT_RATIO, CR_VALUES[:3])
    before = snapshot(rig.store)
    result = ask(rig, CURRENT_RATIO, CR_VALUES[3], no_store=True)
    assert result.route == "hit"
    assert snapshot(rig.store) == before


# -- import validation --------------------------------------------------------------------------


def _bad_entries(good: dict) -> dict[str, object]:
    no_hash = {k: v for k, v in good.items() if k != "program_hash"}
    return {
        "missing program": {k: v for k, v in good.items() if k not in ("program", "program_hash")},
        "missing group_id": {k: v for k, v in good.items() if k != "group_id"},
        "program_hash mismatch": dict(good, program=good["program"].replace("/", "*")),
        "parameters without defaults": dict(
            no_hash, program="def solve(a, b):\n    return a / b\n"
        ),
        "forbidden import": dict(
            no_hash, program="import os\ndef solve(x=1,  # x\n):\n    return x\n"
        ),
        "no solve function": dict(no_hash, program="def other(x=1):\n    return x\n"),
        "unknown template field": dict(good, template=[{"name": "x", "colour": "red"}]),
        "version not a number": dict(good, version="v2"),
        "not a dict": "this is not an entry",
        "None": None,
    }


@pytest.mark.parametrize("case", list(_bad_entries({"program": "", "group_id": ""})))
def test_import_with_one_bad_entry_writes_nothing(rig, case):
    warm(rig, CURRENT_RATIO, CR_VALUES[:3], group="cr")
    good = rig.mc.export_entries()[0]
    bad = _bad_entries(good)[case]
    with pytest.raises(InvalidRequest):
        rig.mc.import_entries([good, bad], tenant="b")
    assert rig.store.list_entries("b") == [] and rig.store.list_groups("b") == []


def test_imported_entry_with_malformed_rules_does_not_crash_solve(rig):
    warm(rig, CURRENT_RATIO, CR_VALUES[:3], group="cr")
    good = rig.mc.export_entries()[0]
    bad = dict(good, rules={name: {"kind": "anchor"} for name in CURRENT_RATIO.names})  # no "words"
    try:
        rig.mc.import_entries([bad], tenant="b")
    except InvalidRequest:
        assert rig.store.list_entries("b") == []
        return
    result = ask(rig, CURRENT_RATIO, CR_VALUES[3], group="cr", tenant="b")
    assert result.route in ("hit", "fallback")


def test_an_evicted_entry_is_rebuilt_from_the_groups_examples_and_serves_again(make):
    rig = make(use_rules=False)
    warm(rig, CURRENT_RATIO, CR_VALUES[:3])
    first = rig.store.list_entries("default", "active")[0]
    rig.small.mode = "raise"
    for values in CR_VALUES[3:6]:
        assert ask(rig, CURRENT_RATIO, values).route == "fallback"
    assert rig.store.get_entry("default", first.id).status == "evicted"
    rig.small.mode = "ok"  # the cause went away: the next miss rebuilds the group
    assert ask(rig, CURRENT_RATIO, CR_VALUES[6]).route == "miss"
    rebuilt = rig.store.active_entry("default", first.group_id)
    assert rebuilt is not None and rebuilt.id != first.id and rebuilt.version == 2
    hit = ask(rig, CURRENT_RATIO, CR_VALUES[7])
    assert hit.route == "hit" and hit.entry_id == rebuilt.id


def test_a_running_background_build_is_shown_by_the_engine_and_the_dashboards_reader(
    tmp_path, sandbox
):
    from minicache.server.dashboard.views import building

    store = SQLiteStore(tmp_path / "running.db")
    config = EngineConfig(background_builds=True, admission=AdmissionConfig(enabled=False))
    release = threading.Event()
    with MiniCache(
        FakeTarget(),
        FakeSmall(),
        store=store,
        embedder=HashEmbedder(),
        config=config,
        sandbox=sandbox,
    ) as mc:
        build_locked = mc.builder._build_locked

        def held(tenant, group_id):
            release.wait(30)
            return build_locked(tenant, group_id)

        mc.builder._build_locked = held  # type: ignore[method-assign]
        group = [mc.solve(CURRENT_RATIO.ask(*values)) for values in CR_VALUES[:3]][0].group
        assert mc.building_groups("default") == {group} == building(mc, "default")
        assert mc.building_groups("other") == set()
        release.set()
        mc.wait_for_builds(timeout=30)
        assert mc.building_groups("default") == set() == building(mc, "default")
        assert store.active_entry("default", group) is not None


def test_a_background_build_that_raises_is_counted_logged_and_shown(
    tmp_path, sandbox, caplog, monkeypatch
):
    store = SQLiteStore(tmp_path / "bg.db")
    config = EngineConfig(background_builds=True, admission=AdmissionConfig(enabled=False))
    with MiniCache(
        FakeTarget(),
        FakeSmall(),
        store=store,
        embedder=HashEmbedder(),
        config=config,
        sandbox=sandbox,
    ) as mc:

        def crash(tenant, group_id):
            raise RuntimeError("store went away mid-build")

        monkeypatch.setattr(mc.builder, "_build_locked", crash)
        with caplog.at_level("ERROR", logger="minicache.engine"):
            for values in CR_VALUES[:4]:
                mc.solve(CURRENT_RATIO.ask(*values))
            deadline = time.monotonic() + 30
            while (
                store.counters("default").get("builds_failed", 0) == 0
                and time.monotonic() < deadline
            ):
                time.sleep(0.05)
        assert store.counters("default").get("builds_failed", 0) >= 1
        assert any("store went away mid-build" in r.getMessage() for r in caplog.records)
        failed = [e for e in mc.events if e["event"] == "build" and not e["ok"]]
        assert failed and failed[-1]["error"] == "store went away mid-build"
