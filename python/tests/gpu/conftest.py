"""pytest plumbing of the GPU suite: import paths and the results table.

Tests report their numerical errors to the session-wide ``gpu_results``
fixture; when the environment variable ``PATTN_GPU_RESULTS`` names a file,
the session ends by writing a Markdown summary there (date, GPU, commit,
pass/fail/skip counts, and the largest errors per encoding family).
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import importlib.util
import os
import pathlib
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]

# Run from a source checkout without installing the package: the pure-Python
# package lives in python/, and ir.py beside this file.
if importlib.util.find_spec("pattn") is None:
    sys.path.insert(0, str(REPO / "python"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import ir  # noqa: E402  (needs the path above)


@dataclasses.dataclass
class ErrorStats:
    """The worst errors seen for one encoding family."""

    checks: int = 0
    max_abs: float = 0.0
    max_rel: float = 0.0
    worst_ratio: float = 0.0  # max |err| / (atol + rtol * |ref|); <= 1 passes


class GpuResults:
    """Collects outcomes and error statistics over the session."""

    def __init__(self) -> None:
        self.outcomes: collections.Counter = collections.Counter()
        self.skip_reasons: collections.Counter = collections.Counter()
        self.errors: dict[str, ErrorStats] = collections.defaultdict(ErrorStats)
        self.device = ""
        # The finite-input property: cases run and non-finite outputs seen.
        self.finite_cases = 0
        self.nonfinite_outputs = 0

    def record(self, family: str, max_abs: float, max_rel: float,
               worst_ratio: float) -> None:
        stats = self.errors[family]
        stats.checks += 1
        stats.max_abs = max(stats.max_abs, max_abs)
        stats.max_rel = max(stats.max_rel, max_rel)
        stats.worst_ratio = max(stats.worst_ratio, worst_ratio)

    def record_finite(self, nonfinite: int) -> None:
        self.finite_cases += 1
        self.nonfinite_outputs += nonfinite

    def markdown(self) -> str:
        now = datetime.datetime.now(datetime.timezone.utc)
        lines = [
            "# pattn GPU test results", "",
            "| | |", "|---|---|",
            f"| date | {now:%Y-%m-%d %H:%M} UTC |",
            f"| GPU | {self.device or _device_name()} |",
            f"| commit | {ir.source_commit()} |",
            f"| backend | {os.environ.get('PATTN_TEST_BACKEND', 'auto')} |",
            f"| passed | {self.outcomes['passed']} |",
            f"| failed | {self.outcomes['failed']} |",
            f"| skipped | {self.outcomes['skipped']} |",
        ]
        for reason, count in self.skip_reasons.most_common(3):
            lines.append(f"| skip reason ({count}) | {reason} |")
        lines += [
            "", "Errors of pattn against the float64 reference on the "
            "dequantized cache. Relative error is taken where |ref| >= 1e-2; "
            "the last column is max |err| / (atol + rtol |ref|), at most 1 "
            "when the SPEC §8 tolerance holds.", "",
            "| family | checks | max abs err | max rel err | worst err / tol |",
            "|---|---|---|---|---|"]
        for family in sorted(self.errors):
            s = self.errors[family]
            lines.append(f"| {family} | {s.checks} | {s.max_abs:.3e} | "
                         f"{s.max_rel:.3e} | {s.worst_ratio:.3f} |")
        if not self.errors:
            lines.append("| (none) | 0 | | | |")
        if self.finite_cases:
            lines += ["", f"Finite input, finite output: {self.finite_cases} "
                      f"cases (random scales over [1e-30, 1e30], queries over "
                      f"[1e-4, 1e4], every encoding), "
                      f"{self.nonfinite_outputs} NaN/inf outputs."]
        return "\n".join(lines) + "\n"


def _device_name() -> str:
    try:
        import torch
        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            return f"{torch.cuda.get_device_name()} (cc {major}.{minor})"
    except Exception:  # noqa: BLE001 - the table must still be written
        pass
    return "none"


# One collector per session: this conftest is imported once.
_RESULTS = GpuResults()


def _in_this_suite(nodeid: str) -> bool:
    return "gpu/" in nodeid.replace("\\", "/")


@pytest.fixture(scope="session")
def gpu_results() -> GpuResults:
    return _RESULTS


def _count(report) -> None:
    _RESULTS.outcomes[report.outcome] += 1
    if report.skipped and isinstance(report.longrepr, tuple):
        _RESULTS.skip_reasons[report.longrepr[2]] += 1


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not _in_this_suite(report.nodeid):
        return
    # One outcome per test: its call, or its setup when that failed or
    # skipped; a failing teardown turns a test into a failure as well.
    if report.when == "call" or (report.when == "setup" and not report.passed):
        _count(report)
    elif report.when == "teardown" and report.failed:
        _RESULTS.outcomes["failed"] += 1


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """A module-level skip (no GPU) or a collection error counts too."""
    if _in_this_suite(report.nodeid) and not report.passed:
        _count(report)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    path = os.environ.get("PATTN_GPU_RESULTS")
    if not path:
        return
    target = pathlib.Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(_RESULTS.markdown())
