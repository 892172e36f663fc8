"""`spec.retry`: how temporary failures are retried."""

from __future__ import annotations

from agent.config import checks
from agent.config.fields import Duration, setting
from agent.recordtype import record


@record(frozen=True)
class RetrySpec:
    attempts: int = setting("Attempts per phase for temporary failures.", default=5,
                            check=checks.positive)
    initial_delay: Duration = setting("Ceiling of the first jittered delay.",
                                      default=Duration(1), check=checks.positive)
    max_delay: Duration = setting("Ceiling of any jittered delay.", default=Duration(60),
                                  check=checks.positive)
