"""Every name of the compat modules pinned against the private API it wraps (torch 2.13.0,
triton 3.9.0): on an upgrade, a failure names the compat name and the private API that moved.

The names come from the compat modules themselves (their top-level definitions), so a new compat
function without a pin here fails `test_every_compat_name_is_pinned`, and a pin of a removed one
fails too. A pin resolves each private path it lists (importing its module), checks the
parameters mtia_lab passes by name, checks that an alias is still the same object, and runs a
small behaviour check where one is cheap.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

import mtia_lab  # noqa: F401  (the device: some behaviour checks use it)
from mtia_lab import _compat as core
from mtia_lab.inductor import _compat as inductor
from mtia_lab.instruments import _compat as instruments

ROOT = Path(__file__).resolve().parents[1]
MODULES = {"core": core, "inductor": inductor, "instruments": instruments}


def compat_names(module) -> set[str]:
    """Public top-level definitions of a compat module (functions, classes, constants)."""
    tree = ast.parse(Path(module.__file__).read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if not n.startswith("_")}


def resolve(path: str) -> object:
    """The object at a dotted path, as Python code reaching it sees it: an attribute where the
    parent has one (`triton.runtime.driver` is an object, not the module of that name), else
    the submodule, imported."""
    parts = path.split(".")
    obj = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], 2):
        has = hasattr(obj, part)
        obj = getattr(obj, part) if has else importlib.import_module(".".join(parts[:i]))
    return obj


@dataclass(frozen=True)
class Pin:
    private: tuple[str, ...] = ()  # dotted paths of what the compat name reaches into
    params: dict[str, tuple[str, ...]] | None = None  # path -> parameter names passed by name
    alias: bool = False  # the compat name IS private[0] (bound directly)
    check: Callable[[object], object] | None = None  # behaviour: gets the compat object


def P(*private: str, params: dict | None = None, alias: bool = False, check=None) -> Pin:
    return Pin(tuple(private), params, alias, check)


def _pin_reduction_hint(fn):
    """The hint reads back by name from a kernel's inductor_meta ("" for a pointwise one)."""
    from torch._inductor.runtime.hints import ReductionHint

    kernel = type("A", (), {"inductor_meta": {"reduction_hint": ReductionHint.OUTER}})()
    assert fn(kernel) == "OUTER" and fn(type("B", (), {"inductor_meta": {}})()) == ""


def _keys_of_cpu_tensor(c):
    names = c.dispatch_key_names(c.dispatch_key_bits(torch.ones(1)))
    assert names[-1] == "CPU" and names[0] != "CPU", names  # highest priority first


def _no_node_outside_backward(fn):
    assert fn() is None


def _rebuilds_what_torch_saves(fn):
    assert torch.ones(2).__reduce_ex__(2)[0] is fn


def _whole_grid_attributes(fn):
    """Every `tri.<name>` the whole-grid launcher and libdevice read exists on Triton's
    interpreter."""
    used = set()
    for path in [*(ROOT / "mtia_lab/inductor/whole_grid").glob("*.py"),
                 ROOT / "mtia_lab/inductor/libdevice.py"]:
        used |= set(re.findall(r"\btri\.(\w+)", path.read_text()))
    module = fn()
    missing = sorted(n for n in used if not hasattr(module, n))
    assert used and not missing, f"triton.runtime.interpreter lacks {missing}"


