"""Rebuild a committed run's failed groups with the current build code and the real models.

For each group whose builds failed in ``STORE`` (a benchmark's ``minicache.db``), a copy of the
store is made, the group's failure record and back-off are cleared (so every build starts from the
same state), and the group is built once, inline, with the embedded target and small model. Prints,
per group, each candidate the build validated (its kind, whether another example backs it, the
seconds its validation took, its outcome) and the build's total seconds, then the totals.

    .venv/bin/python scripts/rebuild_replay.py benchmarks/results/tatqa-v5/minicache.db

With ``--first K``, every group is cut to its oldest K examples and built once, failed or not:
with K below ``build_after`` (3) that is the early build (``EngineConfig.build_early``) the group
could have had at K examples.

Why: a build's cost on a stream depends on when admission lets it run and on what it overlaps; this
measures what one build of the same examples costs, so that two versions of the build code can be
compared on identical inputs in minutes instead of a stream's hour and a half. It says nothing of
how a stream's admission would then decide: that still takes a stream.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from minicache import MiniCache
from minicache.admission import AdmissionConfig
from minicache.build import Builder
from minicache.engine_config import EngineConfig
from minicache.models.base import set_real_models_allowed


def failed_groups(db: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(db) as con:
        return con.execute("SELECT tenant, id FROM groups WHERE build_failures > 0 ORDER BY created_at").fetchall()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", type=Path, help="a benchmark's minicache.db")
    ap.add_argument("--first", type=int, metavar="K", help="cut every group to its oldest K examples and build it")
    args = ap.parse_args()
    set_real_models_allowed(True)
    groups = failed_groups(args.store)
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "store.db"
        shutil.copy(args.store, copy)
        with sqlite3.connect(copy) as con:
            con.execute("UPDATE groups SET failure=NULL, build_failures=0, uncacheable_until=0, status='open'")
            con.execute("DELETE FROM entries")
            if args.first:
                con.execute("DELETE FROM examples WHERE (SELECT COUNT(*) FROM examples AS older WHERE older.tenant ="
                            " examples.tenant AND older.group_id = examples.group_id AND older.created_at <"
                            " examples.created_at) >= ?", (args.first,))
                groups = con.execute("SELECT tenant, group_id FROM examples GROUP BY tenant, group_id HAVING COUNT(*)"
                                     " = ? ORDER BY MIN(created_at)", (args.first,)).fetchall()
        config = EngineConfig(background_builds=False, admission=AdmissionConfig(enabled=False))
        mc = MiniCache.local(str(copy), config=config)
        log: list[dict[str, Any]] = []
        validate = Builder.validate

        def timed(self: Builder, source: str, held: list, origin: Any, prefix: str, backed: bool = True,
                  **kwargs: Any) -> Any:
            t = time.perf_counter()
            record = validate(self, source, held, origin, prefix, backed, **kwargs)
            log.append({"backed": backed, "s": time.perf_counter() - t, "ok": record.ok,
                        "model_checks": sum(c.by_model for c in record.checks)})
            return record

        Builder.validate = timed  # type: ignore[method-assign]
        total = validated = 0.0
        entries = 0
        try:
            for tenant, gid in groups:
                log.clear()
                n = len(mc.store.examples(tenant, gid))
                t = time.perf_counter()
                entry = mc.builder.build(tenant, gid)
                s = time.perf_counter() - t
                total += s
                entries += entry is not None
                validated += len(log)
                parts = ", ".join(f"{'backed' if v['backed'] else 'unbacked'} {v['s']:.1f} s "
                                  f"({v['model_checks']} model checks, {'ok' if v['ok'] else 'failed'})" for v in log)
                outcome = "entry" if entry else "no entry"
                print(f"{gid} ({n} examples): {outcome} in {s:.1f} s; {parts or 'no candidate'}")
        finally:
            Builder.validate = validate  # type: ignore[method-assign]
            mc.close()
        print(f"{len(groups)} groups: {entries} entries, {validated:.0f} candidates validated, {total:.1f} s of builds")


if __name__ == "__main__":
    main()
