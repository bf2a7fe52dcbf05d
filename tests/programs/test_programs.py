"""Getting a program out of a model reply: the fence, and a statement's stray indentation."""

from __future__ import annotations

import ast

from minicache.programs.text import extract_code, repair_indentation
from minicache.sandbox import run_untrusted

# The 1.5B target's reply to a Formula request, verbatim: one line three spaces deep.
EAR_REPLY = (
    "```python\ndef solve():\n    r = 0.10  # 10% nominal rate\n    n = 2    # semi-annual compounding\n"
    "   EAR = (1 + r/n)**n - 1\n    return round(EAR, 2)\n```"
)


def test_a_statement_one_space_short_joins_its_block_and_the_program_runs():
    code = extract_code(EAR_REPLY)
    assert "    EAR = (1 + r/n)**n - 1\n" in code
    assert run_untrusted(code) == 0.1


def test_a_program_that_parses_comes_back_unchanged():
    code = "def solve(a=1):\n  x = a  # two-space blocks are fine\n  return x\n"
    assert repair_indentation(code) is code
    assert extract_code("Here:\n```python\n" + code + "```\nDone.") == code


def test_a_line_deeper_than_any_block_snaps_to_the_nearest_level_after_a_dedent():
    code = "def solve():\n    if True:\n        x = 1\n     y = 2\n    return x + y\n"
    repaired = repair_indentation(code)
    assert repaired.split("\n")[3] == "    y = 2"
    assert run_untrusted(repaired) == 3


def test_continuation_lines_and_triple_quoted_text_keep_their_indentation():
    code = (
        'def solve():\n    """Two\n   lines."""\n    total = (1 +\n       2)\n    s = 3 + \\\n  4\n'
        "   return total + s\n"
    )
    repaired = repair_indentation(code)
    lines = repaired.split("\n")
    assert lines[2] == '   lines."""' and lines[4] == "       2)" and lines[6] == "  4"
    assert lines[7] == "    return total + s"
    assert ast.get_docstring(ast.parse(repaired).body[0], clean=False) == "Two\n   lines."  # type: ignore[arg-type]
    assert run_untrusted(repaired) == 10


def test_a_signature_over_several_lines_opens_its_block_where_it_ends():
    code = "def solve(\n    a=2,  # the first value\n    b=3,\n):\n    c = a * b\n   return c\n"
    repaired = repair_indentation(code)
    assert repaired.split("\n")[5] == "    return c"
    assert run_untrusted(repaired) == 6


def test_indentation_the_snap_cannot_fix_and_other_syntax_errors_are_left_for_the_gate():
    missing_block = "def solve():\nreturn 1\n"
    assert repair_indentation(missing_block) == missing_block
    not_python = "def solve(:\n   return 1\n"
    assert repair_indentation(not_python) == not_python
