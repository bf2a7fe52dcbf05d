"""StepCache with a scripted target: segmentation, checks, reuse, patching, repair, solver, skip-reuse."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from minicache import FakeBackend, MiniCache
from minicache.config.engine import StepConfig
from minicache.engine import InvalidRequest
from minicache.stepcache import NotAStepTask, StepCache, jsontask, linear, parse
from minicache.stepcache.steps import integrity, render, segment
from minicache.store import open_store
from minicache_bench.stepcache import micro
from tests.fakes import FakeSmall, FakeTarget, HashEmbedder

EQ = "Solve for x: 3x + 5 = 20. Show your work as numbered steps, one per line, and end with the line 'x = <value>'."
GOOD = "Step 1: Subtract 5 from both sides: 3x = 20 - 5 = 15\nStep 2: Divide both sides by 3: x = 15/3 = 5\nx = 5"
PRODUCT = (
    'Create a JSON object for this record: the product "Desk Lamp" costs 24.50 dollars, 3 units are in stock '
    'and it is sold by "Northwind". Return only the JSON. Required keys: "name" (string), "price" (number), '
    '"stock" (integer).'
)


def eq(text: str = "3x + 5 = 20", var: str = "x", fmt: str | None = None) -> str:
    fmt = fmt or f"{var} = <value>"
    return (
        f"Solve for {var}: {text}. Show your work as numbered steps, one per line, and end with the line "
        f"'{fmt}'."
    )


class Scripted:
    """A target that answers from a list of replies and records every prompt it saw."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.backend = FakeBackend(self._next, name="scripted-target")

    def _next(self, messages, options):
        if not self.replies:
            raise AssertionError(f"unexpected model call: {messages[-1].content[:200]}")
        reply = self.replies.pop(0)
        return reply(messages, options) if callable(reply) else reply

    @property
    def calls(self):
        return self.backend.calls


def cache(tmp_path, replies=()):
    target = Scripted(replies)
    return StepCache(target.backend, open_store(str(tmp_path / "s.db")), HashEmbedder()), target


# -- segmentation ------------------------------------------------------------------------------


def test_segmentation_drops_labels_and_joins_wrapped_lines():
    text = "Step 1: Subtract 5 from both sides.\n3x = 15\n\n2) Divide by 3: x = 5\nx = 5"
    assert segment(text) == ["Subtract 5 from both sides. 3x = 15", "Divide by 3: x = 5", "x = 5"]


def test_unnumbered_lines_are_steps_and_json_is_one_step():
    assert segment("3x = 15\nx = 5") == ["3x = 15", "x = 5"]
    assert segment('{"a": 1,\n "b": 2}', "json") == ['{"a": 1,\n "b": 2}']
    assert segment("   ") == []


def test_rendered_steps_read_back_as_the_same_steps():
    steps = ["Subtract 5: 3x = 15", "Divide by 3: x = 5", "Answer: 5"]
    text = render(steps)
    assert text.splitlines()[0] == "Step 1: Subtract 5: 3x = 15" and text.endswith("\nAnswer: 5")
    assert integrity(steps, text) is None
    assert integrity(steps, text + "\nStep 9: extra") is not None


# -- linear equations: parsing and checks ------------------------------------------------------


def test_parses_the_equation_unknown_answer_format_and_frame():
    req = linear.parse_request(eq("4(y - 2) = 2y + 6", "y", "Answer: <value>"))
    assert (req.variable, req.answer_format, linear.solve(req)) == (
        "y",
        "Answer: <value>",
        Fraction(7),
    )
    assert req.constants == [4, 2, 2, 6]
    # the frame masks constants, the unknown and the answer format, not the operation
    assert req.frame == linear.parse_request(eq("9(x - 1) = 3x + 2", "x")).frame
    assert req.frame != linear.parse_request(eq("4(y + 2) = 2y + 6", "y")).frame


