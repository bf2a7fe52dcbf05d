"""StepCache: step-level reuse of structured outputs with lightweight checks and selective patching.

The engine (:class:`minicache.MiniCache`) sends a request here when it asks for a structured output
StepCache can verify (``mode="auto"``), or when the caller asks (``mode="step"``).
"""

from minicache.config.engine import StepConfig
from minicache.stepcache.cache import NotAStepTask, StepCache, StepOutcome, parse, task_of

__all__ = ["StepCache", "StepConfig", "StepOutcome", "NotAStepTask", "parse", "task_of"]
