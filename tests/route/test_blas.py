"""One BLAS thread on the request path (minicache.route.blas): OpenBLAS is found where NumPy ships it, a
block runs on one thread and gives back the setting it found, and routing's products run so."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from minicache.route import blas
from minicache.route.index import RouteIndex
from minicache.store import open_store

linux = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="NumPy's Linux wheels ship OpenBLAS"
)


@pytest.fixture
def openblas():
    lib = blas.openblas()
    if lib is None:
        pytest.skip("this NumPy does not use OpenBLAS")
    before = lib.get()
    yield lib
    lib.set(before)


@linux
def test_openblas_is_found_in_numpys_linux_wheel():
    assert blas.openblas() is not None


def test_a_block_runs_on_one_thread_and_restores_the_setting_it_found(openblas):
    openblas.set(2)
    with blas.one_blas_thread():
        assert openblas.get() == 1
        np.ones((64, 64)) @ np.ones((64, 64))
    assert openblas.get() == 2


def test_nested_blocks_restore_the_outer_setting(openblas):
    openblas.set(2)
    with blas.one_blas_thread():
        with blas.one_blas_thread():
            assert openblas.get() == 1
        assert openblas.get() == 1
    assert openblas.get() == 2


def test_a_block_that_raises_still_restores_the_setting(openblas):
    openblas.set(2)
    with pytest.raises(ValueError), blas.one_blas_thread():
        raise ValueError("boom")
    assert openblas.get() == 2


def test_routing_looks_up_its_index_on_one_blas_thread(openblas, monkeypatch):
    """The product over the tenant's stored vectors, the larger of routing's two, runs on one thread."""
    openblas.set(2)
    seen: list[int] = []
    index = RouteIndex(open_store(":memory:"))
    index.add("t", "grp_a", np.ones(4, dtype=np.float32) / 2)
    monkeypatch.setattr(
        type(index.tenant("t")),
        "nearest",
        lambda self, vector: seen.append(openblas.get()) or ("grp_a", 1.0),
    )
    assert index.nearest("t", np.ones(4, dtype=np.float32) / 2) == ("grp_a", 1.0)
    assert seen == [1] and openblas.get() == 2


def test_the_embedder_computes_on_one_blas_thread(openblas, monkeypatch):
    from minicache.route.embedding import FILES, MiniLMEmbedder, embedder_dir

    if not all((embedder_dir() / name).exists() for name in FILES):
        pytest.skip("the embedder's files are not fetched (`minicache models`)")
    embedder = MiniLMEmbedder()
    forward = embedder._forward
    seen: list[int] = []
    monkeypatch.setattr(
        embedder, "_forward", lambda ids: seen.append(openblas.get()) or forward(ids)
    )
    openblas.set(2)
    vectors = embedder.embed(["A waiter had 44 customers. If 12 left, how many are there now?"])
    assert vectors.shape == (1, embedder.dim) and seen == [1] and openblas.get() == 2