@pytest.mark.parametrize(
    "text",
    [
        "What is 3 + 4?",
        "Solve the system: x + y = 3 and x - y = 1.",
        "Solve for x: x*x = 9.",
        "Solve for x: 2x + 1 = 2x + 3.",
    ],
)
def test_requests_that_are_not_one_linear_equation_are_not_parsed(text):
    assert linear.parse_request(text) is None


def test_step_check_accepts_equivalent_equations_and_true_arithmetic():
    req = linear.parse_request(EQ)
    assert linear.check_step(req, "Subtract 5 from both sides: 3x = 20 - 5 = 15.") is None
    assert linear.check_step(req, "Divide both sides by 3: x = 15 ÷ 3") is None
    assert linear.check_step(req, "We isolate the unknown.") is None  # prose: nothing to check


def test_step_check_rejects_wrong_arithmetic_and_non_equivalent_equations():
    req = linear.parse_request(EQ)
    assert "does not hold" in linear.check_step(req, "3x = 20 - 5 = 16")
    assert "does not hold" in linear.check_step(req, "Subtract 5: 3x = 25")


def test_final_check_needs_the_requested_format_and_a_value_that_substitutes():
    req = linear.parse_request(eq(fmt="Answer: <value>"))
    assert linear.check_final(req, "Answer: 5") is None
    assert "format" in linear.check_final(req, "x = 5")
    assert "does not satisfy" in linear.check_final(req, "Answer: 6")


def test_deterministic_solver_writes_steps_that_pass_every_check():
    for text in ["7 - 2t = 3t - 8", "t/4 + 3 = 9", "5(t - 2) = 3t + 1"]:
        req = linear.parse_request(eq(text, "t", '{"t": <value>}'))
        steps = linear.solver_steps(req)
        assert not any(linear.check_steps(req, steps)), steps
        assert linear.read_answer(req, steps[-1]) == linear.solve(req)


def test_cached_steps_are_rederived_for_new_constants_and_a_renamed_unknown():
    old, new = linear.parse_request(EQ), linear.parse_request(eq("7y + 4 = 39", "y"))
    lifted = linear.lift_steps(old, segment(GOOD), new)
    assert lifted == [
        "Subtract 4 from both sides: 7y = 39 - 4 = 35",
        "Divide both sides by 7: y = 35/7 = 5",
        "y = 5",
    ]
    assert not any(linear.check_steps(new, lifted))


# -- JSON: parsing and checks ------------------------------------------------------------------


def test_json_request_keys_record_and_slots():
    req = jsontask.parse_request(PRODUCT)
    assert req.fields == [("name", "string"), ("price", "number"), ("stock", "integer")]
    assert req.strings == ["Desk Lamp", "Northwind"] and req.numbers == ["24.50", "3"]
    assert "Required keys" not in req.record
    assert req.schema(only=["stock"]) == {
        "type": "object",
        "properties": {"stock": {"type": "integer"}},
        "required": ["stock"],
        "additionalProperties": False,
    }


def test_json_checks_types_required_keys_and_values_from_the_request():
    req = jsontask.parse_request(PRODUCT)
    good = {"name": "Desk Lamp", "price": 24.5, "stock": 3}
    assert not any(jsontask.check_object(req, good).values())
    v = jsontask.check_object(
        req, {"name": "Desk Lamp", "price": "24.50", "stock": 4, "color": "red"}
    )
    assert "should be number" in v["price"] and "not a number in the request" in v["stock"]
    assert "keys not asked for" in v["*"]
    assert "missing" in jsontask.check_object(req, {"name": "Desk Lamp"})["price"]
    assert (
        "not one of the request's values"
        in jsontask.check_object(req, dict(good, name="Chair"))["name"]
    )


