"""A corpus of hostile programs for the sandbox, grouped by family, each with its precise outcome.

Two corpora:

* ``CORPUS``: run through the full sandbox (static policy + OS layer). Outcome ``("rejected",)``
  means the policy refused it before anything ran; otherwise it ran and ended with the given kind.
* ``OS_CORPUS``: run with the Python layer switched off (``SandboxPool(unsafe_no_python_layer=True)``:
  no static check, real builtins, ``os``/``socket``/``subprocess``/``ctypes`` importable), so the
  OS layer (seccomp allow-list, fresh fork per job, limits) must stop them alone.

Outcomes: ``("rejected",)`` | ``("ok", value)`` | ``(kind, text)`` where kind is the
``SandboxError.kind`` and ``text`` must appear in its message (``""`` for any message).
Programs may use the tokens CANARY_PATH, MARKER_PATH, LISTEN_PORT and PARENT_PID; the tests
replace them with a canary file, a marker file that must never appear, a loopback listener's port
and the test process's pid (which counts SIGUSR1 it receives).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    family: str
    name: str
    source: str
    outcome: tuple


def wrap(body: str, signature: str = "") -> str:
    return (
        f"def solve({signature}):\n" + "\n".join("    " + line for line in body.splitlines()) + "\n"
    )


REJECTED = ("rejected",)
EPERM = ("error", "Operation not permitted")

# The exploits a hostile-client review reported, verbatim where its text gives them.
EXPLOIT_FRAME_WALK = """def solve():
    def gen():
        yield g.gi_frame.f_back
    g = gen(); f = next(g)
    while "builtins" not in f.f_globals: f = f.f_back
    b = f.f_globals["builtins"]
    d = "_" * 2
    os = b.getattr(b, d + "import" + d)("o" + "s")
    return b.open("/proc/%d/environ" % os.getppid()).read()
"""
EXPLOIT_POISON = [
    ("math.sqrt", "import math\ndef solve():\n    math.sqrt = lambda x: 7\n    return 1\n"),
    (
        "json.dumps",
        'import json\ndef solve():\n    json.dumps = lambda *a, **k: \'{"ok": true, "value": 666}\'\n    return 1\n',
    ),
    (
        "decimal prec",
        "import decimal\ndef solve():\n    decimal.getcontext().prec = 2\n    return 1\n",
    ),
    (
        "statistics.mean",
        "import statistics\ndef solve():\n    statistics.mean = lambda xs: 0\n    return 1\n",
    ),
    (
        "Fraction.limit_denominator",
        "import fractions\ndef solve():\n    fractions.Fraction.limit_denominator = lambda self, n=0: 0\n    return 1\n",
    ),
    ("re.sub", "import re\ndef solve():\n    re.sub = lambda *a, **k: 'x'\n    return 1\n"),
    (
        "json.loads wrapper",
        "import json\ndef solve():\n    old = json.loads\n    json.loads = lambda s, *a, **k: old(s)\n    return 1\n",
    ),
]
EXPLOIT_REPLY_FORGERY = """def solve():
    def gen():
        yield g.gi_frame.f_back
    g = gen(); f = next(g)
    while f is not None:
        out = f.f_locals.get("stdout")
        if out is not None:
            out.write('{"ok": true, "value": 666}\\n')
            out.flush()
        f = f.f_back
    return 1
"""
EXPLOIT_FORMAT_WALK = """def solve():
    def gen():
        yield 1
    g = gen()
    return "{0.gi_frame.f_globals}".format(g)
