"""Which groups of a committed run have a candidate another example backs, at their first K examples.

For each group of ``STORE`` (a benchmark's ``minicache.db``) with at least two examples, the build's
model-free comparison (:func:`minicache.candidates.own_candidates`) runs on its oldest ``K``
examples in the sandbox, no model. Prints, per group, each candidate's kind, whether it is backed,
whether its program named its values, its parameters and the group's first request; then how many
groups have a backed candidate. An early build (``EngineConfig.build_early``) tries only backed
candidates, so this counts the groups that could be built at ``K`` examples.

    .venv/bin/python scripts/backing_replay.py benchmarks/results/formula-v15/minicache.db --first 2

(On code before candidates were compared by order it prints "-" for named.)

Why: comparing two versions of the comparison on identical examples takes a second per store,
not a stream; whether the backed candidates then pass validation and serve hits still takes a
stream (or ``scripts/rebuild_replay.py`` for the validation).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from minicache.candidates import own_candidates
from minicache.request import request_text, shared_prefix
from minicache.sandbox import SandboxPool
from minicache.store import open_store
from minicache.synthesis import parse_signature


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("--first", type=int, default=2, metavar="K", help="examples per group compared (default 2)")
    ap.add_argument("--tenant", default="default")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:  # read a copy: the committed store stays as it is
        copy = Path(tmp) / "store.db"
        shutil.copy(args.store, copy)
        store, sandbox = open_store(str(copy)), SandboxPool()
        try:
            groups = backed = 0
            for group in store.list_groups(args.tenant):
                examples = store.examples(args.tenant, group.id)[:args.first]
                if len(examples) < 2:
                    continue
                groups += 1
                prefix = shared_prefix([request_text(ex.question, ex.context) for ex in examples])
                candidates, split = own_candidates(examples, prefix, sandbox, limit=len(examples))
                backed += any(c.backed for c in candidates)
                print(f"{group.id}  {examples[0].question[:70]!r}" + ("  (no majority)" if split else ""))
                for c in candidates:
                    names = list(parse_signature(c.source).defaults)
                    named = getattr(c, "named", "-")
                    print(f"    {c.kind:12} backed={c.backed!s:5} named={named!s:5} {names}")
            print(f"{backed} of {groups} groups have a backed candidate at their first {args.first} examples")
        finally:
            sandbox.close()
            store.close()


if __name__ == "__main__":
    main()