@pytest.mark.parametrize(
    "value,ok",
    [
        ("Desk Lamp", True),
        ("desk lamp", True),
        ("Desk", False),
        ("Desk Lamp costs", False),
        ("3", True),
        ("3 units", False),
        ("24.5", True),
        ("dollars", True),
        ("", False),
    ],
)
def test_a_string_value_must_be_a_whole_value_of_the_record(value, ok):
    req = jsontask.parse_request(
        PRODUCT.replace('"name" (string)', '"name" (string), "note" (string)')
    )
    assert (jsontask.check_field(req, "note", "string", {"note": value}) is None) is ok
    assert jsontask.check_object(req, None) == {"*": "not a JSON object"}


def test_json_values_are_rebound_slot_by_slot_and_unknown_keys_left_for_the_patch():
    old = jsontask.parse_request(PRODUCT)
    cached = {"name": "Desk Lamp", "price": 24.5, "stock": 3}
    renamed = jsontask.parse_request(
        PRODUCT.replace("Desk Lamp", "Office Chair")
        .replace("24.50", "99.99")
        .replace('"stock" (integer)', '"quantity" (integer)')
    )
    assert jsontask.rebind(old, cached, renamed) == {
        "name": "Office Chair",
        "price": 99.99,
        "quantity": 3,
    }
    wider = jsontask.parse_request(PRODUCT.replace("(integer).", '(integer), "seller" (string).'))
    assert (
        jsontask.rebind(old, cached, wider) == cached
    )  # 'seller' was never cached: the patch writes it
    retyped = jsontask.parse_request(PRODUCT.replace('"stock" (integer)', '"stock" (string)'))
    assert (
        jsontask.rebind(old, cached, retyped)["stock"] == "3"
    )  # the slot's number as the record writes it
    back = jsontask.parse_request(PRODUCT.replace('"name" (string)', '"name" (number)'))
    assert "name" not in jsontask.rebind(
        old, cached, back
    )  # a string asked for as a number: patched


# -- the cache: reuse, patch, repair, solver, skip ---------------------------------------------


def test_first_request_generates_in_full_and_a_variant_is_served_without_the_model(tmp_path):
    sc, target = cache(tmp_path, [GOOD])
    first = sc.solve(EQ)
    assert first.route == "step-skip" and first.verified and first.answer == 5 and not first.patched
    variant = sc.solve(eq("7y + 4 = 39", "y"))
    assert variant.route == "step-reuse" and variant.verified and variant.reused_from
    assert variant.output.endswith("\ny = 5") and variant.tokens == 0
    assert len(target.calls) == 1


def test_another_answer_format_rewrites_the_final_line_without_the_model(tmp_path):
    sc, target = cache(tmp_path, [GOOD])
    sc.solve(EQ)
    out = sc.solve(eq("7y + 4 = 39", "y", fmt='{"y": <value>}'))
    assert out.route == "step-reuse" and out.verified and out.steps[-1] == '{"y": 5}'
    assert len(target.calls) == 1


def test_a_final_line_out_of_format_is_patched_alone_as_one_line(tmp_path):
    sc, target = cache(
        tmp_path,
        [
            "Step 1: Subtract 5 from both sides: 3x = 15\nStep 2: Divide by 3: x = 5\nSo x is 5",
            "x = 5",
        ],
    )
    out = sc.solve(EQ)
    assert (
        out.route == "step-skip" and out.patched == 1 and out.verified and out.steps[-1] == "x = 5"
    )
    patch_prompt = target.calls[-1].messages[-1].content
    assert "Step 1: Subtract 5 from both sides" in patch_prompt and "final line" in patch_prompt
    assert target.calls[-1].options.stop == ("\n",)  # one line, nothing after it


def test_a_failing_middle_step_is_regenerated_with_the_verified_steps_before_it(tmp_path):
    bad = GOOD.replace("3x = 20 - 5 = 15", "3x = 20 - 5 = 14")
    sc, target = cache(tmp_path, [bad, "Subtract 5 from both sides: 3x = 15"])
    out = sc.solve(EQ)
    assert (
        out.route == "step-skip" and out.patched == 1 and out.verified and not out.solver_fallback
    )
    assert out.steps[0] == "Subtract 5 from both sides: 3x = 15"
    assert "Write only Step 1" in target.calls[1].messages[-1].content


