"""The sandbox runs honest programs exactly, refuses to run without its OS layer, and its policy is
an allow-list that real programs pass. Hostile programs are in test_sandbox_hostile.py."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import minicache.sandbox.worker as sandbox_worker
from minicache.sandbox import (
    OS_LAYER_ENV,
    SandboxError,
    SandboxPool,
    SandboxUnavailable,
    SandboxViolation,
    _seccomp,
    check_program,
)
from minicache.sandbox.policy import (
    ALLOWED_ATTRIBUTES,
    ALLOWED_MODULES,
    INTROSPECTION_ATTRIBUTES,
    plain_format_string,
)


@pytest.fixture(scope="module")
def pool():
    with SandboxPool(size=2, timeout_s=2.0, cpu_s=1.0, memory_mb=256) as p:
        yield p


def wrap(body: str, signature: str = "") -> str:
    return f"def solve({signature}):\n" + textwrap.indent(body, "    ") + "\n"


# Idioms the target models write (finance formulas, dates, text, Decimal money, regex look-ups).
REALISTIC = {
    "compound interest": (
        "import math\ndef solve(principal=1000, rate_percent=5, years=2):\n"
        "    return round(principal * math.pow(1 + rate_percent / 100, years), 2)\n",
        {},
    ),
    "decimal money": (
        "from decimal import Decimal, ROUND_HALF_UP\ndef solve(price=19.99, qty=3):\n"
        "    total = Decimal(str(price)) * qty\n"
        "    return float(total.quantize(Decimal('0.01'), rounding=ROUND_HALF_UP))\n",
        {},
    ),
    "decimal local context": (
        "import decimal\ndef solve():\n    with decimal.localcontext() as ctx:\n"
        "        return str(ctx.create_decimal(1) / 7)\n",
        {},
    ),
    "npv with a list": (
        "def solve(rate=0.08, flows=None):\n    flows = flows or [6000, 6000, 6000, 6000]\n"
        "    return round(sum(cf / (1 + rate) ** t for t, cf in enumerate(flows, start=1)), 2)\n",
        {},
    ),
    "statistics": (
        "import statistics\ndef solve():\n    xs = [2.5, 3.5, 10, 4]\n"
        "    return [statistics.mean(xs), statistics.median(xs), round(statistics.stdev(xs), 4)]\n",
        {},
    ),
    "fractions": (
        "from fractions import Fraction\ndef solve():\n    f = Fraction(3, 4) + Fraction(1, 6)\n"
        "    return [f.numerator, f.denominator, float(f.limit_denominator(10))]\n",
        {},
    ),
    "dates": (
        "from datetime import datetime, timedelta, date\ndef solve():\n"
        "    d = datetime.strptime('2024-03-15', '%Y-%m-%d')\n"
        "    e = d + timedelta(days=30)\n    return [e.strftime('%Y-%m-%d'), (date(2024, 12, 25) - d.date()).days, e.weekday()]\n",
        {},
    ),
    "regex groups": (
        "import re\ndef solve(text='Order #123 costs $45.50'):\n"
        "    m = re.search(r'#(\\d+).*?\\$(\\d+\\.\\d+)', text)\n"
        "    return [int(m.group(1)), float(m.group(2)), m.span(), re.findall(r'\\d+', text)]\n",
        {},
    ),
    "json round trip": (
        "import json\ndef solve():\n    data = json.loads('{\"a\": [1, 2, 3]}')\n"
        "    data['b'] = sum(data['a'])\n    return json.dumps(data, sort_keys=True)\n",
        {},
    ),
    "string methods": (
        "def solve(name='  red Running shoes '):\n    words = name.strip().lower().split()\n"
        "    return ' '.join(w.capitalize() for w in words).replace('Shoes', 'Sneakers').zfill(3)\n",
        {},
    ),
    "dict and list methods": (
        "def solve():\n    d = {'a': 1}\n    d.update(b=2)\n    d.setdefault('c', 3)\n    xs = []\n"
        "    for k, v in sorted(d.items()):\n        xs.append(k * v)\n    xs.extend(d.keys())\n"
        "    xs.sort(key=len)\n    return [xs, d.get('z', 0), list(d.values()).index(2)]\n",
        {},
    ),
    "constant format strings": (
        "def solve(x=1234.5678):\n    return ['{:,.2f}'.format(x), '{0} of {1}'.format(1, 2),\n"
        "            f'{x:.1f}%', format(x, '.3e'), '%.2f' % x]\n",
        {},
    ),
    "float and int methods": (
        "def solve(x=6.0, n=255):\n    return [x.is_integer(), n.bit_length(), (0.5).as_integer_ratio(),\n"
        "            int('ff', 16), round(2.675, 2), divmod(17, 5), abs(-3)]\n",
        {},
    ),
    "exceptions handled": (
        "def solve(a=1, b=0):\n    try:\n        return a / b\n    except ZeroDivisionError as e:\n"
        "        return str(e.args[0])\n",
        {},
    ),
    "comprehensions and lambdas": (
        "def solve():\n    xs = [3, 1, 2]\n    return [sorted(xs, key=lambda v: -v), {v: v * v for v in xs},\n"
        "            sum(v for v in xs if v > 1), any(v > 2 for v in xs), list(zip(xs, 'abc'))]\n",
        {},
    ),
    "helper functions": (
        "def rate(a, b):\n    return a / b\n\ndef solve(current_assets=45000, current_liabilities=30000):\n"
        "    return round(rate(current_assets, current_liabilities), 2)\n",
        {},
    ),
    "math functions": (
        "import math\ndef solve():\n    return [math.floor(2.7), math.ceil(2.1), math.log(math.e), math.isclose(0.1 + 0.2, 0.3),\n"
        "            math.fsum([0.1] * 10), math.comb(5, 2), math.hypot(3, 4), math.pi > 3]\n",
        {},
    ),
    "match statement": (
        "def solve(kind='ratio', a=3, b=4):\n    match kind:\n        case 'ratio':\n            return a / b\n"
        "        case _:\n            return 0\n",
        {},
    ),
    "action object": (
        "def solve(query='red running shoes', max_price=40):\n"
        "    return {'action': 'search', 'query': query.strip(), 'max_price': float(max_price)}\n",
        {},
    ),
    "keyword variables": (
        "def solve(principal=1.0, rate_pct=1.0, years=1):\n    return principal * rate_pct / 100 * years\n",
        {"principal": 12000, "rate_pct": 5, "years": 3},
    ),
}


def in_process(source: str, kwargs: dict):
    namespace: dict = {}
    exec(compile(source, "<honest>", "exec"), namespace)  # noqa: S102 - trusted test programs
    return json.loads(json.dumps(namespace["solve"](**kwargs)))


@pytest.mark.parametrize("name", sorted(REALISTIC))
def test_a_realistic_program_passes_the_policy_and_gives_what_python_gives(name, pool):
    source, kwargs = REALISTIC[name]
    check_program(source)
    assert pool.run(source, kwargs).value == in_process(source, kwargs)


def test_honest_programs_run_with_keyword_variables(pool):
    source = (
        "import math\nfrom decimal import Decimal\n"
        "def solve(principal, rate_percent, years):\n"
        "    return round(principal * math.pow(1 + rate_percent / 100, years), 2)\n"
    )
    assert pool.run(source, {"principal": 1000, "rate_percent": 5, "years": 2}).value == 1102.5


def test_printed_output_comes_back_bounded(pool):
    result = pool.run(wrap("print('a', 1)\nprint('b' * 10000)\nreturn 0"))
    assert result.stdout.startswith("a 1\nbbb") and len(result.stdout) == 8192


def test_the_cpu_limit_kills_only_the_child_and_its_zygote_carries_on():
    with SandboxPool(size=1, timeout_s=30.0, cpu_s=1.0, memory_mb=256) as p:
        workers = list(p.workers)
        with pytest.raises(SandboxError, match="CPU time limit") as exc:
            p.run(wrap("while True:\n    pass"))
        assert exc.value.kind == "timeout"
        assert p.run(wrap("return 6 * 7")).value == 42
        assert p.workers == workers and p.stats["timeouts"] == 1 and p.stats["replaced"] == 0


def test_the_wall_clock_takes_the_zygote_and_the_pool_keeps_serving():
    with SandboxPool(size=1, timeout_s=0.5, cpu_s=30.0, memory_mb=256) as p:
        workers = list(p.workers)
        began = time.monotonic()
        with pytest.raises(SandboxError, match="0.5s time limit") as exc:
            p.run(wrap("while True:\n    pass"))
        assert exc.value.kind == "timeout" and time.monotonic() - began < 5
        for _ in range(3):
            assert p.run(wrap("return 6 * 7")).value == 42
        assert p.workers != workers and len(p.workers) == 1
        assert p.stats["timeouts"] == 1 and p.stats["replaced"] == 1


def test_a_worker_whose_request_raises_something_else_is_replaced_not_lost():
    """Only SandboxError used to return a failed worker to the pool; any other exception (an interrupt,
    a bug) kept it out for good, and after `size` of them every run waited 60 s and failed."""
    with SandboxPool(size=1, timeout_s=5.0, cpu_s=1.0, memory_mb=256) as p:
        worker = p._idle.queue[0]

        def broken(job, wall):
            raise RuntimeError("not a sandbox error")

        worker.request = broken
        with pytest.raises(RuntimeError):
            p.run(wrap("return 1"))
        began = time.monotonic()
        assert p.run(wrap("return 6 * 7")).value == 42  # a fresh worker, without the 60 s wait
        assert (
            time.monotonic() - began < 30
            and p.stats["replaced"] == 1
            and worker.pid not in p.workers
        )


def _waiting_child(zygote: int) -> int:
    """The child the zygote has forked for the next job (it forks right after the previous one ends)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with open(f"/proc/{zygote}/task/{zygote}/children") as f:
            children = f.read().split()
        if children:
            return int(children[0])
        time.sleep(0.01)
    raise AssertionError("the zygote forked no child")


