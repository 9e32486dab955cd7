"""Each guardrail at its edge: the limit itself fuses, one below refuses with the numbers."""

import pytest
import torch

import mtia_lab  # noqa: F401
from mtia_lab.compiler import ConfigError, config, schedule, trace


def chain6(x):
    """Six muls, each returned: realized buffers, so six scheduler nodes for Inductor too (a
    chain of single-use muls would be inlined into one node while lowering)."""
    outs = []
    for _ in range(6):
        x = x * 2
        outs.append(x)
    return tuple(outs)


def three_inputs(a, b, c):
    s = a + b  # returned: realized, so the scheduler fuses it (a, b, c, s, mul: 5 buffers)
    return s, s * c


def two_users(x):
    y = x * 2  # read by two kernels: realized, and an on-chip intermediate once both join
    return y + 1, y * 3


def refusal_reasons(plan, rule):
    return [d.reason for d in plan.refusals() if d.rule == rule]


def x48():
    return torch.randn(4, 8)


@pytest.mark.parametrize(
    "setting, edge, fn, nargs, reason",
    [
        ("max_fusion_size", 6, chain6, 1, "max_fusion_size: 6 nodes > 5"),
        ("max_fusion_unique_io_buffers", 5, three_inputs, 3,
         "max_fusion_unique_io_buffers: 5 buffers > 4"),
        ("on_chip_memory_budget", 128, two_users, 1,
         "on_chip_memory_budget: 128 bytes of intermediates > 127"),
        # horizontal fusions only, as in Inductor (choices.can_fuse_horizontal)
        ("score_fusion_memory_threshold", 128, lambda x: (x.sin(), x.cos()), 1,
         "score_fusion_memory_threshold: saves 128 bytes < 129"),
    ],
)
def test_guardrail_edge(setting, edge, fn, nargs, reason):
    ir = trace(fn, *[x48() for _ in range(nargs)])
    with config.patch({setting: edge}):
        assert schedule(ir).kernel_count == 1
    below = edge + 1 if setting == "score_fusion_memory_threshold" else edge - 1
    with config.patch({setting: below}):
        plan = schedule(ir)
    assert plan.kernel_count == 2
    assert any(reason in r for r in refusal_reasons(plan, setting))


def test_score_threshold_does_not_apply_to_producer_and_consumer():
    ir = trace(lambda x: (lambda y: (y, y + 1))(x * 2), x48())  # vertical: 128 bytes shared
    with config.patch(score_fusion_memory_threshold=10_000):
        assert schedule(ir).kernel_count == 1


def test_combo_kernel_max_num_args_edge():
    ir = trace(lambda a, b: (a.sin(), b.cos()), x48(), x48())  # 2 inputs + 2 outputs
    with config.patch(combo_kernels=True, combo_kernel_max_num_args=4):
        assert schedule(ir).kernel_count == 1
    with config.patch(combo_kernels=True, combo_kernel_max_num_args=3):
        plan = schedule(ir)
    assert plan.kernel_count == 2
    assert "combo_kernel_max_num_args: 4 args > 3" in refusal_reasons(
        plan, "combo_kernel_max_num_args")


def test_default_on_chip_budget_is_the_pes_local_memory():
    from mtia_lab.backend.runtime.profile import MTIA_V2

    assert config.on_chip_memory_budget is None
    assert config.on_chip_budget_bytes(MTIA_V2) == 384 * 1024 * 64


def test_defaults_are_inductors():
    assert (config.max_fusion_size, config.max_fusion_unique_io_buffers, config.combo_kernels,
            config.combo_kernel_max_num_args) == (64, None, False, 250)


@pytest.mark.parametrize("name, value, expected", [
    ("max_fusion_size", -1, "an int >= 1"),
    ("max_fusion_size", 2.5, "an int >= 1"),
    ("combo_kernels", 1, "True or False"),
    ("max_fusion_unique_io_buffers", 0, "an int >= 1 or None"),
    ("on_chip_memory_budget", "1MB", "an int >= 0 or None"),
])
def test_invalid_values_name_setting_value_and_range(name, value, expected):
    with pytest.raises(ConfigError) as err:
        config.patch({name: value})
    assert name in str(err.value) and repr(value) in str(err.value)
    assert expected in str(err.value)
    with pytest.raises(ConfigError):
        setattr(config, name, value)


def test_unknown_setting_lists_valid_ones():
    with pytest.raises(ConfigError, match="no setting 'max_fusion'.*max_fusion_size"):
        config.patch(max_fusion=3)
    with pytest.raises(ConfigError, match="no setting"):
        config.max_fusoin_size = 3


def test_patch_restores_as_context_and_decorator():
    @config.patch(max_fusion_size=2)
    def inside():
        return config.max_fusion_size

    with config.patch(max_fusion_size=7):
        assert config.max_fusion_size == 7
        assert inside() == 2
        assert config.max_fusion_size == 7
    assert config.max_fusion_size == 64


def test_plan_records_the_settings_it_ran_under():
    with config.patch(max_fusion_size=3):
        plan = schedule(trace(chain6, x48()))
    assert plan.settings["max_fusion_size"] == 3
    assert plan.kernel_count == 2


def test_flipped_decisions_and_plain_data_for_the_playground():
    import json

    from mtia_lab.records.plan import flipped

    ir = trace(chain6, x48())
    loose = schedule(ir)
    with config.patch(max_fusion_size=5):
        tight = schedule(ir)
    changes = flipped(loose, tight)
    assert len(changes) == 1
    was, now = changes[0]
    assert was.fused and not now.fused and now.rule == "max_fusion_size"
    data = tight.to_dict()
    assert data["after"]["kernels"] == tight.kernel_count == 2
    assert json.loads(json.dumps(data, default=str))["decisions"][0]["rule"]


def test_combo_kernels_count_each_members_arguments():
    """Inductor's ComboKernel passes each sub-kernel its own reads and writes: a buffer two
    members read counts twice."""
    ir = trace(lambda a, b: (a.sin(), a[0].cos() * b), x48(), torch.randn(8))
    with config.patch(combo_kernels=True, combo_kernel_max_num_args=4):
        plan = schedule(ir)
    assert plan.kernel_count == 2
    assert any("5 args > 4" in r for r in refusal_reasons(plan, "combo_kernel_max_num_args"))
    with config.patch(combo_kernels=True, combo_kernel_max_num_args=5):
        assert schedule(ir).kernel_count == 1


def test_combo_kernel_max_num_nodes():
    ir = trace(lambda a, b, c: (a.sin(), b.cos(), c.exp()), x48(), x48(), x48())
    with config.patch(combo_kernels=True):
        assert schedule(ir).kernel_count == 1
    with config.patch(combo_kernels=True, combo_kernel_max_num_nodes=2):
        plan = schedule(ir)
    assert plan.kernel_count == 2
    assert refusal_reasons(plan, "combo_kernel_max_num_nodes") == [
        "combo_kernel_max_num_nodes: 3 kernels > 2"]