def test_each_patch_carries_the_check_message_and_repair_rounds_retry(tmp_path):
    wrong = GOOD.replace("x = 5", "x = 6")
    target = Scripted([wrong, "x = 7", "x = 5"])
    sc = StepCache(
        target.backend,
        open_store(str(tmp_path / "s.db")),
        HashEmbedder(),
        StepConfig(repair_rounds=1),
    )
    out = sc.solve(EQ)
    assert out.verified and not out.solver_fallback and out.answer == 5
    assert "'x = 6' does not hold" in target.calls[1].messages[-1].content
    assert "previous attempt" in target.calls[2].messages[-1].content
    assert "'x = 7' does not hold" in target.calls[2].messages[-1].content


def test_an_answer_with_more_failing_steps_than_the_patch_budget_goes_to_the_solver_unpatched(
    tmp_path,
):
    bad = "Step 1: 3x = 14\nStep 2: x = 14/3 = 4\nStep 3: x = 4\nx = 4"
    sc, target = cache(tmp_path, [bad])
    out = sc.solve(EQ)
    assert out.solver_fallback and out.verified and out.patched == 0 and len(target.calls) == 1
    assert "too many steps failed" in out.reason


def test_solver_answers_when_the_model_keeps_failing_and_says_so(tmp_path):
    sc, target = cache(tmp_path, ["x = 4"] * 10)
    out = sc.solve(EQ)
    assert out.solver_fallback and out.verified and out.answer == 5
    assert "deterministic solver" in out.reason
    assert (
        len(target.calls) == 1 + 1 + sc.config.repair_rounds
    )  # generation + first patch + repairs
    ok, why = micro.check_output("linear", out.output, EQ, 5)
    assert ok, why


@pytest.mark.parametrize(
    "changed",
    [
        eq("3x - 5 = 20"),  # another operation
        eq("3x + 5 = 2x + 20"),  # the unknown on both sides: another form
        eq("3(x + 5) = 20"),
    ],
)
def test_a_semantic_change_skips_reuse(tmp_path, changed):
    req = linear.parse_request(changed)
    sc, target = cache(tmp_path, [GOOD, lambda m, o: "\n".join(linear.solver_steps(req))])
    sc.solve(EQ)
    out = sc.solve(changed)
    assert out.route == "step-skip"
    assert out.reason.startswith("semantic change") or out.reason.startswith("no cached request")
    assert out.verified


def test_requests_of_another_task_never_reuse_each_other(tmp_path):
    sc, _ = cache(tmp_path, [GOOD, {"name": "Desk Lamp", "price": 24.5, "stock": 3}])
    sc.solve(EQ)
    out = sc.solve(PRODUCT)
    assert out.route == "step-skip" and out.reason == "nothing cached for this task yet"


def test_json_generation_is_schema_constrained_and_checked(tmp_path):
    sc, target = cache(tmp_path, [{"name": "Desk Lamp", "price": 24.5, "stock": 3}])
    out = sc.solve(PRODUCT)
    assert out.route == "step-skip" and out.verified and json.loads(out.output)["stock"] == 3
    schema = target.calls[0].options.json_schema
    assert schema["required"] == ["name", "price", "stock"]
    # numbers are chosen among the record's numbers; names are written freely (then checked)
    assert schema["properties"]["price"] == {"enum": [24.5, 3]} and schema["properties"][
        "stock"
    ] == {"enum": [3]}
    assert schema["properties"]["name"] == {"type": "string"}