CORE: dict[str, Pin] = {
    "SUPPORTED_TORCH": P(check=lambda v: torch.__version__.startswith(v)),
    "DEVICE_NAME": P("torch._C._get_privateuse1_backend_name",
                     check=lambda v: torch._C._get_privateuse1_backend_name() == v),
    "check_torch_version": P(check=lambda fn: fn() is None),
    "privateuse1_name": P("torch._C._get_privateuse1_backend_name"),
    "setup_python_backend": P(
        "torch.utils.backend_registration._setup_privateuseone_for_python_backend",
        params={"torch.utils.backend_registration._setup_privateuseone_for_python_backend":
                ("rename", "backend_module")}),
    "OpOverload": P("torch._ops.OpOverload", alias=True,
                    check=lambda t: isinstance(torch.ops.aten.add.Tensor, t)),
    "OpOverloadPacket": P("torch._ops.OpOverloadPacket", alias=True,
                          check=lambda t: isinstance(torch.ops.aten.add, t)),
    "make_wrapper_subclass": P("torch.Tensor._make_wrapper_subclass", alias=True),
    "disabled_torch_function": P("torch._C._disabled_torch_function_impl", alias=True),
    "TensorBase": P("torch._C.TensorBase", alias=True),
    "tensor_data_descriptor": P("torch._C.TensorBase.data", alias=True),
    "tensor_backward_hooks_descriptor": P("torch._C.TensorBase._backward_hooks", alias=True),
    "tensor_base_untyped_storage": P("torch._C.TensorBase.untyped_storage", alias=True),
    "tensor_str": P("torch._tensor_str._str", alias=True,
                    check=lambda fn: fn(torch.tensor([1.5])).startswith("tensor([1.5")),
    "TENSOR_METHOD_MODULE": P(check=lambda m: torch.Tensor.backward.__module__ == m),
    "NN_FUNCTIONAL_MODULES": P("torch._C._nn", check=lambda ms: {
        torch.nn.functional.linear.__module__, torch.nn.functional.relu.__module__} <= set(ms)),
    "NativeStream": P("torch._C.Stream", alias=True),
    "NativeEvent": P("torch._C.Event", alias=True),
    "PRIVATEUSE1_DEVICE_TYPE": P("torch._C._autograd.DeviceType.PrivateUse1", check=lambda v:
                                 v == int(resolve("torch._C._autograd.DeviceType.PrivateUse1"))),
    "pytree": P("torch.utils._pytree", alias=True,
                check=lambda m: m.tree_flatten([1, (2,)])[0] == [1, 2]),
    "ExcludeDispatchKeys": P("torch._C._ExcludeDispatchKeyGuard", alias=True),
    "below_autograd": P("torch._C._AutoDispatchBelowAutograd", alias=True),
    "rebuild_tensor": P("torch._utils._rebuild_tensor_v2", alias=True,
                        check=_rebuilds_what_torch_saves),
    "rebuild_parameter": P("torch._utils._rebuild_parameter", alias=True,
                           check=lambda fn: torch.nn.Parameter(torch.ones(1)).__reduce_ex__(2)[0]
                           is fn),
    "rebuild_sparse_tensor": P("torch._utils._rebuild_sparse_tensor", alias=True,
                               check=lambda fn: torch.eye(2).to_sparse().__reduce_ex__(2)[0]
                               is fn),
    "empty_affine_quantized": P("torch._empty_affine_quantized", alias=True,
                                check=lambda fn: fn([1], scale=0.5, zero_point=1,
                                                    dtype=torch.qint8).q_scale() == 0.5),
    "empty_per_channel_affine_quantized": P(
        "torch._empty_per_channel_affine_quantized", alias=True,
        check=lambda fn: fn([2], scales=torch.ones(2, dtype=torch.float64),
                            zero_points=torch.zeros(2, dtype=torch.long), axis=0,
                            dtype=torch.qint8).q_per_channel_axis() == 0),
    "rebuild_qtensor": P("torch._utils._rebuild_qtensor", alias=True,
                         check=lambda fn: torch.quantize_per_tensor(
                             torch.ones(2), 0.1, 0, torch.qint8).__reduce_ex__(2)[0] is fn),
    "tensor_metadata": P("torch._utils.get_tensor_metadata", alias=True),
    "op_schema": P("torch._ops.OpOverload", check=lambda fn: [  # reads op._schema
        a.name for a in fn(torch.ops.aten.add.Tensor).arguments][:2] == ["self", "other"]),
    "overload_name": P("torch._ops.OpOverload",  # reads op._overloadname
                       check=lambda fn: fn(torch.ops.aten.add.Tensor) == "Tensor"),
    "dispatch_key_set": P("torch._C.DispatchKeySet", "torch._C.DispatchKey.Python",
                          "torch._C.DispatchKey.AutocastPrivateUse1",
                          check=lambda fn: "Python" in str(fn("Python"))),
    "current_accelerator": P("torch._C._accelerator_getAccelerator"),
    "composite_implicit": P("torch._ops.OpOverload.decompose", check=lambda fn: fn(
        torch.ops.aten.linear.default, torch.ones(1, 2), torch.ones(3, 2)).shape == (1, 3)),
    "has_composite_implicit": P("torch._ops.OpOverload.has_kernel_for_dispatch_key",
                                "torch._C.DispatchKey.CompositeImplicitAutograd",
                                check=lambda fn: fn(torch.ops.aten.linear.default)
                                and not fn(torch.ops.aten.addmm.default)),
    "sdp_backends_enabled": P("torch._C._get_overrideable_sdp_enabled",
                              "torch._C._get_math_sdp_enabled",
                              check=lambda fn: fn() == (True, True)),
    "all_op_schemas": P("torch._C._jit_get_all_schemas",
                        check=lambda fn: any(s.name == "aten::_foreach_add" for s in fn())),
    "all_op_names": P("torch._C._dispatch_get_all_op_names",
                      check=lambda fn: "aten::add.Tensor" in fn()),
    "set_storage_method": P("torch.storage._StorageBase"),
    "load_functional_collectives": P("torch.distributed._functional_collectives"),
    "gloo_process_group": P("torch._C._distributed_c10d.ProcessGroupGloo"),
    "DYNAMO_MODULE": P("torch._dynamo", check=lambda name: importlib.import_module(name)),
    "dynamo_loaded": P("torch._dynamo"),
    "dynamo_backend": P("torch._dynamo.lookup_backend",
                        check=lambda fn: callable(fn("inductor"))),
    "plain_graph_modules": P("torch.fx._lazy_graph_module._force_skip_lazy_graph_module"),
    "opinfo_db": P("torch.testing._internal.common_methods_invocations.op_db",
                   check=lambda fn: any(op.name == "add" for op in fn())),
    "tolerance_override_type": P("torch.testing._internal.common_device_type.toleranceOverride"),
    "noncontiguous_like": P("torch.testing._internal.common_utils.noncontiguous_like",
                            check=lambda fn: not fn(torch.ones(4)).is_contiguous()),
    "copy_math_bits": P("torch._C._set_conj", "torch._C._set_neg"),
    "map_functorch_wrapped": P("torch._C._functorch.get_unwrapped",
                               "torch._C._functorch._wrap_for_grad",
                               "torch._C._functorch._add_batch_dim"),
    "math_bit_keys_enabled": P("torch._C._dispatch_tls_local_include_set",
                               "torch._C._dispatch_tls_local_exclude_set",
                               "torch._C.DispatchKey.Conjugate", "torch._C.DispatchKey.Negative",
                               "torch._C._ForceDispatchKeyGuard"),
    "register_fallback": P("torch.library.Library.fallback",
                           params={"torch.library.Library.fallback":
                                   ("fn", "dispatch_key", "with_keyset")}),
    "register_fallthrough": P("torch.library.fallthrough_kernel"),
    "dispatch_keys_of": P("torch._C._dispatch_keys",
                          check=lambda fn: fn(torch.ones(1))[-1] == "CPU"),
    "has_kernel_for": P("torch._C._dispatch_has_kernel_for_dispatch_key",
                        check=lambda fn: fn(torch.ops.aten.add.Tensor, "CPU")),
    "dispatch_key_bits": P("torch._C._dispatch_keys", check=lambda _: _keys_of_cpu_tensor(core)),
    "dispatch_key_names": P("torch._C.DispatchKeySet.from_raw_repr"),
    "current_autograd_node": P("torch._C._current_autograd_node", alias=True,
                               check=_no_node_outside_backward),
    "autograd_sequence_nr": P(check=lambda fn: isinstance(
        fn(torch.ones(1, requires_grad=True).exp().grad_fn), int)),
    "compile_session": P("torch.compiler._is_compiling_flag"),
    "register_dynamo_backend": P("torch._dynamo.list_backends", "torch._dynamo.register_backend",
                                 params={"torch._dynamo.register_backend":
                                         ("compiler_fn", "name"),
                                         "torch._dynamo.list_backends": ("exclude_tags",)}),
    "dynamo_skip_package": P("torch._dynamo.trace_rules.add"),
    "size_hint": P("torch.fx.experimental.symbolic_shapes.optimization_hint",
                   check=lambda fn: fn(5) == 5),
    "size_symbol": P("torch.SymInt", check=lambda fn: fn(3) is None),
    "symbolic_size_at": P(check=lambda fn: fn(4, {}) == 4),
    "aot_autograd_backend": P("torch._dynamo.backends.common.aot_autograd"),
    "dynamo_input_sources": P(check=lambda fn: fn(torch.fx.symbolic_trace(
        torch.nn.Linear(2, 2))) == ["weight", "bias", ""]),
    "core_aten_decompositions": P("torch._decomp.core_aten_decompositions",
                                  "torch._decomp.get_decompositions"),
    "boxed": P("functorch.compile.make_boxed_func"),
    "storage_alias": P("torch._C._construct_storage_from_data_pointer"),
    "is_fake": P("torch._subclasses.fake_tensor.is_fake",
                 check=lambda fn: not fn(torch.ones(1))),
    "autograd_engine_class": P("torch._C._ImperativeEngine"),
    "set_autograd_engine": P("torch.autograd.variable.Variable._execution_engine"),
    "wrap_node_hook_registration": P("torch.autograd.Function._register_hook"),
    "autograd_node_devices": P(check=lambda fn: fn(
        (torch.ones(1, requires_grad=True) * 2).grad_fn) == [torch.device("cpu")]),
    "wrap_storage_new": P("torch.UntypedStorage.__new__"),
    "torch_function_mode_on_top": P("torch.overrides._get_current_function_mode"),
    "make_fx_watching": P("torch._C._len_torch_dispatch_stack",
                          "torch.fx.experimental.proxy_tensor.ProxyTorchDispatchMode",
                          "torch.utils._python_dispatch._get_current_dispatch_mode_stack",
                          check=lambda fn: fn() is False),
    "remove_global_module_hooks_of": P("torch.nn.modules.module._global_forward_pre_hooks",
                                       "torch.nn.modules.module._global_forward_hooks",
                                       "torch.nn.modules.module._global_forward_hooks_always_called"),
    "wrap_saved_tensor_unpack_hooks": P(
        "torch._C._autograd._push_saved_tensors_default_hooks",
        "torch.autograd.graph.saved_tensors_hooks.__enter__"),
    "enable_foreach_for": P("torch.optim.optimizer._foreach_supported_types",
                            "torch.utils._foreach_utils._foreach_supported_types"),
    "keep_device_tensors_out_of_fake_constants": P(
        "torch._subclasses.fake_tensor.FakeTensorMode.may_turn_const"),
    "non_overlapping_and_dense": P("torch._prims_common.is_non_overlapping_and_dense_or_false",
                                   check=lambda fn: fn(torch.empty(2, 3).t()) and
                                   not fn(torch.empty(2, 4)[:, ::2])),
    "reorder_for_locality": P("torch._inductor.fx_passes.post_grad.reorder_for_locality"),
    "run_fake_fallbacks_on_host": P("torch._subclasses.fake_tensor.run_fallback_kernel",
                                    "torch._subclasses.fake_tensor.FakeTensor.fake_device"),
    "generate_storage_methods": P(
        "torch.utils.backend_registration._generate_storage_methods_for_privateuse1_backend",
        "torch.storage._StorageBase"),
    "allow_device_mesh_for": P("torch.distributed.device_mesh.init_device_mesh",
                               params={"torch.distributed.device_mesh.init_device_mesh":
                                       ("device_type", "mesh_shape")}),
    "fake_tensor_mode": P("torch._subclasses.fake_tensor.FakeTensorMode"),
    "no_fake_mode": P("torch._subclasses.fake_tensor.unset_fake_temporarily"),
    # one tensor kept alive: a view shares its storage, a clone does not (two temporaries
    # could share an address by reuse and prove nothing)
    "storage_identity": P(check=lambda fn: (lambda t: fn(t) == fn(t[1:]) != fn(t.clone()))(
        torch.ones(2))),
    "route_device_generic_class": P("torch.Stream", "torch.Event"),
}

