"""``/v1``: ``POST /v1/chat/completions`` (OpenAI format, streaming or not), ``POST /v1/solve`` (native)
and ``GET /v1/models``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response, StreamingResponse

from minicache.server.jsonbody import GuardedRoute
from minicache.server.openai_format import SafeJSONResponse, chat_chunks, chat_completion
from minicache.server.protocol import ChatCompletionRequest, ErrorBody, SolveRequest, SolveResponse
from minicache.server.serving import State, UserTenant

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
    controls = body.controls(request.headers)
    question, context = body.question_and_context()
    model = body.model or server.config.model_name
    result = await server.solve("chat", tenant, question, context, controls)
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        return StreamingResponse(
            chat_chunks(result, model, include_usage),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
    return SafeJSONResponse(chat_completion(result, model))


@router.post(
    "/solve", response_model=SolveResponse, summary="Native solve: the engine's full result"
)
async def native_solve(
    body: SolveRequest, request: Request, tenant: UserTenant, server: State
) -> Response:
    controls = body.controls(request.headers)
    result = await server.solve("solve", tenant, body.question, body.context, controls)
    return SafeJSONResponse(result.to_dict())


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
