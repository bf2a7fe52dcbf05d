"""Hostile programs against the sandbox: each ends exactly as expected, and nothing leaks or lasts.

For every program that runs, the test also checks that a canary secret (in a file and in this
process's environment) appears in no result or error, that a marker file a command would create
does not exist, that a loopback listener got no connection, that this process received no signal,
and that a victim program run once on every worker afterwards returns exactly its values.
The corpus is in ``hostile_programs.py``; ``OS_CORPUS`` runs with the Python layer switched off.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import time
from dataclasses import dataclass, field

import pytest

from hostile_programs import (
    CORPUS,
    EXPLOIT_FORMAT_WALK,
    EXPLOIT_FRAME_WALK,
    EXPLOIT_POISON,
    EXPLOIT_REPLY_FORGERY,
    FRAME_WALK_TO_BUILTINS,
    OS_CORPUS,
    VICTIM,
    Case,
)
from minicache.sandbox import SandboxError, SandboxPool, SandboxViolation


@dataclass
class Host:
    """What a hostile program would want to reach, and how the tests notice if it did."""

    secret: str
    canary: str
    marker: str
    listener: socket.socket
    port: int
    signals: list[int] = field(default_factory=list)

    def source(self, text: str) -> str:
        return (
            text.replace("CANARY_PATH", self.canary)
            .replace("MARKER_PATH", self.marker)
            .replace("LISTEN_PORT", str(self.port))
            .replace("PARENT_PID", str(os.getpid()))
        )


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    secret = "CANARY-" + secrets.token_hex(8)
    root = tmp_path_factory.mktemp("host")
    canary = root / "canary.txt"
    canary.write_text(secret)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.setblocking(False)
    h = Host(secret, str(canary), str(root / "marker"), listener, listener.getsockname()[1])
    old_env = os.environ.get("MINICACHE_TEST_CANARY")
    os.environ["MINICACHE_TEST_CANARY"] = secret
    old_handler = signal.signal(signal.SIGUSR1, lambda signum, frame: h.signals.append(signum))
    yield h
    signal.signal(signal.SIGUSR1, old_handler)
    if old_env is None:
        os.environ.pop("MINICACHE_TEST_CANARY", None)
    else:
        os.environ["MINICACHE_TEST_CANARY"] = old_env
    listener.close()


@pytest.fixture(scope="module")
def pool(host):
    with SandboxPool(size=2, timeout_s=4.0, cpu_s=1.0, memory_mb=256) as p:
        yield p


@pytest.fixture(scope="module")
def bare_pool(host):
    """The OS layer alone: no static check, real builtins (tests only)."""
    with SandboxPool(
        size=2, timeout_s=4.0, cpu_s=1.0, memory_mb=256, unsafe_no_python_layer=True
    ) as p:
        yield p


@pytest.fixture(scope="module")
def victim_values():
    namespace: dict = {}
    exec(compile(VICTIM, "<victim>", "exec"), namespace)  # noqa: S102 - trusted, in a clean namespace
    return json.loads(json.dumps(namespace["solve"]()))


def run(pool: SandboxPool, host: Host, case: Case) -> tuple:
    """The outcome as (kind,) or (kind, value-or-message)."""
    try:
        result = pool.run(host.source(case.source))
    except SandboxViolation:
        return ("rejected",)
    except SandboxError as exc:
        return (exc.kind, str(exc))
    return ("ok", result.value, result.stdout)


def assert_outcome(case: Case, got: tuple) -> None:
    want = case.outcome
    assert got[0] == want[0], f"{case.name}: expected {want}, got {got}"
    if want[0] == "ok":
        assert got[1] == want[1], f"{case.name}: expected value {want[1]!r}, got {got[1]!r}"
        assert len(got[2]) <= 8192
    elif want[0] != "rejected":
        assert want[1] in got[1], f"{case.name}: expected {want[1]!r} in the message {got[1]!r}"


def assert_nothing_escaped(host: Host, got: tuple) -> None:
    assert host.secret not in repr(got), "the canary secret leaked into a result or error"
    assert not os.path.exists(host.marker), "a command ran: the marker file exists"
    try:
        conn, _ = host.listener.accept()
    except BlockingIOError:
        pass
    else:
        conn.close()
        pytest.fail("the loopback listener got a connection")
    assert host.signals == [], "this process received a signal from a sandboxed program"


def assert_victims_unharmed(pool: SandboxPool, expected: dict) -> None:
    """Run the victim once on every worker (the idle queue is FIFO) and compare exactly."""
    deadline = time.monotonic() + 30
    while (
        pool._idle.qsize() < pool.size and time.monotonic() < deadline
    ):  # a replacement may be starting
        time.sleep(0.01)
    seen = set()
    for _ in range(pool.size):
        result = pool.run(VICTIM)
        assert result.value == expected
        seen.add(result.worker)
    assert seen == set(pool.workers)


def _id(case: Case) -> str:
    return f"{case.family}: {case.name}"


def test_the_corpus_is_large_and_covers_every_family():
    families = {c.family for c in CORPUS}
    assert len(CORPUS) >= 150
    assert families >= {
        "introspection",
        "format-string",
        "poisoning",
        "reply-forgery",
        "files",
        "process",
        "network",
        "signals",
        "memory",
        "cpu",
        "huge-integers",
        "recursion",
        "output",
    }
    assert len({_id(c) for c in CORPUS}) == len(CORPUS)
    assert {c.family for c in OS_CORPUS} >= {
        "files",
        "process",
        "network",
        "signals",
        "poisoning",
        "reply-forgery",
    }


@pytest.mark.parametrize("case", CORPUS, ids=_id)
def test_hostile_program_ends_as_expected_and_nothing_escapes(case, pool, host, victim_values):
    got = run(pool, host, case)
    assert_outcome(case, got)
    if got[0] != "rejected":
        assert_nothing_escaped(host, got)
        assert_victims_unharmed(pool, victim_values)


@pytest.mark.parametrize("case", OS_CORPUS, ids=_id)
def test_os_layer_alone_stops_hostile_program(case, bare_pool, host, victim_values):
    got = run(bare_pool, host, case)
    assert_outcome(case, got)
    assert_nothing_escaped(host, got)
    assert_victims_unharmed(bare_pool, victim_values)


# -- four known exploits, by name ------------------------------------------------------------------


def test_exploit_1_frame_walk_is_rejected_and_the_os_layer_blocks_the_file_read(
    pool, bare_pool, host
):
    with pytest.raises(SandboxViolation):
        pool.run(EXPLOIT_FRAME_WALK)
    with pytest.raises(SandboxError, match="Operation not permitted") as exc:
        bare_pool.run(host.source(FRAME_WALK_TO_BUILTINS))
    assert host.secret not in str(exc.value)


@pytest.mark.parametrize("label,source", EXPLOIT_POISON, ids=[p[0] for p in EXPLOIT_POISON])
def test_exploit_2_poisoning_is_rejected_and_cannot_reach_the_next_job(
    label, source, pool, bare_pool, victim_values
):
    with pytest.raises(SandboxViolation):
        pool.run(source)
    for _ in range(bare_pool.size):  # poison every worker, then every worker serves the victim
        bare_pool.run(source)
    assert_victims_unharmed(bare_pool, victim_values)


def test_exploit_3_reply_forgery_is_rejected_and_cannot_answer_the_next_job(
    pool, bare_pool, victim_values
):
    with pytest.raises(SandboxViolation):
        pool.run(EXPLOIT_REPLY_FORGERY)
    assert (
        bare_pool.run(EXPLOIT_REPLY_FORGERY).value == 1
    )  # the worker loop's stdout is not in the child
    assert_victims_unharmed(bare_pool, victim_values)


def test_exploit_4_format_string_attribute_walk_is_rejected(pool):
    with pytest.raises(SandboxViolation, match="format"):
        pool.run(EXPLOIT_FORMAT_WALK)


SNOOP = """import gc, sys
def solve(mark="TENANT-A-", carry=""):
    found, seen = set(), set()
    def visit(o, depth):
        if id(o) in seen or depth > 6:
            return
        seen.add(id(o))
        if isinstance(o, str):
            if o.startswith(mark) and len(o) > len(mark):
                found.add(o)
        elif isinstance(o, dict):
            for v in list(o.values()):
                visit(v, depth + 1)
        elif isinstance(o, (list, tuple, set)):
            for v in list(o):
                visit(v, depth + 1)
    f = sys._getframe()
    while f is not None:
        visit(dict(f.f_locals), 0)
        visit(f.f_globals, 0)
        f = f.f_back
    for o in gc.get_objects():
        visit(o, 0)
    return sorted(found)
"""


def test_another_tenants_variables_are_not_in_a_later_child(bare_pool):
    """The zygote never holds a job: nothing a later child can reach (its frames, modules, every
    object the collector tracks) holds an earlier job's variables; the same search does find the
    snooping job's own variables."""
    secret = "TENANT-A-" + secrets.token_hex(6)
    assert (
        secret in bare_pool.run(SNOOP, {"carry": secret}).value
    )  # the snoop does see its own job's values
    bare_pool.run("def solve(v=''):\n    return len(v)\n", {"v": secret})
    for _ in range(bare_pool.size):
        assert bare_pool.run(SNOOP).value == []