"""

_C: list[Case] = []


def add(family: str, name: str, source: str, outcome: tuple) -> None:
    _C.append(Case(family, name, source, outcome))


# -- introspection and frame walks ---------------------------------------------------------------
F = "introspection"
add(F, "issue exploit 1: generator frame walk to builtins", EXPLOIT_FRAME_WALK, REJECTED)
for attr in (
    "gi_frame",
    "gi_code",
    "gi_yieldfrom",
    "cr_frame",
    "ag_frame",
    "f_back",
    "f_globals",
    "f_locals",
    "f_builtins",
    "f_code",
    "tb_frame",
    "tb_next",
    "co_code",
    "co_consts",
):
    add(F, f"attribute {attr}", wrap(f"g = (i for i in [1])\nreturn g.{attr}"), REJECTED)
add(F, "dunder class walk", wrap("return ().__class__.__base__.__subclasses__()"), REJECTED)
add(F, "function globals", wrap("def f():\n    pass\nreturn f.__globals__"), REJECTED)
add(F, "lambda code object", wrap("return (lambda: 0).__code__"), REJECTED)
add(
    F,
    "exception traceback frame",
    wrap("try:\n    1 / 0\nexcept Exception as e:\n    return e.__traceback__"),
    REJECTED,
)
add(
    F,
    "with_traceback",
    wrap("try:\n    1 / 0\nexcept Exception as e:\n    return e.with_traceback(None)"),
    REJECTED,
)
add(
    F,
    "getattr built from pieces",
    wrap("d = '_' * 2\nreturn getattr(1, d + 'class' + d)"),
    REJECTED,
)
add(F, "vars of a function", wrap("return vars()"), REJECTED)
add(F, "globals()", wrap("return globals()['__builtins__']"), REJECTED)
add(F, "locals() walk", wrap("return locals()"), REJECTED)
add(F, "type() to reach object", wrap("return type(1).mro()"), REJECTED)
add(F, "mro attribute", wrap("return (1).mro"), REJECTED)
add(F, "builtins module name", wrap("return __builtins__"), REJECTED)
add(F, "dunder string constant", wrap("return '__class__'"), REJECTED)
add(
    F,
    "match class reaching gi_frame",
    wrap("g = (i for i in [1])\nmatch g:\n    case str(gi_frame=f):\n        return f\nreturn 0"),
    REJECTED,
)
add(
    F,
    "nonlocal rebinding",
    "def solve():\n    x = 1\n    def f():\n        nonlocal x\n        x = 2\n    f()\n    return x\n",
    REJECTED,
)
add(F, "class definition", "class X:\n    pass\ndef solve():\n    return X\n", REJECTED)
add(F, "async coroutine", "async def solve():\n    return 1\n", REJECTED)

# -- format-string walks ---------------------------------------------------------------------------
F = "format-string"
add(F, "issue exploit 4: format walks gi_frame", EXPLOIT_FORMAT_WALK, REJECTED)
add(
    F,
    "format index into globals",
    wrap("g = (i for i in [1])\nreturn '{0.gi_frame.f_globals[os]}'.format(g)"),
    REJECTED,
)
add(F, "format_map attribute", wrap("return '{x.real}'.format_map({'x': 1})"), REJECTED)
add(
    F,
    "format on a variable string",
    wrap("s = '{0.gi_code}'\nreturn s.format((i for i in [1]))"),
    REJECTED,
)
add(F, "format string built at run time", wrap("s = '{0' + '.real}'\nreturn s.format(1)"), REJECTED)
add(F, "str.format unbound", wrap("return str.format('{0.real}', 1)"), REJECTED)
add(F, "format bound method taken", wrap("f = '{0.real}'.format\nreturn f(1)"), REJECTED)
add(F, "nested field in format spec", wrap("return '{0:{1.real}}'.format(1, 2)"), REJECTED)
add(F, "format index field", wrap("return '{0[0]}'.format([1])"), REJECTED)
add(F, "format via map", wrap("return list(map(str.format, ['{0.real}'], [1]))"), REJECTED)
add(F, "format_map on a variable", wrap("t = '{a}'\nreturn t.format_map({'a': 1})"), REJECTED)
add(
    F,
    "plain constant format still runs",
    wrap("return '{:,.2f} / {}'.format(1234.5, 'x')"),
    ("ok", "1,234.50 / x"),
)
add(
    F,
    "f-string with attribute is checked as an attribute",
    wrap("g = (i for i in [1])\nreturn f'{g.gi_frame}'"),
    REJECTED,
)
add(F, "format builtin with a spec", wrap("return format(3.14159, '.2f')"), ("ok", "3.14"))

# -- module, class and context poisoning -----------------------------------------------------------
F = "poisoning"
for label, src in EXPLOIT_POISON:
    add(F, f"issue exploit 2: {label}", src, REJECTED)
add(
    F,
    "delete a module attribute",
    "import math\ndef solve():\n    del math.pi\n    return 1\n",
    REJECTED,
)
add(
    F,
    "augmented attribute assignment",
    "import math\ndef solve():\n    math.pi += 1\n    return 1\n",
    REJECTED,
)
add(
    F,
    "default context precision",
    "import decimal\ndef solve():\n    decimal.DefaultContext.prec = 3\n    return 1\n",
    REJECTED,
)
add(
    F,
    "setcontext only lasts the job",
    "import decimal\ndef solve():\n    decimal.setcontext(decimal.Context(prec=2))\n    return str(decimal.Decimal(1) / 3)\n",
    ("ok", "0.33"),
)
add(
    F,
    "rebinding a module name is local",
    "import math\ndef solve():\n    math = 7\n    return math\n",
    ("ok", 7),
)
add(
    F,
    "dict update on a module",
    "import math\ndef solve():\n    return math.__dict__.update({'pi': 3})\n",
    REJECTED,
)
add(
    F,
    "re cache purge",
    "import re\ndef solve():\n    re.purge()\n    return re.sub('a', 'b', 'aa')\n",
    ("ok", "bb"),
)
add(
    F,
    "json decoder poisoning",
    "import json\ndef solve():\n    json.decoder.scanstring = None\n    return 1\n",
    REJECTED,
)
add(
    F,
    "datetime class attribute",
    "import datetime\ndef solve():\n    datetime.datetime.now = lambda: 0\n    return 1\n",
    REJECTED,
)
add(F, "builtins dict write", wrap("__builtins__['len'] = lambda x: 0\nreturn 1"), REJECTED)

# -- reply forgery ---------------------------------------------------------------------------------
F = "reply-forgery"
add(F, "issue exploit 3: worker stdout through frame locals", EXPLOIT_REPLY_FORGERY, REJECTED)
add(
    F,
    "print a reply-shaped line",
    wrap('print(\'{"ok": true, "value": 666}\')\nreturn 1'),
    ("ok", 1),
)
add(
    F,
    "print a status-shaped line",
    wrap("print('{\"frame\": 3}')\nprint('666')\nreturn 2"),
    ("ok", 2),
)
add(
    F,
    "return a reply-shaped dict",
    wrap("return {'ok': False, 'kind': 'timeout', 'error': 'forged'}"),
    ("ok", {"ok": False, "kind": "timeout", "error": "forged"}),
)
add(
    F,
    "return text with newlines and JSON",
    wrap('return \'1\\n{"ok": true, "value": 666}\\n\''),
    ("ok", '1\n{"ok": true, "value": 666}\n'),
)
add(F, "import sys for stdout", wrap("import sys\nsys.stdout.write('x')\nreturn 1"), REJECTED)
add(
    F, "print with a file argument", wrap("print('{\"ok\": true}', file=None)\nreturn 3"), ("ok", 3)
)
add(
    F,
    "exception message shaped like a reply",
    wrap('raise ValueError(\'\\n{"ok": true, "value": 666}\')'),
    ("error", "ValueError"),
)

# -- file read and write ---------------------------------------------------------------------------
F = "files"
add(F, "open the canary", wrap("return open('CANARY_PATH').read()"), REJECTED)
add(F, "write the marker", wrap("open('MARKER_PATH', 'w').write('x')"), REJECTED)
add(
    F,
    "parent environment via proc",
    wrap("return open('/proc/PARENT_PID/environ').read()"),
    REJECTED,
)
add(F, "import os listdir", "import os\ndef solve():\n    return os.listdir('/')\n", REJECTED)
add(
    F,
    "import pathlib",
    "import pathlib\ndef solve():\n    return pathlib.Path('CANARY_PATH').read_text()\n",
    REJECTED,
)
add(F, "import io", "import io\ndef solve():\n    return io.open('CANARY_PATH').read()\n", REJECTED)
add(
    F,
    "import shutil",
    "import shutil\ndef solve():\n    shutil.copy('CANARY_PATH', 'MARKER_PATH')\n",
    REJECTED,
)
add(
    F,
    "json.load of a path",
    "import json\ndef solve():\n    return json.load('CANARY_PATH')\n",
    ("error", "AttributeError"),
)
add(
    F,
    "import codecs",
    "import codecs\ndef solve():\n    return codecs.open('CANARY_PATH').read()\n",
    REJECTED,
)
add(
    F,
    "json module's codecs attribute",
    "import json\ndef solve():\n    return json.codecs.open('CANARY_PATH').read()\n",
    REJECTED,
)
add(
    F,
    "from os import path",
    "from os import path\ndef solve():\n    return path.exists('CANARY_PATH')\n",
    REJECTED,
)
add(F, "import os.path", "import os.path\ndef solve():\n    return 1\n", REJECTED)
add(F, "relative import", "from . import secrets\ndef solve():\n    return 1\n", REJECTED)
add(
    F,
    "statistics' sys attribute",
    "import statistics\ndef solve():\n    return statistics.sys.modules\n",
    REJECTED,
)
add(
    F,
    "import linecache",
    "import linecache\ndef solve():\n    return linecache.getline('CANARY_PATH', 1)\n",
    REJECTED,
)
add(
    F, "import tempfile", "import tempfile\ndef solve():\n    return tempfile.mkstemp()\n", REJECTED
)

# -- process and exec ------------------------------------------------------------------------------
F = "process"
add(
    F,
    "os.system marker",
    "import os\ndef solve():\n    return os.system('touch MARKER_PATH')\n",
    REJECTED,
)
add(
    F,
    "subprocess run",
    "import subprocess\ndef solve():\n    return subprocess.run(['touch', 'MARKER_PATH'])\n",
    REJECTED,
)
add(
    F,
    "from os import system",
    "from os import system\ndef solve():\n    return system('touch MARKER_PATH')\n",
    REJECTED,
)
add(F, "exec builtin", wrap("exec(\"open('MARKER_PATH', 'w')\")"), REJECTED)
add(F, "eval builtin", wrap("return eval('1+1')"), REJECTED)
add(F, "compile builtin", wrap("return compile('1', 'f', 'eval')"), REJECTED)
add(F, "__import__ builtin", wrap("return __import__('os').system('touch MARKER_PATH')"), REJECTED)
add(F, "import pty", "import pty\ndef solve():\n    pty.spawn('/bin/sh')\n", REJECTED)
add(
    F,
    "import multiprocessing",
    "import multiprocessing\ndef solve():\n    return multiprocessing.cpu_count()\n",
    REJECTED,
)
add(
    F,
    "import ctypes",
    "import ctypes\ndef solve():\n    return ctypes.CDLL(None).system(b'touch MARKER_PATH')\n",
    REJECTED,
)
add(F, "breakpoint", wrap("breakpoint()"), REJECTED)
add(
    F,
    "runtime import of a non-allowed module",
    "def solve():\n    import math\n    m = 'o' + 's'\n    return len(m)\n",
    ("ok", 2),
)

# -- network ---------------------------------------------------------------------------------------
F = "network"
add(
    F,
    "socket connect to listener",
    "import socket\ndef solve():\n    return socket.create_connection(('127.0.0.1', LISTEN_PORT))\n",
    REJECTED,
)
add(
    F,
    "from socket import socket",
    "from socket import socket\ndef solve():\n    return socket()\n",
    REJECTED,
)
add(
    F,
    "urllib",
    "import urllib.request\ndef solve():\n    return urllib.request.urlopen('http://127.0.0.1:LISTEN_PORT/').read()\n",
    REJECTED,
)
add(
    F,
    "http.client",
    "import http.client\ndef solve():\n    return http.client.HTTPConnection('127.0.0.1', LISTEN_PORT).request('GET', '/')\n",
    REJECTED,
)
add(
    F,
    "asyncio",
    "import asyncio\ndef solve():\n    return asyncio.open_connection('127.0.0.1', LISTEN_PORT)\n",
    REJECTED,
)
add(F, "ssl", "import ssl\ndef solve():\n    return ssl.create_default_context()\n", REJECTED)
add(
    F,
    "smtplib",
    "import smtplib\ndef solve():\n    return smtplib.SMTP('127.0.0.1', LISTEN_PORT)\n",
    REJECTED,
)
add(
    F,
    "importlib",
    "import importlib\ndef solve():\n    return importlib.import_module('socket')\n",
    REJECTED,
)
add(F, "select", "import select\ndef solve():\n    return select.select([], [], [], 0)\n", REJECTED)
add(
    F,
    "json with a URL is only text",
    "import json\ndef solve():\n    return json.dumps({'url': 'http://127.0.0.1/'})\n",
    ("ok", '{"url": "http://127.0.0.1/"}'),
)

# -- signals ---------------------------------------------------------------------------------------
F = "signals"
add(F, "kill the parent", "import os\ndef solve():\n    os.kill(PARENT_PID, 10)\n", REJECTED)
add(F, "signal module", "import signal\ndef solve():\n    signal.raise_signal(9)\n", REJECTED)
add(F, "killpg", "import os\ndef solve():\n    os.killpg(0, 9)\n", REJECTED)
add(F, "exit builtin", wrap("exit(3)"), REJECTED)
add(F, "quit builtin", wrap("quit()"), REJECTED)
add(F, "raise SystemExit", wrap("raise SystemExit(0)"), ("error", "SystemExit"))
add(F, "raise KeyboardInterrupt", wrap("raise KeyboardInterrupt()"), ("error", "KeyboardInterrupt"))
add(
    F,
    "BaseException is not a builtin here",
    wrap("raise BaseException('bye')"),
    ("error", "NameError"),
)
add(
    F,
    "generator exit in a finally",
    wrap("try:\n    raise SystemExit(1)\nfinally:\n    pass"),
    ("error", "SystemExit"),
)

# -- memory ----------------------------------------------------------------------------------------
F = "memory"
add(F, "list of a billion", wrap("return len([0] * (10**9))"), ("memory", ""))
add(F, "string of 2 GiB", wrap("s = 'x' * (2**31)\nreturn len(s)"), ("memory", ""))
add(F, "a billion references", wrap("return len([[0]] * (2**30))"), ("memory", ""))
add(F, "growing list", wrap("xs = []\nwhile True:\n    xs.append([0] * 100000)"), ("memory", ""))
add(
    F,
    "growing dict",
    wrap("d = {}\ni = 0\nwhile True:\n    d[i] = [i] * 100000\n    i += 1"),
    ("memory", ""),
)
add(F, "string doubling", wrap("s = 'x'\nwhile True:\n    s = s + s"), ("memory", ""))
add(
    F,
    "nested list bomb",
    wrap("x = [[0] * 10**6] * 10**3\nreturn len([list(r) for r in x])"),
    ("memory", ""),
)
add(F, "range materialized", wrap("return len(list(range(10**10)))"), ("memory", ""))
add(F, "sorted range of a billion", wrap("return len(sorted(range(10**9)))"), ("memory", ""))
add(F, "memoryview name", wrap("return memoryview(b'x')"), REJECTED)

# -- CPU -------------------------------------------------------------------------------------------
F = "cpu"
add(F, "infinite loop", wrap("while True:\n    pass"), ("timeout", ""))
add(
    F, "busy arithmetic", wrap("x = 0\nwhile True:\n    x = (x * 7 + 3) % 1000003"), ("timeout", "")
)
add(F, "huge sum", wrap("return sum(range(10**12))"), ("timeout", ""))
add(
    F,
    "regex backtracking",
    "import re\ndef solve():\n    return bool(re.match('(a+)+$', 'a' * 64 + 'b'))\n",
    ("timeout", ""),
)
add(
    F,
    "nested loops",
    wrap("n = 0\nfor i in range(10**6):\n    for j in range(10**6):\n        n += 1\nreturn n"),
    ("timeout", ""),
)
add(
    F,
    "factorial of ten million",
    "import math\ndef solve():\n    return math.factorial(10**7) % 7\n",
    ("timeout", ""),
)
add(
    F,
    "sorting forever",
    wrap("xs = list(range(10**5))\nwhile True:\n    xs.sort(reverse=True)"),
    ("timeout", ""),
)
add(
    F,
    "decimal at huge precision",
    "import decimal\ndef solve():\n    decimal.getcontext().prec = 10**6\n    return 1\n",
    REJECTED,
)

# -- huge integers -----------------------------------------------------------------------------
F = "huge-integers"
add(F, "ten to the hundred million", wrap("return 10 ** (10 ** 8)"), ("timeout", ""))
add(F, "power tower", wrap("return 10 ** 10 ** 10"), ("timeout", ""))
add(F, "shifted giant", wrap("return 1 << (10 ** 9)"), ("error", "integer result too large"))
add(F, "huge int to str", wrap("return str(10 ** 5000)"), ("error", "Exceeds the limit"))
add(F, "huge str to int", wrap("return int('9' * 5000)"), ("error", "Exceeds the limit"))
add(F, "huge result integer", wrap("return 10 ** 400"), ("error", "integer result too large"))
add(
    F,
    "modular power is fine",
    wrap("return pow(3, 10**18, 1000003)"),
    ("ok", pow(3, 10**18, 1000003)),
)
add(F, "float overflow", wrap("return 10.0 ** 400"), ("error", "OverflowError"))
add(F, "non-finite result", wrap("return float('inf')"), ("error", "not finite"))

# -- recursion -------------------------------------------------------------------------------------
F = "recursion"
add(
    F,
    "unbounded recursion",
    "def f(n):\n    return f(n + 1)\ndef solve():\n    return f(0)\n",
    ("error", "RecursionError"),
)
add(
    F,
    "mutual recursion",
    "def a(n):\n    return b(n)\ndef b(n):\n    return a(n)\ndef solve():\n    return a(0)\n",
    ("error", "RecursionError"),
)
add(F, "recursive lambda", wrap("f = lambda g: g(g)\nreturn f(f)"), ("error", "RecursionError"))
add(
    F,
    "deeply nested list repr",
    wrap("x = []\nfor i in range(10**4):\n    x = [x]\nreturn repr(x)[:10]"),
    ("error", "RecursionError"),
)
add(
    F,
    "deeply nested result",
    wrap("x = []\nfor i in range(10**4):\n    x = [x]\nreturn x"),
    ("error", "RecursionError"),
)
add(
    F,
    "nested json dumps",
    "import json\ndef solve():\n    x = []\n    for i in range(10**4):\n        x = [x]\n    return json.dumps(x)[:5]\n",
    ("error", "RecursionError"),
)
add(
    F,
    "recursive generator",
    "def g(n):\n    yield from g(n + 1)\ndef solve():\n    return next(g(0))\n",
    ("error", "RecursionError"),
)
add(F, "deeply nested source", wrap("return " + "(" * 300 + "1" + ")" * 300), REJECTED)
add(
    F, "setrecursionlimit", "import sys\ndef solve():\n    sys.setrecursionlimit(10**9)\n", REJECTED
)

# -- output floods ---------------------------------------------------------------------------------
F = "output"
add(F, "print flood", wrap("for i in range(10**5):\n    print('spam' * 100)\nreturn 1"), ("ok", 1))
add(F, "one huge print", wrap("print('x' * 10**7)\nreturn 2"), ("ok", 2))
add(F, "huge string result", wrap("return 'a' * 1_000_000"), ("result", ""))
add(F, "huge list result", wrap("return list(range(10**5))"), ("result", ""))
add(F, "huge dict result", wrap("return {str(i): i for i in range(10**5)}"), ("result", ""))
add(F, "print with huge end", wrap("print(1, end='y' * 10**6)\nreturn 3"), ("ok", 3))
add(F, "escaped characters inflate the reply", wrap("return '\\x00' * 60000"), ("result", ""))
add(F, "oversized source", wrap("return 1") + "#" * 30_000, REJECTED)

CORPUS: tuple[Case, ...] = tuple(_C)


# -- the OS layer alone (Python layer switched off) ----------------------------------------------------
_O: list[Case] = []


def os_add(family: str, name: str, source: str, outcome: tuple) -> None:
    _O.append(Case(family, name, source, outcome))


FRAME_WALK_TO_BUILTINS = """def solve():
    def gen():
        yield g.gi_frame.f_back
    g = gen(); f = next(g)
    while "__builtins__" not in f.f_globals: f = f.f_back
    b = f.f_globals["__builtins__"]
    b = b if isinstance(b, dict) else b.__dict__
    os = b["__import__"]("os")
    return b["open"]("/proc/%d/environ" % PARENT_PID).read()