INDUCTOR: dict[str, Pin] = {
    "SUPPORTED_TRITON": P("triton.__version__", check=lambda v: resolve("triton.__version__") == v),
    "DEVICE": P(check=lambda v: v == core.DEVICE_NAME),
    "triton_interpreter": P("triton.runtime.interpreter", check=_whole_grid_attributes),
    "triton_type_name": P("triton.runtime.jit._normalize_ty",
                          check=lambda fn: fn(resolve("triton.language.constexpr")) == "constexpr"),
    "triton_arg_type": P("triton.runtime.jit.mangle_type",
                         check=lambda fn: fn(torch.empty(0)) == "*fp32"),
    "triton_version": P(check=lambda fn: fn() == resolve("triton.__version__")),
    "cpu_only_build": P("torch.version.cuda", "torch.version.hip"),
    "interpreter_env": P(check=lambda fn: (fn(), os.environ["TRITON_INTERPRET"] == "1")[1]),
    "triton_made_before_switch": P("triton.runtime.interpreter.InterpretedFunction"),
    "interpret_triton_library": P("triton.runtime.jit.JITFunction", "triton.language.standard"),
    "interpreted_helpers": P("torch._inductor.runtime.triton_helpers.maximum",
                             check=lambda fn: isinstance(fn().maximum, resolve(
                                 "triton.runtime.interpreter.InterpretedFunction"))),
    "activate_host_driver": P("triton.runtime.driver.set_active"),
    "pinned_host_buffers": P("torch._C._dynamo.guards._empty_strided_cpu_pinned",
                             check=lambda fn: (fn(), resolve(
                                 "torch._C._dynamo.guards._empty_strided_cpu_pinned")(
                                     (2, 3), (1, 2), torch.float32).stride() == (1, 2))[1]),
    "round_bfloat16_to_nearest_even": P(
        "triton.runtime.interpreter.InterpreterBuilder.create_fp_trunc",
        "triton.runtime.interpreter.InterpreterBuilder.create_fp_to_fp",
        "triton.runtime.interpreter.TensorHandle", "triton._C.libtriton.ir.ROUNDING_MODE.RTNE",
        check=lambda fn: (fn(), resolve("triton.runtime.interpreter.InterpreterBuilder")
                          .create_fp_trunc._mtia_lab)[1]),
    "host_driver_active": P("triton.runtime.driver.set_active",
                            check=lambda fn: (inductor.activate_host_driver(), fn())[1]),
    "add_gpu_type": P("torch._inductor.utils.GPU_TYPES"),
    "register_device_interface": P(
        "torch._dynamo.device_interface.register_interface_for_device",
        params={"torch._dynamo.device_interface.register_interface_for_device":
                ("device", "device_interface")}),
    "device_interface_base": P("torch._dynamo.device_interface.DeviceInterface"),
    "device_op_overrides_base": P("torch._inductor.codegen.common.DeviceOpOverrides"),
    "register_device_codegen": P(
        "torch._inductor.codegen.common.register_backend_for_device",
        "torch._inductor.codegen.common.register_device_op_overrides",
        "torch._inductor.codegen.triton.TritonScheduling"),
    "python_wrapper_codegen": P("torch._inductor.codegen.wrapper.PythonWrapperCodegen"),
    "mtia_config_heuristics": P(
        "torch._inductor.choices.InductorChoices.get_config_heuristics",
        "torch._inductor.template_heuristics.triton.MTIAConfigHeuristic",
        params={"torch._inductor.choices.InductorChoices.get_config_heuristics":
                ("device_type",)}),
    "trust_triton_for": P("torch._inductor.scheduler.has_triton",
                          "torch._inductor.runtime.triton_helpers.set_driver_to_gpu"),
    "COMPILE_FX_MODULE": P("torch._inductor.compile_fx", check=importlib.import_module),
    "DEVICE_INTERFACE_MODULE": P("torch._dynamo.device_interface", check=importlib.import_module),
    "inductor_triton_compat": P("torch._inductor.runtime.triton_compat.libdevice"),
    "compile_fx_module": P("torch._inductor.compile_fx.compile_fx",
                           "torch._inductor.compile_fx.compile_fx_inner"),
    "detect_fake_mode": P("torch._guards.detect_fake_mode"),
    "flatten_graph_inputs": P("torch._dynamo.utils.flatten_graph_inputs",
                              "torch._dynamo.compiled_autograd.in_compiled_autograd_region",
                              params={"torch._dynamo.utils.flatten_graph_inputs":
                                      ("gm", "inputs", "compile_gm")}),
    "constants_made_on_host": P("torch._subclasses.fake_tensor.FakeTensorMode.avoid_device_init",
                                check=lambda _: isinstance(resolve(
                                    "torch._subclasses.fake_tensor.FakeTensorMode"
                                ).__dict__["avoid_device_init"], property)),
    "without_inner_key": P("torch.fx.experimental.symbolic_shapes.InnerTensorKey"),
    "inductor_decompositions": P("torch._inductor.decomposition.select_decomp_table"),
    "temporary_fallback": P("torch._inductor.lowering.make_fallback",
                            "torch._inductor.lowering.get_overloads",
                            "torch._inductor.lowering.lowerings",
                            "torch._inductor.lowering.fallbacks",
                            "torch._inductor.lowering.needs_realized_inputs",
                            "torch._inductor.lowering._maybe_layout_constraints",
                            params={"torch._inductor.lowering.make_fallback":
                                    ("op", "warn", "override_decomp")}),
    "lowering_tables": P("torch._inductor.lowering.user_lowerings",
                         "torch._inductor.lowering.decompositions"),
    "inductor_config": P("torch._inductor.config.triton.cudagraphs"),
    "cudagraphs_requested": P("torch._inductor.config.triton.cudagraphs"),
    "autotuning_requested": P("torch._inductor.config.max_autotune",
                              "torch._inductor.config.max_autotune_gemm",
                              "torch._inductor.config.max_autotune_pointwise",
                              "torch._inductor.config.coordinate_descent_tuning"),
    "rerecord_limit": P("torch._inductor.config.triton.cudagraph_unexpected_rerecord_limit"),
    "GraphCaptureFacts": P(check=lambda cls: isinstance(
        inductor.graph_capture_facts(object()), cls)),
    "graph_capture_facts": P("torch._inductor.cudagraph_utils.format_default_skip_message",
                             "torch._inductor.output_code.CompiledFxGraph",
                             check=lambda _: _compiled_fx_graph_fields()),
    "static_input": P("torch._inductor.compile_fx.static_input"),
    "copy_into_static": P("torch._inductor.compile_fx.index_expanded_dims_and_copy_",
                          "torch._inductor.output_code.get_expanded_dims"),
    "no_gemm_templates_for": P("torch._inductor.utils.is_big_gpu"),
    "size_stride_check": P("torch._C._dynamo.guards.assert_size_stride"),
    "caching_autotuner": P("torch._inductor.runtime.triton_heuristics.CachingAutotuner"),
    "written_arg_names": P("torch._inductor.runtime.triton_heuristics.CachingAutotuner"),
    "whole_grid_refusal": P("triton.runtime.interpreter.InterpretedFunction"),
    "interpreter_launch": P(
        "torch._inductor.runtime.triton_heuristics.CachingAutotuner._interpret_args_grid"),
    "kernel_source": P(check=lambda fn: "def " in fn(type("A", (), {"fn": _pin_src})())),
    "reduction_hint": P("torch._inductor.runtime.hints.ReductionHint",
                        check=lambda fn: _pin_reduction_hint(fn)),
    "kernel_name_of": P(check=lambda fn: fn(
        type("A", (), {"inductor_meta": {"kernel_name": "k0"}, "fn": _pin_src})()) == "k0"),
    "add_kernel_estimates": P(
        "torch._inductor.codegen.triton.TritonKernel.inductor_meta_per_kernel",
        "torch._inductor.codegen.triton.TritonKernel.estimate_kernel_num_bytes",
        "torch._inductor.codegen.triton.TritonKernel.estimate_flops",
        "torch._inductor.virtualized.V"),
    "scheduler_module": P("torch._inductor.scheduler"),
    "current_graph": P("torch._inductor.virtualized.V.graph"),
    "size_symbols": P("torch.fx.experimental.symbolic_shapes.ShapeEnv",
                      check=lambda _: _shape_env_fields()),
    "combo_kernel_class": P("torch._inductor.codegen.triton_combo_kernel.ComboKernel"),
    "triton_scheduling": P("torch._inductor.codegen.triton.TritonScheduling"),
    "cpp_scheduling": P("torch._inductor.codegen.cpp.CppScheduling"),
    "run_and_get_code": P("torch._inductor.utils.run_and_get_code"),
    "fresh_inductor_cache": P("torch._inductor.utils.fresh_cache"),
    "accept_device_tangents": P(
        "torch._functorch._aot_autograd.runtime_wrappers.AOTDispatchAutograd",
        "torch._functorch._aot_autograd.runtime_wrappers.coerce_to_expected_memory_format",
        "torch._functorch._aot_autograd.schemas.SubclassCreationMeta",
        check=lambda _: isinstance(resolve(
            "torch._functorch._aot_autograd.runtime_wrappers.AOTDispatchAutograd"
        ).__dict__["process_runtime_tangent"], staticmethod)),
    "faster_nested_calls": P("triton.runtime.interpreter.InterpretedFunction.rewrite",
                             "triton.runtime.interpreter.InterpreterError",
                             "triton.language.core.is_builtin"),
}

