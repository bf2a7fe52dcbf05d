"""No import cycles inside the ``minicache`` package, checked on the source (AST), not by importing.

Each module's *module-level* imports of other ``minicache`` modules are edges of a graph (relative or
absolute; ``from .pkg import name`` is an edge to ``pkg.name`` when that is a module, else to
``pkg``; importing ``a.b.c`` also runs the ``__init__`` of ``a.b``). A cycle in that graph is a
module that cannot be imported on its own without finding a half-initialised partner: the test
names the cycle. Exempt, on purpose:

* imports inside functions or methods, in the first test (they run after every module has loaded);
  a second test counts them too, except the lazy edges listed in ``LAZY_EDGES`` with their reasons,
* imports under ``if TYPE_CHECKING:`` (never run),
* edges into the top-level ``minicache/__init__.py`` (the public facade: importing any submodule
  runs it first, and it only re-exports),
* the ``__init__`` of a module's own packages that ``a.b.c`` runs on the way to a sibling ``a.b.d``
  (it is already initialising when ``a.b.c`` runs); importing ``a.b`` itself by name is an edge.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "minicache"


def module_names(root: Path) -> dict[str, Path]:
    """Every module of the package under ``root``, by dotted name (``pkg/__init__.py`` is ``pkg``)."""
    found = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _top_level(body: list[ast.stmt], type_checking: bool = False) -> list[ast.stmt]:
    """The statements that run at import: module level, and inside module-level if/try/with blocks,
    except an ``if TYPE_CHECKING:`` block (unless ``type_checking``: a type checker reads it)."""
    out: list[ast.stmt] = []
    for node in body:
        if isinstance(node, ast.If):
            test = node.test
            if (
                isinstance(test, ast.Name)
                and test.id == "TYPE_CHECKING"
                or isinstance(test, ast.Attribute)
                and test.attr == "TYPE_CHECKING"
            ):
                out += _top_level(node.orelse, type_checking)
                if type_checking:
                    out += _top_level(node.body, type_checking)
                continue
            out += _top_level(node.body, type_checking) + _top_level(node.orelse, type_checking)
        elif isinstance(node, ast.Try):
            out += _top_level(node.body, type_checking) + _top_level(node.orelse, type_checking)
            out += _top_level(node.finalbody, type_checking)
            for handler in node.handlers:
                out += _top_level(handler.body, type_checking)
        elif isinstance(node, ast.With):
            out += _top_level(node.body, type_checking)
        else:
            out.append(node)
    return out


def _imports(
    body: list[ast.stmt], in_functions: bool, type_checking: bool = False
) -> list[ast.stmt]:
    nodes = _top_level(body, type_checking)
    if in_functions:  # also every import nested in a function or class body
        nodes = [
            n
            for node in nodes
            for n in ast.walk(node)
            if isinstance(n, (ast.Import, ast.ImportFrom))
        ]
    return nodes


def imports_of(
    name: str,
    path: Path,
    modules: dict[str, Path],
    in_functions: bool = False,
    type_checking: bool = False,
) -> set[str]:
    """The package modules ``name`` imports at module level (with the packages those run first)."""
    is_package = path.name == "__init__.py"
    base = name.split(".") if is_package else name.split(".")[:-1]
    targets: set[str] = set()
    for node in _imports(
        ast.parse(path.read_text(encoding="utf-8")).body, in_functions, type_checking
    ):
        if isinstance(node, ast.Import):
            targets |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - (node.level - 1)]
                parent = ".".join(anchor + ([node.module] if node.module else []))
            else:
                parent = node.module or ""
            for alias in node.names:
                child = f"{parent}.{alias.name}"
                targets.add(child if child in modules else parent)
    edges = set()
    for target in targets:
        parts = target.split(".")
        for n in range(
            2, len(parts) + 1
        ):  # a.b.c runs a.b's __init__ first; the facade "a" is exempt
            prefix = ".".join(parts[:n])
            own_package = name.startswith(prefix + ".")  # already initialising when ``name`` runs
            if prefix in modules and prefix != name and (prefix == target or not own_package):
                edges.add(prefix)
    return edges


def import_graph(
    root: Path, in_functions: bool = False, type_checking: bool = False
) -> dict[str, set[str]]:
    modules = module_names(root)
    return {
        name: imports_of(name, path, modules, in_functions, type_checking)
        for name, path in modules.items()
    }


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path (first module repeated at the end), or None. Depth-first, colours."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_the_minicache_package_has_no_import_cycle():
    graph = import_graph(PACKAGE)
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


# Lazy imports that must stay lazy, each with its reason; every other in-function import is checked too.
LAZY_EDGES: dict[
    tuple[str, str], str
] = {}  # none: config.models reads EngineConfig from config.engine


def test_no_cycle_even_counting_imports_inside_functions_except_the_listed_lazy_ones():
    """The engine and StepCache imported each other inside a function; errors.py ended that. What
    remains lazy on purpose is listed in LAZY_EDGES, and each listed edge must still exist."""
    graph = import_graph(PACKAGE, in_functions=True)
    for a, b in LAZY_EDGES:
        assert b in graph[a], f"{a} no longer imports {b}: drop it from LAZY_EDGES"
        graph[a].discard(b)
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle through an in-function import: " + " -> ".join(cycle or [])


def test_the_graph_sees_the_engines_stages_and_lazy_imports_stay_out():
    """The check is only as good as its edges: the engine's stage imports are found, and an import
    inside a function (engine -> embedding, stepcache used to import the engine that way) is not."""
    graph = import_graph(PACKAGE)
    assert {
        "minicache.build.builder",
        "minicache.miss.path",
        "minicache.hit.path",
        "minicache.answers",
        "minicache.errors",
        "minicache.stepcache",
        "minicache.store",
    } <= graph["minicache.engine"]
    assert "minicache.route.embedding" not in graph["minicache.engine"]
    assert (
        "minicache.engine"
        not in import_graph(PACKAGE, in_functions=True)["minicache.stepcache.cache"]
    )
    assert "minicache.store.base" in graph["minicache.store.sqlite"]


def test_no_cycle_even_counting_type_checking_imports():
    """A cycle that only type hints close is still a knot in the design: two modules that cannot be
    read apart. None is left."""
    cycle = find_cycle(import_graph(PACKAGE, type_checking=True))
    assert cycle is None, "import cycle through a TYPE_CHECKING import: " + " -> ".join(cycle or [])


def test_errors_imports_nothing_of_minicache():
    """Every module imports errors.py; it imports none of them back, not even for a type hint."""
    assert import_graph(PACKAGE, in_functions=True, type_checking=True)["minicache.errors"] == set()


# The pipeline's stages, in the order their imports run: a stage imports only earlier stages and the
# foundation (errors, answers, request, events, counters, config, models, sandbox, store), never a
# later one.
STAGES = ("programs", "route", "miss", "hit", "build")
FOUNDATION = {
    "errors",
    "answers",
    "request",
    "events",
    "counters",
    "config",
    "models",
    "sandbox",
    "store",
}


def _area(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def stage_order_violations(graph: dict[str, set[str]]) -> list[str]:
    """Each import that runs against the pipeline's order, as ``a -> b``."""
    found = []
    for module, targets in sorted(graph.items()):
        here = _area(module)
        for target in sorted(targets):
            there = _area(target)
            if here == there or target == module.split(".")[0]:
                continue
            if here in FOUNDATION and there not in FOUNDATION:
                found.append(f"{module} -> {target} (the foundation imports no stage)")
            elif here in STAGES and there in STAGES and STAGES.index(there) > STAGES.index(here):
                found.append(f"{module} -> {target} (a stage imports no later stage)")
            elif here in STAGES and there not in STAGES and there not in FOUNDATION:
                found.append(
                    f"{module} -> {target} (a stage imports only stages and the foundation)"
                )
    return found