def test_json_variant_reuses_and_a_new_key_is_the_only_patched_one(tmp_path):
    sc, target = cache(
        tmp_path, [{"name": "Desk Lamp", "price": 24.5, "stock": 3}, {"seller": "Northwind"}]
    )
    sc.solve(PRODUCT)
    numbers = sc.solve(PRODUCT.replace("24.50", "31.00").replace(" 3 units", " 8 units"))
    assert numbers.route == "step-reuse" and json.loads(numbers.output) == {
        "name": "Desk Lamp",
        "price": 31.0,
        "stock": 8,
    }
    wider = sc.solve(PRODUCT.replace("(integer).", '(integer), "seller" (string).'))
    assert wider.route == "step-patch" and wider.patched == 1 and wider.verified
    assert list(target.calls[-1].options.json_schema["properties"]) == ["seller"]
    assert json.loads(wider.output)["seller"] == "Northwind"


def test_json_one_shot_repair_after_a_failed_patch(tmp_path):
    sc, target = cache(
        tmp_path,
        [
            {"name": "Desk Lamp", "price": 99, "stock": 3},  # 99 is not in the request
            {"price": 25},  # the patch is wrong too
            {"name": "Desk Lamp", "price": 24.5, "stock": 3},
        ],
    )  # the full repair
    out = sc.solve(PRODUCT)
    assert out.verified and "one-shot repair" in out.reason and len(target.calls) == 3
    assert "previous answer was wrong" in target.calls[2].messages[-1].content
    # the last repair may only choose among the record's values
    props = target.calls[2].options.json_schema["properties"]
    assert props["price"]["enum"] == [24.5, 3] and props["stock"]["enum"] == [3]
    assert props["name"]["enum"] == ["Desk Lamp", "Northwind", "24.50", "3"]


def test_retrieval_prefers_the_cached_request_that_needs_no_patch(tmp_path):
    twins = PRODUCT.replace("24.50", "3.00")  # price and stock are both 3: the slots are ambiguous
    sc, target = cache(
        tmp_path,
        [
            {"name": "Desk Lamp", "price": 3, "stock": 3},
            {"name": "Desk Lamp", "price": 24.5, "stock": 3},
        ],
    )
    sc.solve(twins)
    clear = sc.solve(PRODUCT.replace("Desk Lamp", "Travel Mug"), record=True)
    assert clear.route == "step-patch"  # only the ambiguous record was cached
    out = sc.solve(PRODUCT.replace("24.50", "31.00").replace(" 3 units", " 8 units"))
    assert out.route == "step-reuse" and out.reused_from and json.loads(out.output)["price"] == 31.0
    assert len(target.calls) == 2


def test_a_full_answer_from_elsewhere_gets_the_same_checks_and_fallbacks(tmp_path):
    sc, target = cache(tmp_path, [{"name": "Desk Lamp", "price": 24.5, "stock": 3}])
    wrong = sc.check_or_fallback(EQ, GOOD.replace("x = 15/3 = 5", "x = 15/3 = 6"))
    assert wrong.route == "full" and wrong.solver_fallback and wrong.verified and wrong.answer == 5
    right = sc.check_or_fallback(EQ, GOOD)
    assert right.verified and not right.solver_fallback and right.steps == segment(GOOD)
    fenced = sc.check_or_fallback(
        PRODUCT, '```json\n{"name": "Desk Lamp", "price": 24.5, "stock": 3}\n```'
    )
    assert fenced.verified and not target.calls  # checked, nothing to repair
    repaired = sc.check_or_fallback(PRODUCT, "I cannot do that.")
    assert repaired.verified and "one-shot repair" in repaired.reason and len(target.calls) == 1
    assert sc.store.step_records("default", "json") == []  # the baseline records nothing


def test_unverified_outputs_are_not_recorded_for_reuse(tmp_path):
    sc, _ = cache(tmp_path, [{"name": "x"}, {"price": 1}, {"name": "nope"}])
    out = sc.solve(PRODUCT)
    assert not out.verified
    assert sc.store.step_records("default", "json") == []


def test_not_a_step_task_is_a_clear_error(tmp_path):
    sc, _ = cache(tmp_path)
    with pytest.raises(NotAStepTask):
        sc.solve("What is the capital of France?")


# -- one API with the program cache ------------------------------------------------------------