def test_a_job_its_child_never_read_is_not_the_next_childs_job():
    # A child that dies before reading its job leaves the job in its zygote's stdin; the next child
    # must not take it for its own, or the next caller would get this caller's answer.
    with SandboxPool(size=1, timeout_s=5.0, cpu_s=1.0, memory_mb=256) as p:
        workers = list(p.workers)
        child = _waiting_child(workers[0])
        os.kill(child, signal.SIGKILL)
        while os.path.exists(f"/proc/{child}"):  # until its zygote has reaped it
            time.sleep(0.01)
        with pytest.raises(SandboxError, match="before reading its job") as exc:
            p.run(wrap("return x", "x=0"), {"x": 1})
        assert exc.value.kind == "crash"
        assert [p.run(wrap("return x", "x=0"), {"x": n}).value for n in (2, 3)] == [2, 3]
        assert p.workers != workers and p.stats["replaced"] == 1


def test_a_job_larger_than_the_pipe_is_written_while_the_child_reads_it():
    with SandboxPool(size=1, timeout_s=5.0, cpu_s=1.0, memory_mb=256) as p:
        text = "x" * 300_000  # the zygote's stdin pipe holds 64 KiB
        assert p.run(wrap("return len(text)", "text=''"), {"text": text}).value == 300_000


