"""The routing embedder without a model (minicache.route.lexical) and how the engine chooses its embedder."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter, defaultdict

import numpy as np
import pytest

from minicache.config.engine import EngineConfig
from minicache.config.models import load_engine_config
from minicache.engine import MiniCache
from minicache.errors import ConfigError
from minicache.route.lexical import DIM, LexicalEmbedder
from minicache.route.router import LazyMiniLM, embed_request, route_embedder, skeleton
from minicache.store import SQLiteStore
from minicache_bench.data import load
from tests.fakes import CR_VALUES, CURRENT_RATIO, FakeSmall, FakeTarget, HashEmbedder


def test_requests_of_one_template_with_other_values_embed_the_same() -> None:
    e = LexicalEmbedder()
    a = embed_request(
        e, "A firm has current assets of $45,000 and current liabilities of $15,000. Current ratio?"
    )
    b = embed_request(
        e, "A firm has current assets of $9,100 and current liabilities of $700. Current ratio?"
    )
    assert a.shape == (DIM,) and a.dtype == np.float32
    assert float(a @ b) == pytest.approx(1.0)


def test_vectors_are_unit_length_and_an_empty_text_is_no_nan() -> None:
    vectors = LexicalEmbedder().embed(
        ["", "   ", "What is the quick ratio?", "¿Cuál es la razón corriente?"]
    )
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert not np.isnan(vectors).any()


def test_the_vector_is_the_same_in_every_process_whatever_its_hash_seed() -> None:
    # A seed must name fixed data: str hashes are salted per process, the embedder must not use them.
    code = (
        "import sys; from minicache.route.lexical import LexicalEmbedder; "
        "sys.stdout.write(LexicalEmbedder().embed(['Compute the EBITDA margin given revenue'])[0].tobytes().hex())"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(outs) == 1


def test_a_different_computation_scores_below_the_routing_threshold() -> None:
    e = LexicalEmbedder()
    ratio = embed_request(
        e,
        "Given current assets of $500 and current liabilities of $250, what is the current ratio?",
    )
    margin = embed_request(
        e, "Given operating income of $500 and revenue of $2,000, what is the operating margin?"
    )
    assert float(ratio @ margin) < 0.80


def test_on_all_packaged_formula_requests_lexical_routing_is_as_pure_as_minilm_in_fewer_groups() -> (
    None
):
    # The replay docs/routing.md reports: the 999 Formula requests (50
    # formulas) in the data's order, each joining its nearest earlier request's group at cosine >=
    # the embedder's threshold. MiniLM at 0.80 made 53 groups with 122 requests outside their
    # group's formula; this pins the lexical embedder at no worse on either count.
    requests = load("formula")
    embedder = LexicalEmbedder()
    vectors = embedder.embed([skeleton(r.question) for r in requests])
    group_of: list[int] = []
    members: dict[int, list[str]] = defaultdict(list)
    for i, r in enumerate(requests):
        sims = vectors[:i] @ vectors[i]
        g = group_of[int(np.argmax(sims))] if i and sims.max() >= embedder.route_threshold else i
        group_of.append(g)
        members[g].append(r.group or "")
    impure = sum(len(m) - Counter(m).most_common(1)[0][1] for m in members.values())
    assert len(members) <= 53 and impure <= 122


def test_the_engine_routes_lexically_by_default_and_leaves_minilm_unloaded(tmp_path) -> None:
    with MiniCache(FakeTarget(), FakeSmall(), SQLiteStore(tmp_path / "mc.db")) as mc:
        assert isinstance(mc.router.embedder, LexicalEmbedder)
        assert isinstance(mc.steps.embedder, LazyMiniLM)
        assert mc.router.threshold == LexicalEmbedder.route_threshold == 0.82


def test_an_unknown_route_embedder_is_a_clear_config_error() -> None:
    with pytest.raises(ConfigError, match="route_embedder must be one of lexical, minilm"):
        load_engine_config(env={}, options=["route_embedder=bert"])
    with pytest.raises(ConfigError, match="route_embedder"):
        route_embedder("bert")


def test_a_store_routed_by_another_embedder_stays_routable_after_the_change(tmp_path) -> None:
    # A store written before route_embedder changed (there: 384-wide MiniLM rows; here the tests'
    # 256-wide HashEmbedder) keeps its groups: the router embeds their stored examples again.
    path = tmp_path / "mc.db"
    with MiniCache(
        FakeTarget(),
        FakeSmall(),
        SQLiteStore(path),
        embedder=HashEmbedder(),
        config=EngineConfig(background_builds=False),
    ) as before:
        first = before.solve(CURRENT_RATIO.ask(*CR_VALUES[0]))
    with MiniCache(
        FakeTarget(), FakeSmall(), SQLiteStore(path), config=EngineConfig(background_builds=False)
    ) as after:
        again = after.solve(CURRENT_RATIO.ask(*CR_VALUES[1]))
        assert isinstance(after.router.embedder, LexicalEmbedder)
    assert again.group == first.group and again.similarity >= after.router.threshold
