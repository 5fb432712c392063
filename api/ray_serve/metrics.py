"""Each replica's Prometheus series, copied into Ray's metrics so they are scraped per replica.

Behind Ray Serve's proxy, `GET /metrics` reaches whichever replica the router picks, so it cannot
be scraped per replica. Ray exports its own metrics on every node's metrics-export port, each
series tagged with the deployment, replica and application; the mirror copies the app's
registry there as gauges named `ray_<chorus name>` (counters keep their totals; histograms
their `_sum` and `_count`, not their buckets).
"""
from __future__ import annotations

import logging
import time
from typing import Callable

from ray.serve import metrics as serve_metrics

# The app's series change at most with each engine stats report (every 0.25 s); Ray's exporter
# reads them every few seconds.
COPY_INTERVAL_S = 2.0
logger = logging.getLogger("chorus.api")
_SKIPPED_SUFFIXES = ("_bucket", "_created")


class RayMetricsMirror:
    """Copies an `ApiMetrics` registry into Ray gauges. Invariant: one Ray gauge per series name,
    created with that series' label names as its tag keys; a copy runs at most once per
    `interval_s` and never raises into its caller."""

    def __init__(self, read_metrics: Callable[[], object | None], interval_s: float = COPY_INTERVAL_S) -> None:
        self._read_metrics = read_metrics
        self._interval_s = interval_s
        self._last = float("-inf")
        self._gauges: dict[str, serve_metrics.Gauge] = {}
        self._failed: set[str] = set()

    def copy(self) -> int:
        """Copies every series now (unless one was copied within the interval); returns how many."""
        now = time.monotonic()
        api_metrics = self._read_metrics()
        if api_metrics is None or now - self._last < self._interval_s:
            return 0
        self._last = now
        copied = 0
        try:
            families = list(api_metrics.registry.collect())
        except Exception:  # noqa: BLE001 - metrics must never fail the routing report
            logger.warning("could not read the app's metrics", exc_info=True)
            return 0
        for family in families:
            for sample in family.samples:
                if sample.name.endswith(_SKIPPED_SUFFIXES) or sample.name in self._failed:
                    continue
                try:
                    gauge = self._gauges.get(sample.name)
                    if gauge is None:
                        gauge = serve_metrics.Gauge(sample.name, family.documentation, tuple(sorted(sample.labels)))
                        self._gauges[sample.name] = gauge
                    gauge.set(sample.value, dict(sample.labels))
                    copied += 1
                except Exception:  # noqa: BLE001 - metrics must never fail the routing report
                    self._failed.add(sample.name)  # told once, not every copy
                    logger.warning("could not copy %s into Ray's metrics", sample.name, exc_info=True)
        return copied
