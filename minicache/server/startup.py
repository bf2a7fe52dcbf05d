"""What ``minicache serve`` checks before any model loads, and the line it prints once it serves.

A serve that starts on a typo is worse than one that refuses: a store path in a folder that does not
exist would otherwise be created as a new, empty cache, and a PostgreSQL URL without the driver
installed would fail only after the models had loaded. Each problem is one :class:`ConfigError`,
which the CLI prints as one ``error:`` line.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from minicache.errors import ConfigError

POSTGRES_SCHEMES = ("postgres://", "postgresql://")


def check_store(spec: str) -> None:
    """The store can be opened as given: PostgreSQL's driver is installed for a URL, and a SQLite
    file's folder exists (it is never created: a typo must not start an empty cache)."""
    if spec.lower().startswith(POSTGRES_SCHEMES):
        if importlib.util.find_spec("psycopg") is None:
            raise ConfigError(
                "a postgresql:// store needs psycopg, which is not installed: "
                "pip install 'minicache-llm[postgres]'"
            )
        return
    if spec == ":memory:" or "://" in spec:
        return  # the store layer names what it does not accept
    folder = Path(spec).expanduser().parent
    if not folder.is_dir():
        raise ConfigError(
            f"the store {spec} is in a folder that does not exist ({folder}); create the folder "
            "or give another --store"
        )


def _target(settings: Any) -> str:
    role = settings.target
    if role.backend == "openai":
        return f"{role.model} at {role.base_url}"
    return "embedded"


def banner(host: str, port: int, store: str, auth_enabled: bool, settings: Any) -> str:
    """One line with what an operator needs first: where to send requests and open the dashboard,
    whether keys are needed, where the cache lives and which model it answers misses with."""
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}"
    return (
        f"minicache serving on {url}/v1 · dashboard {url}/dashboard · docs {url}/docs · "
        f"auth {'on' if auth_enabled else 'off'} · store {redacted(store)} · "
        f"target {_target(settings)}"
    )


def redacted(store: str) -> str:
    """A store spec without a password (``postgresql://user:secret@host/db``)."""
    from minicache.store.dsn import redact_dsn

    return redact_dsn(store) if store.lower().startswith(POSTGRES_SCHEMES) else store
