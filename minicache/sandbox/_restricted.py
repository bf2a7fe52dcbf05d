"""The sandbox's restricted interpreter: what a program may call, and how its result comes back.

Loaded by the zygote (:mod:`_worker`, the same directory on ``sys.path``) and used in each forked
child: the program runs with :data:`SAFE_BUILTINS` and an import hook that hands out only
:data:`ALLOWED_MODULES` (imported once, here, before any child exists); what it prints goes to a
bounded buffer; its result must be JSON (numbers finite, integers of at most 300 digits). Plain
Python with no imports from ``minicache``: the zygote runs it with ``python -I -S``.
"""

import builtins
import io
import json
import math
import sys
import time

# Compiling a program with a non-ASCII identifier (the target writes `σ_p = 20` for a formula with σ)
# NFKC-normalizes it through `unicodedata`, which CPython imports on first use. After the seccomp
# filter a child cannot open the extension module's file, so it is loaded here, in the zygote. It is
# not importable by programs: the import hook and the policy admit only ALLOWED_MODULES.
import unicodedata  # noqa: F401 - loaded here for the child, see above

ALLOWED_MODULES = ("math", "statistics", "decimal", "fractions", "datetime", "re", "json")
MODULES = {name: __import__(name) for name in ALLOWED_MODULES}

MAX_RESULT_CHARS = 65_536
MAX_PRINT_CHARS = 8_192
# The child's own reference: a program rebinding json.dumps cannot reach it.
_dumps = json.dumps

SAFE_BUILTINS = {
    name: getattr(builtins, name)
    for name in (
        "abs",
        "all",
        "any",
        "bool",
        "dict",
        "divmod",
        "enumerate",
        "filter",
        "float",
        "frozenset",
        "int",
        "isinstance",
        "len",
        "list",
        "map",
        "max",
        "min",
        "pow",
        "range",
        "reversed",
        "round",
        "set",
        "slice",
        "sorted",
        "str",
        "sum",
        "tuple",
        "zip",
        "True",
        "False",
        "None",
        "ValueError",
        "ZeroDivisionError",
        "ArithmeticError",
        "TypeError",
        "KeyError",
        "IndexError",
        "Exception",
        "OverflowError",
        "StopIteration",
        "chr",
        "ord",
        "bin",
        "hex",
        "oct",
        "format",
        "complex",
        "iter",
        "next",
        "hash",
        "repr",
        "ascii",
        "callable",
        "issubclass",
    )
}


def prewarm(python_layer: bool) -> None:
    """Import now what the allowed modules import lazily: under the filter a child cannot open files."""
    # datetime.strptime's module, and the codecs the C code looks up by name
    for name in (
        "_strptime",
        "encodings.ascii",
        "encodings.latin_1",
        "encodings.utf_16",
        "encodings.utf_32",
    ):
        __import__(name)
    MODULES["datetime"].datetime.strptime("2024-01-02", "%Y-%m-%d")
    time.localtime()  # tzset reads /etc/localtime once, here
    MODULES["re"].compile(r"\d+").sub("", "1")
    if not python_layer:  # tests only: give programs the modules an attacker who escaped would want
        for name in ("ctypes", "mmap", "socket", "subprocess"):
            __import__(name)


# What datetime's C code imports at call time (strptime, strftime, timetuple): such imports go
# through the calling frame's __import__, which is the program's. The static policy still refuses
# ``import time`` in a program's own source.
_INTERNAL_IMPORTS = ("time", "_strptime")


def _import(name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A002 - builtins.__import__'s signature
    if not level and name in MODULES:
        return MODULES[name]
    if not level and name in _INTERNAL_IMPORTS and name in sys.modules:
        return sys.modules[name]
    raise ImportError(f"import of {name!r} is not allowed in the sandbox")


class _BoundedOut(io.StringIO):
    def write(self, s):
        if self.tell() < MAX_PRINT_CHARS:
            return super().write(str(s)[: MAX_PRINT_CHARS - self.tell()])
        return len(s)


def _jsonable(value):
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        if abs(value) > 10**300:
            raise OverflowError("integer result too large")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"result is not finite: {value}")
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if type(value).__module__ in ("decimal", "fractions"):
        return _jsonable(float(value))
    return str(value)


def run(job, python_layer):
    """Run the program; return the reply dict. Everything the program raised becomes an error."""
    out = _BoundedOut()
    sys.stdout = sys.stderr = out
    try:
        if python_layer:

            def _print(*args, sep=" ", end="\n", **_kw):
                out.write(sep.join(str(a) for a in args) + end)

            safe = dict(SAFE_BUILTINS, __import__=_import, print=_print)
        else:
            safe = builtins.__dict__
        namespace = {"__builtins__": safe, "__name__": "minicache_program"}
        exec(compile(job["source"], "<program>", "exec"), namespace)  # noqa: S102 - the point of this process
        name = job.get("function", "solve")
        func = namespace.get(name)
        if not callable(func):
            raise NameError(f"the program defines no function {name!r}")
        value = _jsonable(func(**(job.get("kwargs") or {})))
        reply = {"ok": True, "value": value, "stdout": out.getvalue()}
        if len(_dumps(reply)) > MAX_RESULT_CHARS:
            return {
                "ok": False,
                "kind": "result",
                "error": f"result is over {MAX_RESULT_CHARS:,} characters",
            }
        return reply
    except MemoryError:
        return {"ok": False, "kind": "memory", "error": "memory limit exceeded"}
    except RecursionError:
        return {
            "ok": False,
            "kind": "error",
            "error": "RecursionError: maximum recursion depth exceeded",
        }
    except BaseException as exc:  # noqa: BLE001 - report anything the program raised
        try:
            message = f"{type(exc).__name__}: {exc}"[:2000]
        except BaseException:  # noqa: BLE001 - str() of a hostile exception may itself fail
            message = "the program raised an exception that cannot be shown"
        return {"ok": False, "kind": "error", "error": message}
