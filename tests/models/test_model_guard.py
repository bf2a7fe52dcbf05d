import pytest

from minicache import ModelRequestsBlocked, OpenAIBackend
from minicache.models import GenerationOptions, user


def test_unmarked_tests_cannot_load_an_embedded_model():
    from minicache.models.llamacpp import LlamaCppBackend

    with pytest.raises(ModelRequestsBlocked, match="real_model"):
        LlamaCppBackend.embedded("small")


def test_unmarked_tests_cannot_call_a_server():
    backend = OpenAIBackend("http://127.0.0.1:9", "m")
    with pytest.raises(ModelRequestsBlocked):
        backend.complete([user("hi")], GenerationOptions())
