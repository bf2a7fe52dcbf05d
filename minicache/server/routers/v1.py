"""``/v1``: ``POST /v1/chat/completions`` (OpenAI format, streaming or not), ``POST /v1/completions``
(forwarded), ``POST /v1/solve`` (native) and ``GET /v1/models``.

A chat request is answered in one of two ways, decided per request: by the engine (a computation:
hit, miss, ...) or by the target itself, the client's own body forwarded (pass-through: a chat, a
tool call, a structured output, or what the engine gives up on; :mod:`..passthrough`). Either way
the answer streams when asked, as it is made (:mod:`..streaming`), and says how it was made in
its ``minicache`` object and the ``X-MiniCache-*`` headers.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response, StreamingResponse

from minicache.answers import Route, SolveResult, passed_through
from minicache.server.jsonbody import GuardedRoute
from minicache.server.openai_format import (
    Chunks,
    SafeJSONResponse,
    chat_chunks,
    chat_completion,
    result_headers,
    route_headers,
)
from minicache.server.passthrough import (
    SSE_HEADERS,
    Forwarded,
    Reason,
    check_question,
    error_event,
    request_reason,
)
from minicache.server.protocol import (
    CacheControls,
    ChatCompletionRequest,
    CompletionRequest,
    ErrorBody,
    SolveRequest,
    SolveResponse,
    controls_from_headers,
)
from minicache.server.serving import (
    ServerState,
    State,
    UserTenant,
)
from minicache.server.streaming import (
    Done,
    Feed,
    ForwardChunks,
    Routed,
    SolveFeed,
    first_of_solve,
    streamed_answer,
)

ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": what}
    for status, what in (
        (400, "Invalid request"),
        (401, "Missing or wrong API key"),
        (403, "Key without a tenant"),
        (408, "Body too slow"),
        (413, "Body too large"),
        (429, "Rate limited"),
        (502, "No answer"),
        (503, "Overloaded or store busy"),
    )
}

router = APIRouter(prefix="/v1", tags=["v1"], route_class=GuardedRoute, responses=ERRORS)


@router.post(
    "/chat/completions", summary="OpenAI chat completion (answered by the cache or the target)"
)
async def chat_completions(
    body: ChatCompletionRequest, request: Request, tenant: UserTenant, server: State
) -> Response:
    raw = await request.json()
    controls = body.controls(request.headers)
    no_store = bool(controls.no_store)
    question, context = body.question_and_context()
    reason = request_reason(body, controls)
    if reason is Reason.NO_NUMBERS:  # an empty or malformed question is refused as the engine would
        check_question(server, tenant, question, context, controls)
    if reason is not None:
        return await Forwarded(server, tenant, raw, no_store, passed_through(reason, "")).response()
    model = body.model or server.config.model_name
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        chunks = Chunks(model, include_usage)
        return await streamed_solve(server, tenant, raw, question, context, controls, chunks)
    result = await server.solve("chat", tenant, question, context, controls, passthrough=True)
    if result.passthrough_reason is not None:
        return await Forwarded(server, tenant, raw, no_store, result).response()
    return SafeJSONResponse(chat_completion(result, model), headers=result_headers(result))


async def streamed_solve(
    server: ServerState,
    tenant: str,
    raw: dict[str, Any],
    question: str,
    context: str | None,
    controls: CacheControls,
    chunks: Chunks,
) -> Response:
    """A streamed computation: a hit at once; a miss from the target's first token on, its answer
    after its program ran; what the engine gives up on, the target's own chunks from there."""
    no_store = bool(controls.no_store)
    feed: SolveFeed = Feed(
        lambda emit: server.solve(
            "chat",
            tenant,
            question,
            context,
            controls,
            passthrough=True,
            on_text=emit,
            on_route=lambda group, route: emit(Routed(group, route)),
        )
    )
    routed, first = await first_of_solve(feed)
    if isinstance(first, Done) and first.value.passthrough_reason is not None:
        return await Forwarded(server, tenant, raw, no_store, first.value).response()
    if isinstance(first, Done):
        result = first.value
        events = chat_chunks(result, str(chunks.base["model"]), chunks.include_usage)
        headers = {**SSE_HEADERS, **result_headers(result)}
        return StreamingResponse(events, media_type="text/event-stream", headers=headers)

    def on_passthrough(result: SolveResult) -> ForwardChunks:
        return Forwarded(server, tenant, raw, no_store, result).continue_into

    # the target is writing the program: a miss or a fallback, in the group the engine told before
    # the target began (the last chunk's minicache object says how it ended: a failed program is a
    # pass-through)
    told = route_headers(routed.route, routed.group) if routed else route_headers(Route.MISS)
    headers = {**SSE_HEADERS, **told}
    stream = streamed_answer(feed, first, chunks, on_passthrough, error_event)
    return StreamingResponse(stream, media_type="text/event-stream", headers=headers)


@router.post("/completions", summary="OpenAI text completion (always forwarded to the target)")
async def completions(
    body: CompletionRequest, request: Request, tenant: UserTenant, server: State
) -> Response:
    raw = await request.json()
    controls = (body.minicache or CacheControls()).merged(controls_from_headers(request.headers))
    spent = passed_through("a text completion is forwarded", "")
    call = Forwarded(server, tenant, raw, bool(controls.no_store), spent)
    return await call.response("completion")


@router.post(
    "/solve", response_model=SolveResponse, summary="Native solve: the engine's full result"
)
async def native_solve(
    body: SolveRequest, request: Request, tenant: UserTenant, server: State
) -> Response:
    controls = body.controls(request.headers)
    result = await server.solve("solve", tenant, body.question, body.context, controls)
    return SafeJSONResponse(result.to_dict(), headers=result_headers(result))


@router.get("/models", summary="The model name answers carry")
async def models(tenant: UserTenant, server: State) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [
            {
                "id": server.config.model_name,
                "object": "model",
                "created": 0,
                "owned_by": "minicache",
            }
        ],
    }
