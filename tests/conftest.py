"""Suite-wide settings.

Hypothesis: the suite runs on small shared CI machines (2 cores), where generating an example
or running one can be slow for reasons that have nothing to do with the code under test. The
`shared` profile keeps every property's example count and checks, and drops only the timing
ones (per-example deadline, "generation is slow"), which fail by load, not by defect.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile("shared", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("shared")
