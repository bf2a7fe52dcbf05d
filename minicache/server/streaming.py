"""Streams that are sent while the work is done: a miss shows the target's tokens as they are
generated, a pass-through the target's chunks as they arrive.

The engine and the backends block, so they run in a worker thread and hand what they produce to
the event loop through a queue (:class:`Feed`); the response's generator sends each item as it
comes. The status line is sent only once the first item (or the whole answer, or an error) is
there, so an invalid request is still a 400 and not a broken stream. A miss's first item is where
the engine routed it (:class:`Routed`), so that its headers can name its group.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from minicache.answers import Route, SolveResult
from minicache.server.openai_format import DONE, Chunks, sse

T = TypeVar("T")
R = TypeVar("R")


@dataclass
class Done(Generic[R]):
    """The work's result, after its last item."""

    value: R


@dataclass(frozen=True)
class Routed:
    """Where the engine sent a miss, told before the target writes its program
    (``MiniCache.solve(on_route=...)``): its group, and ``miss`` or ``fallback`` (a hit refused)."""

    group: str
    route: Route


class Feed(Generic[T, R]):
    """``Feed(lambda emit: work(emit))``: ``work`` runs now (a coroutine that blocks in a worker
    thread and calls ``emit`` there); :meth:`next` gives its items in order, then :class:`Done`
    with its result, or raises its error."""

    def __init__(self, work: Callable[[Callable[[T], None]], Awaitable[R]]) -> None:
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._back: list[T | Done[R]] = []
        # kept, so that the task is not collected while a client that left no longer reads
        self.task = asyncio.ensure_future(self._run(work))

    def _emit(self, item: T) -> None:
        self._loop.call_soon_threadsafe(self._queue.put_nowait, ("item", item))

    async def _run(self, work: Callable[[Callable[[T], None]], Awaitable[R]]) -> None:
        # items were queued (call_soon_threadsafe) before the work returned, so they come first
        try:
            self._queue.put_nowait(("done", await work(self._emit)))
        except Exception as exc:  # noqa: BLE001 - the reader re-raises it
            self._queue.put_nowait(("error", exc))

    def unread(self, item: T | Done[R]) -> None:
        """Give ``item`` back: the next :meth:`next` returns it (a first item, read to see that the
        work began well before the status line was sent)."""
        self._back.append(item)

    async def next(self) -> T | Done[R]:
        if self._back:
            return self._back.pop()
        kind, value = await self._queue.get()
        if kind == "error":
            raise value
        return Done(value) if kind == "done" else value


ForwardChunks = Callable[[Chunks | None], AsyncIterator[str]]
SolveFeed = Feed[str | Routed, SolveResult]


async def first_of_solve(feed: SolveFeed) -> tuple[Routed | None, str | Done[SolveResult]]:
    """Where a miss was routed (None for what the engine answers whole: a hit, StepCache) and the
    first token or the whole answer; raises what the engine raised before either."""
    first = await feed.next()
    routed = first if isinstance(first, Routed) else None
    while isinstance(first, Routed):
        first = await feed.next()
    return routed, first


async def streamed_answer(
    feed: SolveFeed,
    first: str,
    chunks: Chunks,
    on_passthrough: Callable[[SolveResult], ForwardChunks],
    error_event: Callable[[Exception], dict[str, Any]],
) -> AsyncIterator[str]:
    """A miss as it happens: the target's text from ``first`` on, then, once its program ran, the
    answer on a line of its own and the tail. A request the engine then leaves to the target goes
    on with the target's own chunks (``on_passthrough`` gives them); a failure, once the stream has
    begun, is an ``error`` event (what the openai client raises as an APIError)."""
    yield chunks.head()
    item: str | Routed | Done[SolveResult] = first
    while not isinstance(item, Done):
        if isinstance(item, str):
            yield chunks.chunk({"content": item})
        try:
            item = await feed.next()
        except Exception as exc:  # noqa: BLE001 - a status line is sent already: an error event
            yield sse(error_event(exc))
            yield DONE
            return
    result = item.value
    if result.passthrough_reason is not None:
        yield chunks.chunk({"content": "\n\n"})
        async for event in on_passthrough(result)(chunks):
            yield event
        return
    yield chunks.chunk({"content": "\n\n" + result.answer_text})
    for event in chunks.tail(result):
        yield event


async def forwarded_chunks(
    feed: Feed[dict[str, Any], Any],
    minicache: Callable[[], dict[str, Any]],
    error_event: Callable[[Exception], dict[str, Any]],
    into: Chunks | None = None,
) -> AsyncIterator[str]:
    """The target's chunks as they arrive, the ``minicache`` object added to the one that finishes
    the choice. ``into``: a stream already begun (a miss whose program failed), whose id and model
    the target's deltas are sent under, without a second role delta."""
    while True:
        try:
            item = await feed.next()
        except Exception as exc:  # noqa: BLE001 - a status line is sent already: an error event
            yield sse(error_event(exc))
            break
        if isinstance(item, Done):
            break
        choices = item.get("choices") or []
        finished = any(c.get("finish_reason") for c in choices)
        if into is None:
            yield sse({**item, "minicache": minicache()} if finished else item)
            continue
        for choice in choices:
            delta = {k: v for k, v in (choice.get("delta") or {}).items() if k != "role"}
            finish = choice.get("finish_reason")
            if delta or finish:
                more = {"minicache": minicache()} if finish else {}
                yield into.chunk(delta, finish, **more)
        if not choices and item.get("usage") and into.include_usage:
            yield sse({**into.base, "choices": [], "usage": item["usage"]})
    yield DONE
