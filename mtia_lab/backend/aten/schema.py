"""What an op's schema says about aliasing, read once per overload and cached.

The dispatcher needs three facts about every op it serves: which arguments it writes to (in-place
and `out=` ops), which of its results are those same arguments (so the caller gets back the very
tensor object it passed), and whether it is a view (its result shares its input's storage).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..._compat import OpOverload, op_schema


@dataclass(frozen=True)
class OpSchemaFacts:
    name: str  # "aten::add.Tensor"
    is_view: bool
    mutated: tuple[tuple[int, str], ...]  # (position, name) of every argument written to
    return_aliases: tuple[tuple[int, str] | None, ...]  # per result: the written arg it returns
    has_generator: bool

    def arg(self, args: tuple, kwargs: dict, where: tuple[int, str]):
        position, name = where
        return args[position] if position < len(args) else kwargs.get(name)


_CACHE: dict[OpOverload, OpSchemaFacts] = {}

# Ops that write to arguments their schema does not mark as written. PyTorch knows of these
# (torch/_decomp/decompositions.py: "native_batch_norm ... have the right schema (stating that
# there are input mutations)"): in training they update `running_mean` / `running_var` in place.
# The CPU fallback copies back what an op writes, so it must know.
_UNDECLARED_WRITES = {
    name: ((3, "running_mean"), (4, "running_var"))
    for name in (
        "aten::native_batch_norm", "aten::native_batch_norm.out", "aten::cudnn_batch_norm",
        "aten::cudnn_batch_norm.out", "aten::miopen_batch_norm", "aten::miopen_batch_norm.out",
    )
}


def facts(func: OpOverload) -> OpSchemaFacts:
    known = _CACHE.get(func)
    if known is not None:
        return known
    schema = op_schema(func)
    name = schema.name + (f".{schema.overload_name}" if schema.overload_name else "")
    # Every written argument, by position: a list `Tensor(a!)[]` has an empty alias set (the
    # set is on its elements), so several written lists (`_fused_adamw_` writes five) must not
    # be told apart by their alias set.
    mutated = list(_UNDECLARED_WRITES.get(name, ()))
    by_alias_set = {}
    for position, argument in enumerate(schema.arguments):
        info = argument.alias_info
        if info is not None and info.is_write:
            mutated.append((position, argument.name))
            if info.before_set:
                by_alias_set[frozenset(info.before_set)] = (position, argument.name)
    returns = []
    for result in schema.returns:
        info = result.alias_info
        returns.append(
            by_alias_set.get(frozenset(info.before_set))
            if info is not None and info.is_write and info.before_set
            else None
        )
    result = OpSchemaFacts(
        name=name,
        is_view=func.is_view,
        mutated=tuple(mutated),
        return_aliases=tuple(returns),
        has_generator=any(a.name == "generator" for a in schema.arguments),
    )
    _CACHE[func] = result
    return result
