"""The comparison as text: `python -m mtia_lab.calibration [h100|h200] [--all]`."""

from __future__ import annotations

import argparse
import math

from .measurements import available
from .pricing import FAR_OFF, TARGET_RATIO, TARGET_SHARE, Calibration, Row, compare
from .profiles import gpu_profile


def _line(row: Row) -> str:
    predicted = "-" if row.predicted_us is None else f"{row.predicted_us:10.1f}"
    ratio = "-" if row.ratio is None else f"{row.ratio:5.2f}x"
    note = row.reason or row.bound
    return (f"  {row.source:8} {row.clock:6} {row.name[:64]:64} {row.measured_us:10.1f} "
            f"{predicted:>10} {ratio:>7}  {note[:60]}")


def summary(calibration: Calibration) -> list[str]:
    env = calibration.measurements.environment
    lines = [f"{env['gpu']} (driver {env['driver']}, torch {env['torch']}, Triton "
             f"{env['triton']}, measured {env['date']}) priced on '{calibration.profile.name}'"]
    for clock, what in (("device", "kernels, device time"),
                        ("loop", "eager ops in a loop, host and device")):
        rows = calibration.priced(clock)
        lines.append(f"  {what}: {len(rows)} priced, "
                     f"{calibration.share_within(TARGET_RATIO, clock):.0%} within "
                     f"{TARGET_RATIO}x (target {TARGET_SHARE:.0%}), "
                     f"{calibration.share_within(2.0, clock):.0%} within 2x, "
                     f"{len(calibration.far_off(clock))} beyond {FAR_OFF:.0f}x")
    probes = calibration.measurements.probes
    if probes and calibration.profile.row_efficiency:
        lines.append(f"  row kernels (ATen sum, softmax, layer norm) priced from "
                     f"{len(probes.get('aten', []))} separate probes "
                     f"(reduction_probes.py, {probes['environment']['date']}); "
                     f"{_borrowed(calibration)}")
    if calibration.measurements.sequences:
        lines.append(f"  Inductor's kernels priced over {len(calibration.measurements.sequences)} "
                     f"recorded launch sequences (the L2 by reuse distance, launch_sequence.py); "
                     f"{_without_sequences(calibration)}")
    unpriced = [r for r in calibration.rows if r.predicted_us is None]
    lines.append(f"  not priced: {len(unpriced)} extern calls (named, not sized, by the profiler)")
    same = calibration.measurements.same_source
    if same:
        exact = sum(bool(r.get("bitwise")) for r in same)
        worst = max((r.get("max_abs_diff", 0.0) for r in same), default=0.0)
        lines.append(f"  the simulator's Triton kernels on the GPU: {exact} of {len(same)} "
                     f"bit for bit, the rest within {worst:.1e}")
    return lines


def _without_sequences(calibration: Calibration) -> str:
    """The share with every kernel priced from its own working set, as if run back to back."""
    alone = compare(calibration.chip, calibration.profile, sequences=False)
    return f"each kernel alone: {alone.share_within():.0%} within {TARGET_RATIO}x"


def _borrowed(calibration: Calibration) -> str:
    """The share with the row figures of another chip's probes: a check against tuning."""
    others = [chip for chip in available() if chip != calibration.chip]
    if not others:
        return "no other chip's probes to check them against"
    borrowed = compare(calibration.chip, gpu_profile(calibration.chip, row_figures_from=others[0]))
    return f"with {others[0]}'s probe figures, {borrowed.share_within():.0%} within {TARGET_RATIO}x"


def table(calibration: Calibration, everything: bool = False) -> list[str]:
    misses = [r for clock in ("device", "loop") for r in calibration.priced(clock)
              if not r.within()]
    rows = calibration.rows if everything else sorted(misses,
                                                      key=lambda r: -abs(math.log(r.ratio)))
    header = (f"  {'source':8} {'clock':6} {'kernel':64} {'measured':>10} {'predicted':>10} "
              f"{'ratio':>7}  bound or reason")
    return [header, *(_line(r) for r in rows)]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="The simulated clock against a real GPU.")
    parser.add_argument("chips", nargs="*", default=available())
    parser.add_argument("--all", action="store_true", help="every row, not only the misses")
    args = parser.parse_args(argv)
    for chip in args.chips:
        calibration = compare(chip)
        print("\n".join(summary(calibration)))
        print("\n".join(table(calibration, args.all)))
        print()
