"""The real embedded models (Qwen2.5-Coder 0.5B and 1.5B, Q4_K_M) on this machine's CPU."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time

import pytest
from click.testing import CliRunner

from minicache import OpenAIBackend
from minicache.cli.main import main
from minicache.models import GenerationOptions, Message, fetch
from minicache.models.extraction_probes import EXTRACT_SYSTEM, EXTRACTION_CASES
from minicache.programs.numbers import candidate_values
from minicache.programs.text import extract_code
from minicache.sandbox import SandboxPool

pytestmark = pytest.mark.real_model


def test_small_model_fills_json_schemas_for_at_least_8_of_10_requests(small_model):
    correct = 0
    for question, props, expected in EXTRACTION_CASES:
        schema = {
            "type": "object",
            "properties": props,
            "required": list(props),
            "additionalProperties": False,
        }
        out = small_model.complete(
            [Message("system", EXTRACT_SYSTEM), Message("user", question)],
            GenerationOptions(max_tokens=120, json_schema=schema),
        )
        data = json.loads(out.text)  # the grammar guarantees valid JSON
        assert set(data) == set(props)
        if all(abs(float(data[k]) - v) < 1e-6 for k, v in expected.items()):
            correct += 1
        assert out.prompt_tokens > 0 and out.completion_tokens > 0 and out.prefill_s > 0
    print(f"small-model JSON extraction: {correct}/10 correct")
    assert correct >= 8, f"only {correct}/10 extractions were correct"


def _grammar_options(schema: dict) -> GenerationOptions:
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    return GenerationOptions(max_tokens=120, grammar=json_schema_to_gbnf(json.dumps(schema)))


def test_enum_choice_decodes_the_same_object_as_the_grammar_sampler_in_fewer_passes(small_model):
    for question, props, _expected in EXTRACTION_CASES:
        enum = {k: {"enum": candidate_values(question)} for k in props}
        schema = {
            "type": "object",
            "properties": enum,
            "required": list(props),
            "additionalProperties": False,
        }
        messages = [
            Message(
                "system",
                EXTRACT_SYSTEM
                + " Variables: "
                + ", ".join(f"{k}: {v['description']}" for k, v in props.items()),
            ),
            Message("user", question),
        ]
        by_grammar = small_model.complete(messages, _grammar_options(schema))
        by_choice = small_model.complete(
            messages, GenerationOptions(max_tokens=120, json_schema=schema)
        )
        assert json.loads(by_choice.text) == json.loads(by_grammar.text), question
        assert by_choice.draft["forward_passes"] < by_grammar.completion_tokens


def test_a_text_field_decodes_as_the_grammar_sampler_does(small_model):
    system = (
        "Write the search action for the shopping instruction as JSON. Variables:\n"
        "- keywords (string): keywords, words taken from the request\n- max_price (number): max price"
    )
    same = 0
    instructions = [
        "i need a jet black hair piece for hair loss, and price lower than 90.00 dollars",
        "i want a toothbrush that is easy to carry, and price lower than 20.00 dollars",
        "find me open toe sandals with an ankle strap in size 10, and price lower than 50.00 dollars",
    ]
    for text in instructions:
        schema = {
            "type": "object",
            "properties": {
                "keywords": {"type": "string", "maxLength": 200},
                "max_price": {"enum": candidate_values(text)},
            },
            "required": ["keywords", "max_price"],
            "additionalProperties": False,
        }
        messages = [Message("system", system), Message("user", text)]
        by_grammar = json.loads(small_model.complete(messages, _grammar_options(schema)).text)
        fast = small_model.complete(messages, GenerationOptions(max_tokens=120, json_schema=schema))
        by_choice = json.loads(fast.text)
        assert set(by_choice) == {"keywords", "max_price"} and by_choice[
            "max_price"
        ] in candidate_values(text)
        assert by_choice["keywords"] and all(w in text for w in by_choice["keywords"].split()[:2])
        same += by_choice == {
            k: (v.strip() if isinstance(v, str) else v) for k, v in by_grammar.items()
        }
    assert same >= 2, "the text decoder should agree with grammar sampling on plain instructions"


def test_a_restored_system_prefix_gives_the_same_output_as_a_fresh_prompt(small_model):
    a = [
        Message("system", EXTRACT_SYSTEM + " Variables: principal, rate_percent, years."),
        Message("user", EXTRACTION_CASES[1][0]),
    ]
    b = [
        Message("system", EXTRACT_SYSTEM + " Variables: revenue, cogs."),
        Message("user", EXTRACTION_CASES[5][0]),
    ]
    opts = GenerationOptions(max_tokens=40)
    first = small_model.complete(a, opts)
    small_model.complete(b, opts)  # the KV cache now holds b's prompt
    again = small_model.complete(a, opts)  # a's system prefix comes back from the saved state
    assert again.text == first.text
    assert again.draft["cached_prompt_tokens"] >= len(small_model.tokenize(a[0].content))


def test_target_model_writes_a_python_function_that_runs(target_model):
    from minicache.miss.prompts import pot_messages

    out = target_model.complete(
        pot_messages(
            "What is the current ratio if current assets are $45,000 and "
            "current liabilities are $30,000?"
        ),
        GenerationOptions(max_tokens=300),
    )
    with SandboxPool(size=1) as pool:
        result = pool.run(extract_code(out.text))
    assert abs(float(result.value) - 1.5) < 1e-6
    assert out.completion_tokens > 10 and out.decode_s > 0


def test_a_repeated_prompt_prefix_reuses_the_kv_cache(small_model):
    prefix = [Message("system", EXTRACT_SYSTEM + " " + "Be exact. " * 40)]
    opts = GenerationOptions(max_tokens=8)
    small_model.complete(prefix + [Message("user", "Tom has 3 apples.")], opts)
    second = small_model.complete(prefix + [Message("user", "Sara has 5 pears.")], opts)
    assert second.draft["cached_prompt_tokens"] > 100


def test_forgetting_a_request_keeps_the_system_prefix_but_not_the_prompt_or_its_output(small_model):
    """What an interleaved benchmark relies on: the second of two identical calls computes its user
    message again (as after any other request) and still gives the same output."""
    messages = [
        Message("system", EXTRACT_SYSTEM + " " + "Be exact. " * 40),
        Message("user", "Tom has 3 apples."),
    ]
    opts = GenerationOptions(max_tokens=8)
    system = len(small_model.tokenize(messages[0].content))
    small_model.warm_up()  # what the benchmark does after loading: leaves nothing of its prompt behind
    first = small_model.complete(messages, opts)
    assert (
        first.draft["cached_prompt_tokens"] <= system + 8
    )  # at most a saved system prefix (with its markup)
    repeated = small_model.complete(messages, opts)
    small_model.forget_request()
    forgotten = small_model.complete(messages, opts)
    assert (
        repeated.draft["cached_prompt_tokens"] == repeated.prompt_tokens - 1
    )  # the whole prompt but its last token
    assert (
        system <= forgotten.draft["cached_prompt_tokens"] < repeated.draft["cached_prompt_tokens"]
    )
    assert forgotten.text == first.text == repeated.text


def test_a_call_under_a_prefix_key_prefills_only_what_it_does_not_share_with_the_last_such_call(
    small_model,
):
    """The miss path names the request's group (GenerationOptions.prefix_key): a group's template is
    prefilled once, the output does not change, and a call without the key (the pot baseline in an
    interleaved benchmark) gets nothing of it after forget_request."""
    system = Message("system", EXTRACT_SYSTEM)
    template = (
        "Use formula Current Ratio to answer. Formula: Current Ratio = Assets / Liabilities. " * 3
    )
    first = [system, Message("user", template + "Question: assets are 500 and liabilities 250.")]
    second = [
        system,
        Message("user", template + "Question: a firm holds 900 in assets and owes 300."),
    ]
    opts, keyed = (
        GenerationOptions(max_tokens=12),
        GenerationOptions(max_tokens=12, prefix_key="group-1"),
    )
    small_model.warm_up()
    small_model.complete(first, keyed)
    small_model.forget_request()
    plain = small_model.complete(second, opts)
    small_model.forget_request()
    reused = small_model.complete(second, keyed)
    small_model.forget_request()
    shared = len(small_model.tokenize(template))
    assert reused.text == plain.text
    assert reused.draft["cached_prompt_tokens"] >= plain.draft["cached_prompt_tokens"] + shared - 2
    other_key = small_model.complete(second, GenerationOptions(max_tokens=12, prefix_key="group-2"))
    assert other_key.draft["cached_prompt_tokens"] == plain.draft["cached_prompt_tokens"]
    small_model.forget_request()


def test_kept_states_stay_within_their_byte_budget(small_model, monkeypatch):
    from minicache.models import kv_states

    messages = [
        Message("system", EXTRACT_SYSTEM),
        Message("user", "Tom has 3 apples and buys 4 more."),
    ]
    small_model.complete(messages, GenerationOptions(max_tokens=4, prefix_key="fits"))
    assert "fits" in small_model.kv.kept
    monkeypatch.setattr(kv_states, "KEPT_BYTES", len(small_model.kv.kept["fits"][1]) + 1)
    small_model.complete(messages, GenerationOptions(max_tokens=4, prefix_key="second"))
    assert list(small_model.kv.kept)[-1:] == ["second"] and "fits" not in small_model.kv.kept
    small_model.forget_request()


def test_both_models_and_the_embedder_compute_one_at_a_time(small_model, target_model):
    from minicache.models.base import CPU_LOCK
    from minicache.route.embedding import shared_embedder

    assert small_model._lock is CPU_LOCK and target_model._lock is CPU_LOCK
    embedder = shared_embedder()
    done = threading.Event()
    with CPU_LOCK:  # while a model computes, an embedding waits for the cores
        worker = threading.Thread(target=lambda: (embedder.embed(["current ratio"]), done.set()))
        worker.start()
        assert not done.wait(0.5)
    worker.join(timeout=30)
    assert done.is_set()


def test_concurrent_callers_get_the_same_answers_as_sequential_ones(small_model):
    prompts = [f"Reply with the number {n} and nothing else." for n in (3, 17, 42)]
    opts = GenerationOptions(max_tokens=6)
    sequential = [small_model.complete([Message("user", p)], opts).text for p in prompts]
    results: dict[int, str] = {}

    def worker(i: int) -> None:
        results[i] = small_model.complete([Message("user", prompts[i])], opts).text

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [results[i] for i in range(3)] == sequential


def test_speculative_decoding_reproduces_plain_greedy_output(target_model):
    messages = [Message("user", "Write a Python function add(a, b) that returns a + b. Code only.")]
    plain = target_model.complete(messages, GenerationOptions(max_tokens=48, draft="none"))
    lookup = target_model.complete(
        messages, GenerationOptions(max_tokens=48, draft="lookup", draft_text=plain.text)
    )
    small = target_model.complete(messages, GenerationOptions(max_tokens=48, draft="small"))
    assert lookup.text == plain.text
    assert lookup.draft["accepted"] > 0  # drafting from the identical text must be accepted
    assert small.text == plain.text
    assert small.draft["proposed"] > 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_openai_backend_talks_to_a_real_llama_cpp_python_server():
    port = _free_port()
    path = fetch.model_path(fetch.SMALL)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(path),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            "2048",
            "--model_alias",
            "small",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        backend = OpenAIBackend(
            f"http://127.0.0.1:{port}",
            "small",
            profile="llama-cpp-python",
            retries=0,
            timeout_s=120,
        )
        deadline = time.time() + 120
        while True:
            try:
                import httpx

                if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.time() < deadline, "llama_cpp.server did not come up"
            time.sleep(0.5)
        question, props, expected = EXTRACTION_CASES[0]
        schema = {"type": "object", "properties": props, "required": list(props)}
        out = backend.complete(
            [Message("system", EXTRACT_SYSTEM), Message("user", question)],
            GenerationOptions(max_tokens=60, json_schema=schema),
        )
        data = json.loads(out.text)
        assert set(props) <= set(data)
        assert out.completion_tokens > 0 and out.prefill_s > 0
        backend.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_models_command_verifies_the_embedded_models_and_the_embedder():
    result = CliRunner().invoke(main, ["models", "--quick", "--no-fetch"])
    assert result.exit_code == 0, result.output
    assert (
        result.output.count("[ok ]") == 5
    )  # target, small, MiniLM, then a one-token smoke decode of each GGUF
    assert result.output.count("[ok ] smoke") == 2


def test_a_background_generation_steps_aside_for_a_request_and_keeps_its_output(
    small_model, monkeypatch
):
    from minicache.models.compute import CPU_LOCK, mark_background_thread

    monkeypatch.setattr(
        CPU_LOCK, "max_credit_s", 0.0
    )  # no saved share: step aside at the next pass
    long_job = (
        [Message("user", "Write the numbers from 1 to 60, separated by commas.")],
        GenerationOptions(max_tokens=120),
    )
    request = (
        [Message("user", "Reply with the word yes and nothing else.")],
        GenerationOptions(max_tokens=4),
    )
    build_alone = small_model.complete(*long_job).text
    request_alone = small_model.complete(*request).text
    yields, passes = CPU_LOCK.yields, small_model.llm.evals
    done: dict[str, float | str] = {}

    def build() -> None:
        mark_background_thread()
        done["text"] = small_model.complete(*long_job).text
        done["at"] = time.monotonic()

    worker = threading.Thread(target=build)
    worker.start()
    deadline = time.monotonic() + 60
    while small_model.llm.evals < passes + 10:  # the build is generating
        assert time.monotonic() < deadline
        time.sleep(0.005)
    answer = small_model.complete(*request).text
    answered_at = time.monotonic()
    worker.join(120)
    assert answer == request_alone
    assert answered_at < done["at"], "the request waited for the whole background generation"
    assert done["text"] == build_alone, "stepping aside changed the background call's output"
    assert CPU_LOCK.yields > yields