def engine(tmp_path, step_replies):
    target = Scripted(step_replies)
    programs = FakeTarget()

    def route(messages, options):  # program-cache prompts go to the program fake
        if (
            "linear equations" in messages[0].content
            or "JSON object asked for" in messages[0].content
        ):
            return target._next(messages, options)
        return programs.fn(messages, options)

    return MiniCache(
        FakeBackend(route), FakeSmall(), str(tmp_path / "e.db"), embedder=HashEmbedder()
    )


def test_auto_mode_sends_structured_requests_to_stepcache_and_counts_their_routes(tmp_path):
    with engine(tmp_path, [GOOD]) as mc:
        first = mc.solve(EQ)
        second = mc.solve(eq("7y + 4 = 39", "y"))
        assert (first.route, second.route) == ("step-skip", "step-reuse")
        assert (
            second.output == second.answer_text and second.steps[-1] == "y = 5" and second.verified
        )
        stats = mc.stats()
        assert (stats["requests"], stats["step_skip"], stats["step_reuse"], stats["hits"]) == (
            2,
            1,
            1,
            0,
        )


def test_program_requests_stay_on_the_program_cache_and_step_mode_refuses_them(tmp_path):
    from tests.fakes import CR_VALUES, CURRENT_RATIO

    with engine(tmp_path, []) as mc:
        res = mc.solve(CURRENT_RATIO.ask(*CR_VALUES[0]))
        assert res.route == "miss" and res.output is None
        with pytest.raises(InvalidRequest, match="mode=step"):
            mc.solve(CURRENT_RATIO.ask(*CR_VALUES[0]), mode="step")
        with pytest.raises(InvalidRequest, match="mode must be"):
            mc.solve(EQ, mode="steps")


# -- the micro-benchmark -----------------------------------------------------------------------


def test_micro_benchmark_has_222_requests_per_seed_with_checkable_golds():
    for seed in (42, 43):
        reqs = micro.generate(seed)
        assert len(reqs) == 222 and len({r.id for r in reqs}) == 222
        perturbations = ("base", "constants", "names", "schema", "semantic")
        kinds = {p: sum(r.perturbation == p for r in reqs) for p in perturbations}
        assert kinds == {"base": 20, "constants": 60, "names": 60, "schema": 60, "semantic": 22}
        for r in reqs:
            req = parse(r.text)
            if r.task == "linear":
                assert linear.solve(req) == r.gold
                assert micro.check_output(
                    "linear", "\n".join(linear.solver_steps(req)), r.text, r.gold
                )[0]
            else:
                assert micro.check_output("json", json.dumps(r.gold), r.text, r.gold)[0]
    assert [r.text for r in micro.generate(42)] != [r.text for r in micro.generate(43)]


def test_micro_scoring_rejects_prose_around_json_and_wrong_steps():
    r = next(r for r in micro.generate(42) if r.task == "json")
    assert not micro.check_output("json", "Here it is: " + json.dumps(r.gold), r.text, r.gold)[0]
    assert micro.check_output("json", "```json\n" + json.dumps(r.gold) + "\n```", r.text, r.gold)[0]
    assert not micro.check_output("linear", GOOD.replace("= 15\n", "= 16\n"), EQ, 5)[0]
    assert micro.check_output("linear", GOOD, EQ, 5)[0]


def test_the_entrance_asks_stepcache_once_by_mode_and_context():
    from minicache.stepcache import step_request_of

    assert isinstance(step_request_of(EQ, None, "auto"), linear.LinearRequest)
    assert isinstance(step_request_of(PRODUCT, None, "step"), jsontask.JsonRequest)
    assert step_request_of(EQ, "a table", "auto") is None  # a context is the program cache's
    assert step_request_of(EQ, None, "program") is None
    assert step_request_of("What is 2 + 2?", None, "auto") is None
    with pytest.raises(InvalidRequest, match="mode=step"):
        step_request_of("What is 2 + 2?", None, "step")