def test_a_job_no_child_reads_times_out_instead_of_blocking_the_caller():
    with SandboxPool(size=1, timeout_s=0.5, cpu_s=1.0, memory_mb=256) as p:
        workers = list(p.workers)
        child = _waiting_child(workers[0])
        os.kill(child, signal.SIGSTOP)  # alive, holding the pipe open, reading nothing
        began = time.monotonic()
        with pytest.raises(SandboxError, match="time limit") as exc:
            p.run(wrap("return len(text)", "text=''"), {"text": "x" * 300_000})
        assert exc.value.kind == "timeout" and time.monotonic() - began < 5
        assert p.run(wrap("return 6 * 7")).value == 42
        assert p.workers != workers and p.stats["replaced"] == 1


def test_failures_are_counted_by_kind():
    with SandboxPool(size=1, timeout_s=30.0, cpu_s=1.0, memory_mb=256) as p:
        with pytest.raises(SandboxViolation):
            p.run(wrap("return open('/etc/passwd')"))
        with pytest.raises(SandboxError):
            p.run(wrap("return 1 / 0"))
        with pytest.raises(SandboxError):
            p.run(wrap("while True:\n    pass"))
        p.run(wrap("return 1"))
        assert p.stats == {
            "runs": 3,
            "violations": 1,
            "errors": 1,
            "timeouts": 1,
            "crashes": 0,
            "replaced": 0,
        }


def test_arguments_must_be_json(pool):
    with pytest.raises(SandboxError, match="JSON"):
        pool.run(wrap("return 1", "x=1"), {"x": object()})


def test_the_allow_list_has_no_introspection_attribute():
    assert not ALLOWED_ATTRIBUTES & INTROSPECTION_ATTRIBUTES
    assert not any(name.startswith("_") for name in ALLOWED_ATTRIBUTES)


def test_no_allowed_attribute_of_an_allowed_module_is_another_module():
    """``json.codecs`` or ``statistics.sys`` would hand out modules the import check refuses."""
    import types

    for module_name in ALLOWED_MODULES:
        module = __import__(module_name)
        for attr in ALLOWED_ATTRIBUTES:
            value = getattr(module, attr, None)
            if isinstance(value, types.ModuleType):
                assert value.__name__ in ALLOWED_MODULES, (
                    f"{module_name}.{attr} is the module {value.__name__}"
                )


def test_allowed_modules_pass_the_static_check():
    check_program(
        "import math, statistics, decimal, fractions, datetime, re, json\ndef solve():\n    return 1\n"
    )


@pytest.mark.parametrize(
    "text,plain",
    [
        ("{}", True),
        ("{0} {1:,.2f}", True),
        ("{x!r:>10}", True),
        ("%", True),
        ("{0.real}", False),
        ("{0[1]}", False),
        ("{0:{1.x}}", False),
        ("{", False),
    ],
)
def test_plain_format_strings_name_no_attribute_or_index(text, plain):
    assert plain_format_string(text) is plain


