"""What ``GET /ready`` checks: the store answers, every routing index is loaded, and each model
backend can serve.

A backend that talks to an OpenAI-compatible server is reachable when a quick ``GET <base_url>/models``
answers 2xx within :data:`BACKEND_TIMEOUT_S` (any server in front of vLLM, SGLang, llama-server or
Ollama answers it without running the model); an embedded backend is ready once its model is loaded;
any other backend (an in-process fake) is taken as ready. A failing part is named in the answer, so
an operator sees *which* of store, routing, target or small is down.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx

log = logging.getLogger("minicache.server")

BACKEND_TIMEOUT_S = 2.0


def backend_status(backend: Any) -> tuple[bool, str]:
    """(ready, what was found) for one model backend. Blocks for at most the timeout."""
    base_url = getattr(backend, "base_url", None)
    if isinstance(base_url, str) and base_url:
        url = base_url.rstrip("/") + "/models"
        client = getattr(backend, "_client", None)
        headers = dict(client.headers) if isinstance(client, httpx.Client) else {}
        auth = {k: v for k, v in headers.items() if k.lower() == "authorization"}
        try:
            r = httpx.get(url, headers=auth, timeout=BACKEND_TIMEOUT_S)
        except httpx.HTTPError as exc:
            log.warning("readiness: %s unreachable: %s", url, exc)
            return False, f"unreachable ({type(exc).__name__})"
        if r.is_success:
            return True, "reachable"
        return False, f"answered {r.status_code}"
    if hasattr(backend, "llm"):  # an embedded llama.cpp model
        return (backend.llm is not None), ("loaded" if backend.llm is not None else "not loaded")
    return True, "in process"


def check_backends(engine: Any) -> dict[str, tuple[bool, str]]:
    """The target's and the small model's status, by role."""
    return {role: backend_status(getattr(engine, role, None)) for role in ("target", "small")}
