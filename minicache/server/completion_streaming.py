"""A streamed ``/v1/completions``: the target's own ``text_completion`` chunks as it generates them.

The seam lives with the other forwarding dispatchers in :mod:`minicache.models.forwarding`: a
backend that streams text completions (``stream_completion(body)``, the counterpart of
``stream_chat``: :class:`~minicache.models.forwarding.CompletionStreaming`) is sent the client's body
with ``stream: true`` and its chunks are forwarded as they come, its usage chunk too when the client
asked for ``stream_options.include_usage``. A backend without it is asked for its whole answer, from
its own ``/completions``, sent as one chunk, its usage after it when asked for. This module is the
server's name for that dispatcher.
"""

from __future__ import annotations

from minicache.models.forwarding import (
    CompletionStreaming,
    stream_completion,
    wants_usage,
    whole_completion_chunks,
)

__all__ = ["CompletionStreaming", "stream_completion", "wants_usage", "whole_completion_chunks"]
