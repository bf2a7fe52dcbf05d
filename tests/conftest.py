"""Test setup: unit tests cannot reach a real model by accident.

Real-model access is switched off for the whole session. Tests marked ``real_model`` (embedded
GGUF models) or ``allow_model_requests`` (OpenAIBackend against a loopback server) switch it on for
themselves; the session fixtures that load the embedded models do the same while loading.
"""

from __future__ import annotations

import pytest

from minicache.models.base import set_real_models_allowed
from pg import pg_database, pg_dsn, pg_server  # noqa: F401 - the PostgreSQL fixtures, for every test module

set_real_models_allowed(False)


@pytest.fixture(autouse=True)
def _model_guard(request):
    allowed = any(
        request.node.get_closest_marker(m) for m in ("real_model", "allow_model_requests")
    )
    previous = set_real_models_allowed(allowed)
    yield
    set_real_models_allowed(previous)


def _load(which: str, **kwargs):
    from minicache.models.llamacpp import LlamaCppBackend

    previous = set_real_models_allowed(True)
    try:
        return LlamaCppBackend.embedded(which, **kwargs)
    finally:
        set_real_models_allowed(previous)


@pytest.fixture(scope="session")
def small_model():
    backend = _load("small")
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def target_model(small_model):
    backend = _load("target", drafter_model=small_model)
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def sandbox():
    """A sandbox pool shared by one test module's engines (workers start once, not per test)."""
    from minicache.sandbox import SandboxPool

    with SandboxPool(size=2) as pool:
        yield pool
