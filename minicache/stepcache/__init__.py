"""StepCache: step-level reuse of structured outputs with lightweight checks and selective patching.

The engine (:class:`minicache.MiniCache`) sends a request here when it asks for a structured output
StepCache can verify (``mode="auto"``), or when the caller asks (``mode="step"``).
"""

from .cache import NotAStepTask, StepCache, StepConfig, StepOutcome, parse, task_of

__all__ = ["StepCache", "StepConfig", "StepOutcome", "NotAStepTask", "parse", "task_of"]
