"""PostgreSQL connection strings in messages and logs: the same DSN, without its password.

Apart from the store so that it needs no psycopg: whoever prints a DSN can redact it."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

_KV_PASSWORD = re.compile(r"""\bpassword\s*=\s*(?:'(?:[^'\\]|\\.)*'|[^\s']\S*)\s*""", re.I)


def redact_dsn(dsn: str) -> str:
    """``dsn`` without its password (URL or ``key=value`` form), fit for messages and logs."""
    if re.match(r"^postgres(?:ql)?://", dsn, re.I):
        try:
            parts = urlsplit(dsn)
            netloc = parts.netloc
            if "@" in netloc:
                userinfo, hosts = netloc.rsplit("@", 1)
                netloc = f"{userinfo.split(':', 1)[0]}@{hosts}"
            query = urlencode(
                [
                    (k, v)
                    for k, v in parse_qsl(parts.query, keep_blank_values=True)
                    if k.lower() != "password"
                ]
            )
            return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
        except ValueError:
            return "postgresql://<unparseable DSN>"
    return _KV_PASSWORD.sub("", dsn).strip()