INSTRUMENTS: dict[str, Pin] = {
    "structured_trace": P("torch._logging._internal.trace_log"),
    "compile_id_text": P(check=lambda fn: fn({"frame_id": 0, "frame_compile_id": 1}) == "0/1"),
    "code_of": P(check=lambda fn: fn(torch.nn.Linear(1, 1)) is torch.nn.Linear.forward.__code__),
    "cache_entries": P("torch._dynamo.eval_frame._debug_get_cache_entry_list"),
    "guard_tree": P("torch._C._dynamo.guards.GuardManager.get_leaf_guards",
                    "torch._C._dynamo.guards.GuardManager.get_child_managers",
                    "torch._C._dynamo.guards.RootGuardManager.get_epilogue_lambda_guards"),
    "guard_results": P("torch._C._dynamo.eval_frame.set_guard_complete_hook"),
    "recompile_limit": P("torch._dynamo.config.recompile_limit"),
    "limit_hits": P("torch._dynamo.utils.counters"),
    "mark_dynamic": P("torch._dynamo.mark_dynamic"),
    "constraint_violation_error": P(
        "torch.fx.experimental.symbolic_shapes.ConstraintViolationError"),
    "inductor_without_cache": P("torch._inductor.config.fx_graph_cache",
                                "torch._inductor.config.autotune_local_cache"),
    "compiled_autograd": P(
        "torch._dynamo.compiled_autograd.AutogradCompilerInstance.begin_capture",
        "torch._dynamo.compiled_autograd.AutogradCompilerInstance.end_capture",
        "torch._dynamo.compiled_autograd._enable", "torch.compiler._is_compiling_flag"),
    "compiled_autograd_captures": P("torch._dynamo.utils.counters"),
    "reset_compiled_autograd": P("torch._dynamo.compiled_autograd.reset"),
}