def test_stage_imports_run_one_way_programs_route_miss_hit_build():
    graph = import_graph(PACKAGE, in_functions=True, type_checking=True)
    assert {f"minicache.{stage}" for stage in STAGES} <= set(graph)
    assert stage_order_violations(graph) == []


def test_the_stage_order_check_names_a_backwards_import(tmp_path):
    pkg = tmp_path / "minicache"
    for folder in ("hit", "build", "errors"):
        (pkg / folder).mkdir(parents=True)
        (pkg / folder / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "hit" / "path.py").write_text("def later():\n    from minicache.build import queue\n")
    (pkg / "build" / "queue.py").write_text("from minicache.hit import path\n")
    graph = import_graph(pkg, in_functions=True)
    assert stage_order_violations(graph) == [
        "minicache.hit.path -> minicache.build (a stage imports no later stage)",
        "minicache.hit.path -> minicache.build.queue (a stage imports no later stage)",
    ]


def test_no_module_of_the_core_imports_the_benchmark():
    """The core wheel holds no benchmark code: not even a lazy import may reach for it."""
    found = []
    for name, path in module_names(PACKAGE).items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            named = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            found += [f"{name} imports {n}" for n in named if n.split(".")[0] == "minicache_bench"]
    assert found == []


def test_the_package_root_holds_at_most_twelve_modules():
    """Stages and concerns are folders; the root keeps the engine, the facade and the shared records."""
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(root) <= 12, root


