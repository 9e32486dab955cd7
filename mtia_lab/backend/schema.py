"""What an op's schema says about aliasing, read once per overload and cached.

The dispatcher needs three facts about every op it serves: which arguments it writes to (in-place
and `out=` ops), which of its results are those same arguments (so the caller gets back the very
tensor object it passed), and whether it is a view (its result shares its input's storage).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


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


_CACHE: dict[torch._ops.OpOverload, OpSchemaFacts] = {}


def facts(func: torch._ops.OpOverload) -> OpSchemaFacts:
    known = _CACHE.get(func)
    if known is not None:
        return known
    schema = func._schema
    written = {}
    for position, argument in enumerate(schema.arguments):
        info = argument.alias_info
        if info is not None and info.is_write:
            written[frozenset(info.before_set)] = (position, argument.name)
    returns = []
    for result in schema.returns:
        info = result.alias_info
        returns.append(
            written.get(frozenset(info.before_set)) if info is not None and info.is_write else None
        )
    name = schema.name + (f".{schema.overload_name}" if schema.overload_name else "")
    result = OpSchemaFacts(
        name=name,
        is_view=func.is_view,
        mutated=tuple(written.values()),
        return_aliases=tuple(returns),
        has_generator=any(a.name == "generator" for a in schema.arguments),
    )
    _CACHE[func] = result
    return result
