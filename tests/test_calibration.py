"""The simulated clock against a real GPU (mtia_lab/calibration/): the stored measurements
re-priced by the cost model, the GPU profiles built from them, and the host clock that makes a
run of small eager ops host-bound."""

import json

import pytest
import torch

import mtia_lab
from mtia_lab.backend.runtime.profile import MTIA_V2
from mtia_lab.calibration import compare, gpu_profile, load
from mtia_lab.calibration.pricing import TARGET_RATIO, TARGET_SHARE


@pytest.mark.parametrize("chip", ["h100", "h200"])
def test_stored_measurements_say_where_they_were_taken(chip):
    measured = load(chip)
    assert chip.upper() in measured.gpu
    for key in ("driver", "torch", "triton", "cuda", "date"):
        assert measured.environment[key]
    assert len(measured.eager) >= 80 and len(measured.inductor) >= 60


def test_gpu_profiles_carry_the_measured_peaks():
    h100, h200 = gpu_profile("h100"), gpu_profile("h200")
    assert h100.dram_bandwidth == load("h100").peaks["copy_bandwidth"]
    assert h200.dram_bandwidth > 1.2 * h100.dram_bandwidth  # HBM3e against HBM3
    assert 0 < h100.host_op_us < 50 and 0 < h100.kernel_launch_us < h100.host_op_us
    with pytest.raises(ValueError, match="choose from h100, h200"):
        gpu_profile("a100")


def test_a_large_copy_like_op_is_priced_from_the_measured_bandwidth():
    calibration = compare("h100")
    (row,) = [r for r in calibration.priced() if r.name == "add float32 67108864"]
    assert row.bound == "memory" and row.within(1.2)


def test_small_eager_ops_in_a_loop_are_host_bound():
    calibration = compare("h100")
    small = [r for r in calibration.priced("loop") if r.name.startswith("add float32 1024")]
    assert small and all(r.bound == "host" and r.within(TARGET_RATIO) for r in small)


def test_every_kernel_far_off_has_a_named_reason():
    """Off by more than 3x: each matches a known way to leave the roofline (KNOWN_MISSES)."""
    for chip in ("h100", "h200"):
        calibration = compare(chip)
        assert len(calibration.far_off()) <= 3
        assert calibration.unexplained() == []


@pytest.mark.xfail(strict=True, reason="issue 21 open: 85% (H100) and 76% (H200) of kernels within "
                   "1.5x, 97% and 91% within 2x; reductions reach a fraction of the bandwidth")
@pytest.mark.parametrize("chip", ["h100", "h200"])
def test_ninety_percent_of_kernels_within_one_and_a_half(chip):
    assert compare(chip).share_within() >= TARGET_SHARE


def test_a_bad_measurements_file_names_the_fix(tmp_path):
    path = tmp_path / "run.json"
    path.write_text("{not json")
    with pytest.raises(ValueError, match="gpu_side.py --out"):
        load(path)
    path.write_text(json.dumps({"environment": {}}))
    with pytest.raises(ValueError, match="lacks peaks"):
        load(path)
    with pytest.raises(FileNotFoundError, match="stored ones: h100, h200"):
        load("tpu")


def test_the_host_clock_makes_small_ops_wait_for_the_host():
    x = torch.ones(4, device="mtia_sim")

    def hundred_adds_us(profile) -> float:
        mtia_lab.configure(profile=profile)
        try:
            torch.mtia_sim.synchronize()
            state = mtia_lab.backend.runtime.device_state.RUNTIME.device(0)
            start = state.now_us
            for _ in range(100):
                x.add_(1)
            torch.mtia_sim.synchronize()
            return state.now_us - start
        finally:
            mtia_lab.configure(profile=MTIA_V2)

    device_only = hundred_adds_us(MTIA_V2)  # no host cost: launch + roofline per op
    assert device_only == pytest.approx(100 * MTIA_V2.kernel_launch_us, rel=0.05)
    host = hundred_adds_us(MTIA_V2.with_changes(host_op_us=25.0))
    assert host == pytest.approx(100 * 25.0, rel=0.05)  # the host, not the device, sets the pace


def test_the_picture_draws_every_priced_kernel_and_the_text_says_the_share():
    from mtia_lab.viz.calibration import calibration_view

    view = calibration_view("h100")
    svg = view.to_svg()
    assert svg.count("<circle") == len(view.calibration.priced()) + 2  # + the legend's two
    share = f"{view.calibration.share_within():.0%} within 1.5x"
    assert share in svg and share in view.to_text()
    with pytest.raises(ValueError, match="clock must be 'device' or 'loop'"):
        calibration_view("h100", clock="wall")