def test_the_seccomp_filter_is_short_enough_for_its_jumps():
    code = _seccomp.build_filter()
    assert len(code) % 8 == 0 and len(code) // 8 < 256


def test_the_pool_refuses_to_start_without_its_os_layer(tmp_path, monkeypatch):
    fake = tmp_path / "worker.py"
    fake.write_text(
        "import json, os\nos.write(1, (json.dumps({'ready': False, 'error': 'seccomp is missing'}) + '\\n').encode())\n"
    )
    monkeypatch.setattr(sandbox_worker, "WORKER_SCRIPT", fake)
    with pytest.raises(SandboxUnavailable, match=f"seccomp is missing.*{OS_LAYER_ENV}=off"):
        SandboxPool(size=1)


def test_the_worker_reports_a_kernel_that_refuses_the_filter():
    """The real worker script, with the filter's installation failing as on a kernel without seccomp."""
    worker = os.path.dirname(sandbox_worker.WORKER_SCRIPT)
    code = (
        f"import runpy, sys; sys.path.insert(0, {worker!r}); import _seccomp\n"
        "def refuse(self):\n    raise OSError(22, 'prctl(PR_SET_SECCOMP) failed: seccomp filters unavailable')\n"
        "_seccomp.Installer.install = refuse\n"
        f"sys.argv = ['_worker.py', str(256 * 2**20), '1', 'on', 'on']\n"
        f"runpy.run_path({str(sandbox_worker.WORKER_SCRIPT)!r}, run_name='__main__')\n"
    )
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, timeout=60)
    ready = json.loads(out.stdout.splitlines()[0])
    assert ready["ready"] is False and "kernel refused the seccomp filter" in ready["error"]


def test_the_os_layer_can_be_switched_off_only_explicitly_and_loudly(monkeypatch):
    monkeypatch.setenv(OS_LAYER_ENV, "off")
    with pytest.warns(RuntimeWarning, match="WITHOUT its OS layer"):
        with SandboxPool(size=1) as p:
            assert p.os_layer is False
            assert p.run(wrap("return 2 + 2")).value == 4
    monkeypatch.setenv(OS_LAYER_ENV, "maybe")
    with pytest.raises(SandboxUnavailable, match="'on' or 'off'"):
        SandboxPool(size=1)


def test_the_os_layer_is_on_by_default(pool):
    assert pool.os_layer is True
    assert pool.python_layer is True


def test_a_float_result_comes_back_exactly(pool):
    assert pool.run("import math\ndef solve():\n    return math.pi\n").value == math.pi


def test_a_program_with_non_ascii_identifiers_compiles_in_the_sealed_child():
    # CPython normalizes non-ASCII identifiers with unicodedata, imported lazily: the zygote must
    # have loaded it before the seccomp filter forbids opening its file (the target writes σ_p).
    source = "def solve(R_p=14, R_f=2.2, σ_p=20):\n    return (R_p - R_f) / σ_p\n"
    with SandboxPool(size=1) as pool:
        assert pool.run(source).value == pytest.approx(0.59)
        assert pool.run(source, {"R_p": 10, "R_f": 2, "σ_p": 4}).value == 2.0


def test_programs_still_cannot_import_unicodedata():
    with SandboxPool(size=1) as pool, pytest.raises(SandboxViolation):
        pool.run("import unicodedata\ndef solve():\n    return unicodedata.name('a')\n")


def test_programs_are_parsed_one_thread_at_a_time(monkeypatch):
    """CPython 3.11's AST constructor keeps its recursion depth per interpreter, not per thread, so
    concurrent ast.parse calls can raise SystemError (python/cpython#106905); the server checks
    programs in worker threads. Every parse the sandbox's gate does must hold the parse lock."""
    import ast
    import threading

    from minicache.sandbox import policy

    real_parse = ast.parse
    unlocked: list[str] = []

    def spying_parse(source, *args, **kwargs):
        if not policy._PARSE_LOCK.locked():
            unlocked.append(source)
        return real_parse(source, *args, **kwargs)

    monkeypatch.setattr(policy.ast, "parse", spying_parse)
    program = (
        "def solve(a=1, b=2):\n    return [(a + (b * (a - (b / (a + 1))))) for _ in range(3)]\n"
    )
    errors: list[BaseException] = []

    def parse_many():
        try:
            for _ in range(50):
                check_program(program)
        except BaseException as exc:  # noqa: BLE001 - the test reports whatever escaped
            errors.append(exc)

    threads = [threading.Thread(target=parse_many) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert unlocked == []
