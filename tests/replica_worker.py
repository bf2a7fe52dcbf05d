"""A MiniCache replica process for tests/test_replica_kill.py: serves three misses of one group, then
builds synchronously while its small model is slow, so that the test can kill -9 it mid-build."""

import sys
import time

from fakes import CR_VALUES, CURRENT_RATIO, FakeSmall, FakeTarget, HashEmbedder
from minicache.config.engine import VerifyConfig
from minicache.engine import EngineConfig, MiniCache
from minicache.sandbox import SandboxPool


class SlowSmall(FakeSmall):
    def complete(self, messages, options=None):
        print("EXTRACTING", flush=True)
        time.sleep(60)  # the build's validation never gets past its first extraction
        return super().complete(messages, options)


def main() -> None:
    dsn = sys.argv[1]
    with SandboxPool(size=1) as sandbox:
        mc = MiniCache(
            FakeTarget(),
            SlowSmall(),
            dsn,
            embedder=HashEmbedder(),
            sandbox=sandbox,
            config=EngineConfig(
                background_builds=False,
                build_lease_s=3.0,
                build_early=0,
                verify=VerifyConfig(probation=0),
            ),
        )
        for values in CR_VALUES[:3]:
            mc.solve(CURRENT_RATIO.ask(*values))  # the third triggers the build, which hangs


if __name__ == "__main__":
    main()
