"""The cost model prices what the chip does: SRAM for a fused kernel's intermediates, the INT8
peak for int8 GEMMs, and the figures of docs/chip-profile.md, row by row."""

import re
from pathlib import Path

import torch

import mtia_lab  # noqa: F401
from mtia_lab.backend.runtime import cost
from mtia_lab.backend.runtime.profile import GB, MTIA_V1, MTIA_V2, TB, GiB, MiB
from mtia_lab.compiler import schedule, trace

DOCS = Path(__file__).resolve().parents[1] / "docs" / "chip-profile.md"


def test_fused_intermediates_move_at_sram_bandwidth():
    def two_users(x):
        y = x.sin()  # read twice inside the kernel: an on-chip intermediate
        return y + 1, y * 3

    x = torch.randn(256, 256)
    plan = schedule(trace(two_users, x), "two_users", MTIA_V2)
    assert plan.kernel_count == 1
    group = plan.groups[0]
    nbytes = x.nbytes
    assert group.cost.bytes_read == nbytes and group.cost.bytes_written == 2 * nbytes
    assert group.cost.sram_bytes == nbytes + 2 * nbytes  # written once, read by two nodes
    dram_s = 3 * nbytes / MTIA_V2.dram_bandwidth
    sram_s = 3 * nbytes / MTIA_V2.sram_bandwidth
    assert abs(group.duration_us - (MTIA_V2.kernel_launch_us + (dram_s + sram_s) * 1e6)) < 1e-6
    # Had the intermediate gone through DRAM, its traffic would have cost 13x more.
    assert 13 < (3 * nbytes / MTIA_V2.dram_bandwidth) / sram_s < 13.5
    through_dram = MTIA_V2.kernel_launch_us + 6 * nbytes / MTIA_V2.dram_bandwidth * 1e6
    assert group.duration_us < through_dram
    assert "on chip" in plan.summary()


def test_intermediates_beyond_the_sram_spill_to_dram():
    tiny = MTIA_V2.with_changes(sram_bytes=1024)
    x = torch.randn(64, 64)
    plan = schedule(trace(lambda x: (lambda y: (y + 1, y * 3))(x.sin()), x), "spill", tiny)
    group = plan.groups[0]
    assert group.cost.sram_bytes == 0 and group.cost.spill_bytes == 3 * x.nbytes


def test_int8_gemm_runs_at_the_int8_peak_and_fp32_at_the_assumed_rate():
    a8, b8 = torch.ones(64, 64, dtype=torch.int8), torch.ones(64, 64, dtype=torch.int8)
    flops = 2 * 64 * 64 * 64
    terms = cost.estimate(torch.ops.aten.mm.default, (a8, b8), torch.mm(a8, b8))
    assert terms.int8 and not terms.low_precision
    big = MTIA_V2.with_changes(dram_bandwidth=1e30, kernel_launch_us=0.0)  # compute-bound
    assert abs(terms.duration_us(big) - flops / MTIA_V2.gemm_ops_int8 * 1e6) < 1e-9
    a, b = a8.float(), b8.float()
    fp32 = cost.estimate(torch.ops.aten.mm.default, (a, b), torch.mm(a, b))
    assert abs(fp32.duration_us(big) - flops / (MTIA_V2.gemm_flops_bf16 / 2) * 1e6) < 1e-9


UNITS = {"TOPS": TB, "TFLOPS": TB, "MB": MiB, "GB": GiB, "KB": 1024, "GB/s": GB}


def _docs_rows() -> dict[str, tuple[str, str]]:
    rows = {}
    for line in DOCS.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0] and not cells[0].startswith(("field", "---")):
            rows[cells[0]] = (cells[1], cells[3])
    return rows


def _scale(field: str) -> float:
    unit = re.search(r"\(([^,)]+)", field)
    return UNITS.get(unit.group(1), 1.0) if unit else 1.0


def test_docs_table_and_profiles_agree():
    rows = _docs_rows()
    assert len(rows) >= 16
    for field, (v2, v1) in rows.items():
        name = field.split(" (")[0]
        for profile, text in ((MTIA_V2, v2), (MTIA_V1, v1)):
            value = getattr(profile, name)
            if isinstance(value, tuple):
                assert text == " x ".join(map(str, value)), field
                continue
            expected = float(text) * _scale(field)
            assert abs(value - expected) <= 1e-9 * max(abs(expected), 1), (field, profile.name)
