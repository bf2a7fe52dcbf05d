"""Where the commands that run models get them (:class:`Runtime`), apart from the commands.

Its own module so that the engine commands and the store commands can both take it without
importing each other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from minicache.models.base import ModelBackend
    from minicache.route.router import Embedder


def _configured_backends() -> tuple[ModelBackend, ModelBackend]:
    from minicache.config.models import build_backends

    return build_backends()


@dataclass
class Runtime:
    """Where the commands that run models get them: the configured (target, small) backends and
    the routing embedder. Both are factories, called only by a command that needs them; no
    embedder factory means the one the engine options name (``route_embedder``). Tests pass a
    Runtime of fakes as ``CliRunner.invoke(main, ..., obj=Runtime(...))``."""

    backends: Callable[[], tuple[ModelBackend, ModelBackend]] = _configured_backends
    embedder: Callable[[], Embedder] | None = None

    def route_embedder(self) -> Callable[[], Embedder]:
        """The factory of the embedder routing uses: the test's, or the configured one."""
        if self.embedder is not None:
            return self.embedder

        def configured() -> Embedder:
            from minicache.config.models import load_engine_config
            from minicache.route.router import route_embedder

            return route_embedder(load_engine_config().route_embedder)

        return configured
