"""The timing loop of pattn's benchmarks (PERF.md): CUDA events around every
call, calls rotated (one per cache copy, so that a copy is re-read only after
the L2 has been flushed), medians after a warm-up."""

from __future__ import annotations

import dataclasses
import statistics
from typing import Callable


@dataclasses.dataclass
class Timing:
    median_us: float
    p10_us: float
    p90_us: float
    runs: int

    def tbps(self, nbytes: float) -> float:
        """Effective bandwidth of reading `nbytes` per call, in TB/s."""
        return nbytes / (self.median_us * 1e-6) / 1e12


def time_calls(torch, calls: list[Callable[[], None]], warmup: int,
               iters: int) -> Timing:
    """Times calls[i % len(calls)] one by one with CUDA events; median."""
    for i in range(warmup):
        calls[i % len(calls)]()
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True),
               torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for i, (start, end) in enumerate(events):
        start.record()
        calls[i % len(calls)]()
        end.record()
    torch.cuda.synchronize()
    samples = sorted(start.elapsed_time(end) * 1e3 for start, end in events)
    return Timing(statistics.median(samples), samples[len(samples) // 10],
                  samples[(9 * len(samples)) // 10], len(samples))