"""
os_add(
    "introspection", "issue exploit 1 rewritten for real builtins", FRAME_WALK_TO_BUILTINS, EPERM
)
os_add("files", "open the canary", wrap("return open('CANARY_PATH').read()"), EPERM)
os_add("files", "write the marker", wrap("open('MARKER_PATH', 'w').write('x')"), EPERM)
os_add("files", "parent environment", wrap("return open('/proc/PARENT_PID/environ').read()"), EPERM)
os_add(
    "files",
    "os.open read-only",
    "import os\ndef solve():\n    return os.read(os.open('CANARY_PATH', os.O_RDONLY), 100)\n",
    EPERM,
)
os_add("files", "listdir", "import os\ndef solve():\n    return os.listdir('/')\n", EPERM)
os_add(
    "files",
    "stat leaks existence",
    "import os\ndef solve():\n    return os.stat('CANARY_PATH').st_size\n",
    EPERM,
)
os_add(
    "files",
    "raw openat through ctypes",
    "import ctypes\ndef solve():\n    fd = ctypes.CDLL(None).syscall(257, -100, b'CANARY_PATH', 0)\n    return fd\n",
    ("ok", -1),
)
os_add(
    "process",
    "os.system marker",
    "import os\ndef solve():\n    return os.system('touch MARKER_PATH')\n",
    ("ok", 127 << 8),
)
os_add("process", "fork", "import os\ndef solve():\n    return os.fork()\n", EPERM)
os_add(
    "process",
    "execv",
    "import os\ndef solve():\n    os.execv('/bin/sh', ['sh', '-c', 'touch MARKER_PATH'])\n",
    EPERM,
)
os_add(
    "process",
    "subprocess",
    "import subprocess\ndef solve():\n    return subprocess.run(['touch', 'MARKER_PATH']).returncode\n",
    EPERM,
)
os_add(
    "process",
    "posix_spawn",
    "import os\ndef solve():\n    return os.posix_spawn('/usr/bin/touch', ['touch', 'MARKER_PATH'], {})\n",
    EPERM,
)
os_add(
    "process",
    "raw execve through ctypes",
    "import ctypes\ndef solve():\n    return ctypes.CDLL(None).syscall(59, b'/usr/bin/touch', None, None)\n",
    ("ok", -1),
)
os_add(
    "process",
    "mmap executable memory",
    "import mmap\ndef solve():\n    return len(mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC))\n",
    EPERM,
)
os_add(
    "process",
    "start a thread",
    "import threading\ndef solve():\n    threading.Thread(target=print).start()\n",
    ("error", "can't start new thread"),
)
os_add(
    "process",
    "exit with the zygote's own no-job status",
    "import os\ndef solve():\n    os._exit(17)\n",
    ("crash", "worker died"),
)
os_add(
    "process",
    "exit quietly without a reply",
    "import os\ndef solve():\n    os._exit(0)\n",
    ("crash", "without a complete reply"),
)
os_add(
    "process",
    "x32 ABI system call",
    "import ctypes\ndef solve():\n    return ctypes.CDLL(None).syscall(0x40000000 | 39)\n",
    ("crash", "SIGSYS"),
)
os_add(
    "network",
    "connect to listener",
    "import socket\ndef solve():\n    s = socket.socket()\n    s.connect(('127.0.0.1', LISTEN_PORT))\n    return 1\n",
    EPERM,
)
os_add(
    "network",
    "udp socket",
    "import socket\ndef solve():\n    return socket.socket(socket.AF_INET, socket.SOCK_DGRAM).fileno()\n",
    EPERM,
)
os_add(
    "network",
    "unix socket",
    "import socket\ndef solve():\n    return socket.socket(socket.AF_UNIX).fileno()\n",
    EPERM,
)
os_add(
    "network",
    "raw socket through ctypes",
    "import ctypes\ndef solve():\n    return ctypes.CDLL(None).syscall(41, 2, 1, 0)\n",
    ("ok", -1),
)
os_add(
    "signals",
    "kill the test process",
    "import os\ndef solve():\n    os.kill(PARENT_PID, 10)\n",
    EPERM,
)
os_add(
    "signals",
    "kill the zygote",
    "import os, signal\ndef solve():\n    os.kill(os.getppid(), 9)\n",
    EPERM,
)
os_add(
    "signals",
    "ignore the CPU limit signal",
    "import signal\ndef solve():\n    signal.signal(signal.SIGXCPU, signal.SIG_IGN)\n    return 1\n",
    EPERM,
)
os_add(
    "signals",
    "raise the address-space limit",
    "import resource\ndef solve():\n    resource.setrlimit(resource.RLIMIT_AS, (-1, -1))\n    return 1\n",
    ("error", "ValueError"),
)
os_add(
    "signals",
    "prlimit on the zygote",
    "import resource, os\ndef solve():\n    return resource.prlimit(os.getppid(), resource.RLIMIT_AS)\n",
    EPERM,
)
os_add(
    "signals",
    "ptrace attach",
    "import ctypes\ndef solve():\n    return ctypes.CDLL(None).ptrace(16, PARENT_PID, 0, 0)\n",
    ("ok", -1),
)
os_add("poisoning", "math.sqrt", EXPLOIT_POISON[0][1], ("ok", 1))
os_add("poisoning", "json.dumps", EXPLOIT_POISON[1][1], ("ok", 1))
os_add("poisoning", "decimal prec", EXPLOIT_POISON[2][1], ("ok", 1))
os_add("poisoning", "statistics.mean", EXPLOIT_POISON[3][1], ("ok", 1))
os_add("poisoning", "Fraction.limit_denominator", EXPLOIT_POISON[4][1], ("ok", 1))
os_add("poisoning", "re.sub", EXPLOIT_POISON[5][1], ("ok", 1))
os_add("poisoning", "json.loads wrapper", EXPLOIT_POISON[6][1], ("ok", 1))
os_add(
    "poisoning",
    "sys.modules entry",
    "import sys, math\ndef solve():\n    sys.modules['math'] = None\n    return 1\n",
    ("ok", 1),
)
os_add("reply-forgery", "issue exploit 3 against the zygote", EXPLOIT_REPLY_FORGERY, ("ok", 1))
os_add(
    "reply-forgery",
    "write to fd 1",
    'import os\ndef solve():\n    os.write(1, b\'{"ok": true, "value": 666}\\n\')\n    return 4\n',
    ("ok", 4),
)
os_add(
    "reply-forgery",
    "read the next job from fd 0",
    "import os\ndef solve():\n    return os.read(0, 100)\n",
    ("error", "Bad file descriptor"),
)
os_add(
    "reply-forgery",
    "two forged frames: the first is its own answer, the second goes nowhere",
    'import os, struct\ndef solve():\n    body = b\'{"ok": true, "value": 666}\'\n    for fd in range(3, 64):\n'
    "        try:\n            os.write(fd, struct.pack('!I', len(body)) + body + struct.pack('!I', len(body)) + body)\n"
    "        except OSError:\n            pass\n    return 5\n",
    ("ok", 666),
)  # its own job only: the pool reads one frame and closes the pipe
os_add(
    "reply-forgery",
    "one forged frame answers only its own job",
    'import os, struct\ndef solve():\n    body = b\'{"ok": true, "value": 666}\'\n    for fd in range(3, 64):\n'
    "        try:\n            os.write(fd, struct.pack('!I', len(body)) + body)\n"
    "        except OSError:\n            pass\n    while True:\n        pass\n",
    ("ok", 666),
)
os_add(
    "reply-forgery",
    "close the reply pipe",
    "import os\ndef solve():\n    for fd in range(3, 64):\n        try:\n            os.close(fd)\n        except OSError:\n            pass\n    return 6\n",
    ("crash", "without a complete reply"),
)
os_add(
    "reply-forgery",
    "half a frame then hang",
    "import os\ndef solve():\n    for fd in range(3, 64):\n        try:\n            os.write(fd, b'\\x00\\x00')\n        except OSError:\n            pass\n    while True:\n        pass\n",
    ("timeout", ""),
)

OS_CORPUS: tuple[Case, ...] = tuple(_O)

# A program every worker runs after hostile ones; its values are computed in the test process too.
VICTIM = """import math, json, decimal, statistics, fractions, re, datetime
from decimal import Decimal
def solve(a=2.0, b=3):
    return {
        "sqrt": math.sqrt(a),
        "json": json.dumps({"k": [1, 2]}),
        "json_back": json.loads('{"x": 1}')["x"],
        "decimal": str(Decimal(1) / Decimal(7)),
        "mean": statistics.mean([1, 2, 3, b]),
        "fraction": str(fractions.Fraction(3.14159).limit_denominator(100)),
        "re": re.sub(r"\\d", "#", "a1b22"),
        "date": (datetime.date(2024, 3, 1) - datetime.date(2024, 2, 1)).days,
        "pi": math.pi,
    }
"""
