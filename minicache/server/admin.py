"""Checks on an import body before the engine sees it.

``MiniCache.import_entries`` validates entries, but some wrong types get past it and fail only while
writing (a group id or an example context that is an object), which would leave a partial import;
others raise AttributeError. Checking the shape here first keeps "invalid -> 400, nothing written".
"""

from __future__ import annotations

from typing import Any


def _entry_problem(item: Any) -> str | None:
    if not isinstance(item, dict):
        return "not a JSON object"
    group = item.get("group_id")
    if not isinstance(group, str) or not group.strip() or len(group) > 200:
        return "group_id must be a non-empty string"
    if not isinstance(item.get("program"), str):
        return "program must be a string"
    template = item.get("template")
    if not isinstance(template, list) or not all(isinstance(v, dict) and isinstance(v.get("name"), str)
                                                 for v in template):
        return "template must be a list of objects with a name"
    for name in ("rules", "validation"):
        if item.get(name) is not None and not isinstance(item[name], dict):
            return f"{name} must be an object"
    for name in ("version", "hits", "failures"):
        value = item.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            return f"{name} must be a non-negative integer"
    examples = item.get("examples")
    if examples is not None:
        if not isinstance(examples, list):
            return "examples must be a list"
        for j, x in enumerate(examples):
            if not isinstance(x, dict) or not isinstance(x.get("question"), str):
                return f"examples[{j}] must be an object with a question"
            if x.get("context") is not None and not isinstance(x["context"], str):
                return f"examples[{j}].context must be a string"
            if x.get("variables") is not None and not isinstance(x["variables"], dict):
                return f"examples[{j}].variables must be an object"
    return None


def import_problems(data: Any) -> str | None:
    """None if ``data`` has the shape of an export, else the first problem found."""
    if not isinstance(data, list):
        return "expected a JSON list of entries (as GET /admin/export returns)"
    for i, item in enumerate(data):
        problem = _entry_problem(item)
        if problem:
            return f"entry {i}: {problem}"
    return None
