"""StepCache: step-level reuse of structured outputs with lightweight checks and selective patching.

The engine (:class:`minicache.MiniCache`) sends a request here when it asks for a structured output
StepCache can verify (``mode="auto"``), or when the caller asks (``mode="step"``).
"""

from minicache.config.engine import StepConfig
from minicache.errors import NotAStepTask
from minicache.stepcache.cache import StepCache, StepOutcome
from minicache.stepcache.entrance import parse, step_request_of, task_of

__all__ = [
    "StepCache",
    "StepConfig",
    "StepOutcome",
    "NotAStepTask",
    "parse",
    "step_request_of",
    "task_of",
]