def test_a_cycle_in_a_package_is_found_and_named(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .a import A\n")
    (pkg / "a.py").write_text("from .sub.b import B\nA = 1\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..a import A\n"
        "def later():\n    from ..a import A\n    return A\n"
        "try:\n    from .. import c\nexcept ImportError:\n    c = None\nB = 2\n"
    )
    (pkg / "c.py").write_text("import pkg.a\n")
    graph = import_graph(pkg)
    assert graph["pkg.sub.b"] == {
        "pkg.c"
    }  # the TYPE_CHECKING and in-function imports are not edges
    assert graph["pkg.a"] == {"pkg.sub", "pkg.sub.b"}
    assert find_cycle(graph) == ["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"]
    (pkg / "c.py").write_text("X = 3\n")
    assert find_cycle(import_graph(pkg)) is None


# The one public exception class defined outside errors.py, and why: it is the HTTP rendering of errors
# (FastAPI's HTTPException with an OpenAI-style body), not an error MiniCache raises about its work.
# Private classes (a leading underscore) are control flow inside their module, never seen by callers.
OUTSIDE_ERRORS_PY = {"minicache.server.errors.ApiError"}


def test_every_exception_minicache_defines_lives_in_errors_py():
    import builtins

    from minicache import errors

    ours = {
        n for n, v in vars(errors).items() if isinstance(v, type) and issubclass(v, BaseException)
    }
    exception_names = (
        ours
        | {"HTTPException"}
        | {
            n
            for n, v in vars(builtins).items()
            if isinstance(v, type) and issubclass(v, BaseException)
        }
    )
    found = []
    for name, path in module_names(PACKAGE).items():
        if name == "minicache.errors":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            bases = (
                {
                    b.id
                    if isinstance(b, ast.Name)
                    else b.attr
                    if isinstance(b, ast.Attribute)
                    else ""
                    for b in getattr(node, "bases", [])
                }
                if isinstance(node, ast.ClassDef)
                else set()
            )
            if bases & exception_names and not node.name.startswith("_"):  # type: ignore[attr-defined]
                found.append(f"{name}.{node.name}")  # type: ignore[attr-defined]
    assert set(found) == OUTSIDE_ERRORS_PY


def test_every_error_is_a_minicache_error_and_old_import_paths_still_work():
    from minicache import errors
    from minicache.hit.extraction import ExtractionError
    from minicache.hit.verify import HitRefused
    from minicache.models.smoke import SmokeCheckError
    from minicache.programs.signature import ProgramShapeError
    from minicache.sandbox import SandboxError, SandboxUnavailable, SandboxViolation
    from minicache.stepcache import NotAStepTask
    from minicache.stepcache.linear import ParseError

    classes = [
        v for v in vars(errors).values() if isinstance(v, type) and issubclass(v, BaseException)
    ]
    assert len(classes) > 20 and all(issubclass(c, errors.MiniCacheError) for c in classes)
    assert (
        ExtractionError,
        HitRefused,
        SmokeCheckError,
        SandboxError,
        SandboxUnavailable,
        SandboxViolation,
        NotAStepTask,
        ParseError,
        ProgramShapeError,
    ) == (
        errors.ExtractionError,
        errors.HitRefused,
        errors.SmokeCheckError,
        errors.SandboxError,
        errors.SandboxUnavailable,
        errors.SandboxViolation,
        errors.NotAStepTask,
        errors.StepParseError,
        errors.ProgramShapeError,
    )
    # Callers that caught ValueError for these keep working.
    assert all(issubclass(c, ValueError) for c in (ParseError, ProgramShapeError))
    # A value that is not an answer is not a sandbox failure; both are a program's failure.
    assert not issubclass(errors.AnswerError, errors.SandboxError)
    program_errors = set(errors.ProgramError.__subclasses__())
    assert {errors.AnswerError, errors.SandboxError, errors.SandboxViolation} <= program_errors


BENCHMARK = PACKAGE.parent / "benchmarks" / "minicache_bench"


def test_every_module_fits_in_a_head_at_most_400_lines():
    """A module past 400 formatted lines is split before it grows, the core's and the benchmark's
    alike (the formatter is enforced, so the count cannot be met by packing lines)."""
    long = {
        name: n
        for root in (PACKAGE, BENCHMARK)
        for name, path in module_names(root).items()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > 400
    }
    assert long == {}
