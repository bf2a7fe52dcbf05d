"""Sandbox worker: a long-lived process that runs one untrusted program per request.

Started by :class:`minicache.sandbox.SandboxPool` as ``python -I -S _worker.py`` (isolated mode, no
site-packages), it imports only the standard library. It lowers its own resource limits once at
start (address space, file size, core dumps, open files) and sets a CPU-time limit before each job.
Programs get a fresh namespace whose builtins are a small safe subset and whose ``import`` admits
only the allow-listed modules. One JSON request per line on stdin, one JSON reply per line on stdout.
"""

import builtins
import io
import json
import math
import resource
import sys

ALLOWED_MODULES = ("math", "statistics", "decimal", "fractions", "datetime", "re", "json")
MODULES = {name: __import__(name) for name in ALLOWED_MODULES}
MAX_RESULT_CHARS = 65_536
MAX_PRINT_CHARS = 8_192

SAFE_BUILTINS = {
    name: getattr(builtins, name)
    for name in (
        "abs", "all", "any", "bool", "dict", "divmod", "enumerate", "filter", "float", "frozenset",
        "int", "isinstance", "len", "list", "map", "max", "min", "pow", "range", "reversed", "round",
        "set", "slice", "sorted", "str", "sum", "tuple", "zip", "True", "False", "None",
        "ValueError", "ZeroDivisionError", "ArithmeticError", "TypeError", "KeyError", "IndexError",
        "Exception", "OverflowError", "StopIteration", "chr", "ord", "bin", "hex", "oct", "format",
        "complex", "iter", "next", "hash", "repr", "ascii", "callable", "issubclass",
    )
}


def _import(name, globals=None, locals=None, fromlist=(), level=0):
    if level or name not in MODULES:
        raise ImportError(f"import of {name!r} is not allowed in the sandbox")
    return MODULES[name]


class _BoundedOut(io.StringIO):
    def write(self, s):
        if self.tell() < MAX_PRINT_CHARS:
            return super().write(s[: MAX_PRINT_CHARS - self.tell()])
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


def _limit(kind, value):
    try:
        resource.setrlimit(kind, (value, value))
    except (ValueError, OSError):
        pass


def _run(job):
    out = _BoundedOut()

    def _print(*args, sep=" ", end="\n", **_kw):
        out.write(sep.join(str(a) for a in args) + end)

    safe = dict(SAFE_BUILTINS, __import__=_import, print=_print)
    namespace = {"__builtins__": safe, "__name__": "minicache_program"}
    code = compile(job["source"], "<program>", "exec")
    exec(code, namespace)  # noqa: S102 - the whole point of this process
    func = namespace.get(job.get("function", "solve"))
    if not callable(func):
        raise NameError(f"the program defines no function {job.get('function', 'solve')!r}")
    value = func(**(job.get("kwargs") or {}))
    return _jsonable(value), out.getvalue()


def main():
    memory = int(sys.argv[1]) if len(sys.argv) > 1 else 512 * 2**20
    _limit(resource.RLIMIT_AS, memory)
    _limit(resource.RLIMIT_FSIZE, 0)
    _limit(resource.RLIMIT_CORE, 0)
    stdin, stdout = sys.stdin, sys.stdout
    sys.stdout = sys.stderr = io.StringIO()  # stray writes cannot corrupt the protocol
    stdout.write(json.dumps({"ready": True}) + "\n")
    stdout.flush()
    for line in stdin:
        try:
            job = json.loads(line)
            cpu_s = float(job.get("cpu_s", 2.0))
            used = resource.getrusage(resource.RUSAGE_SELF)
            spent = used.ru_utime + used.ru_stime
            soft = int(spent + cpu_s) + 1
            hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
            resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
            value, printed = _run(job)
            reply = {"ok": True, "value": value, "stdout": printed}
            text = json.dumps(reply)
            if len(text) > MAX_RESULT_CHARS:
                reply = {"ok": False, "kind": "result", "error": f"result is {len(text):,} characters, limit {MAX_RESULT_CHARS:,}"}
                text = json.dumps(reply)
        except MemoryError:
            text = json.dumps({"ok": False, "kind": "memory", "error": "memory limit exceeded"})
        except RecursionError:
            text = json.dumps({"ok": False, "kind": "error", "error": "RecursionError: maximum recursion depth exceeded"})
        except BaseException as exc:  # noqa: BLE001 - report anything the program raised
            try:
                message = f"{type(exc).__name__}: {exc}"[:2000]
            except BaseException:  # noqa: BLE001 - str() of a hostile exception may itself fail
                message = type(exc).__name__
            text = json.dumps({"ok": False, "kind": "error", "error": message})
        stdout.write(text + "\n")
        stdout.flush()


if __name__ == "__main__":
    main()