PINS = {"core": CORE, "inductor": INDUCTOR, "instruments": INSTRUMENTS}


def _pin_src(x):
    return x


def _compiled_fx_graph_fields():
    import dataclasses

    cls = resolve("torch._inductor.output_code.CompiledFxGraph")
    fields = {f.name for f in dataclasses.fields(cls)}
    read = {"fx_kwargs", "mutated_input_idxs", "cudagraph_info", "device_idxs",
            "disabled_cudagraphs_reason", "device_types"}
    assert read <= fields, f"CompiledFxGraph lacks {sorted(read - fields)}"


def _shape_env_fields():
    env = resolve("torch.fx.experimental.symbolic_shapes.ShapeEnv")()
    assert hasattr(env, "backed_var_to_val") and hasattr(env, "var_to_sources")


@pytest.mark.parametrize("where", sorted(MODULES))
def test_every_compat_name_is_pinned(where):
    names, pinned = compat_names(MODULES[where]), set(PINS[where])
    assert not names - pinned, f"compat names without a pin in tests/test_compat.py: " \
                               f"{sorted(names - pinned)} ({MODULES[where].__name__})"
    assert not pinned - names, f"pins of names the compat module no longer has: " \
                               f"{sorted(pinned - names)}"


CASES = [(where, name) for where in sorted(PINS) for name in sorted(PINS[where])]


@pytest.mark.parametrize(("where", "name"), CASES, ids=[f"{w}.{n}" for w, n in CASES])
def test_pin(where, name):
    module, pin = MODULES[where], PINS[where][name]
    label = f"{module.__name__}.{name}"
    for path in pin.private:
        try:
            resolve(path)
        except (ImportError, AttributeError) as error:
            pytest.fail(f"{label} wraps {path}, which torch {torch.__version__} lacks: {error}")
    for path, names in (pin.params or {}).items():
        have = set(inspect.signature(resolve(path)).parameters)
        assert set(names) <= have, \
            f"{label} passes {sorted(set(names) - have)} to {path}, whose parameters are {have}"
    value = getattr(module, name)
    if pin.alias:
        assert value is resolve(pin.private[0]), f"{label} is no longer {pin.private[0]}"
    if pin.check is not None:
        try:
            outcome = pin.check(value)
        except Exception as error:  # a private API that changed behaviour
            pytest.fail(f"{label} (over {', '.join(pin.private) or 'public API'}) misbehaves: "
                        f"{type(error).__name__}: {error}")
        assert outcome is not False, f"{label} (over {', '.join(pin.private)}) misbehaves"
