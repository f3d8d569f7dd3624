"""A nested payload (dicts, lists, tuples, numbers, strings, tensors) as tensors plus JSON, so
that a checkpoint is stored without pickle: reading it back can never run code.

Types survive the round trip exactly: tuples stay tuples, integer dict keys (an optimizer's
state) stay integers, floats keep every bit (JSON writes Python floats at full precision, NaN
and infinity included), and each tensor is stored under the path that leads to it.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

_TENSOR, _TUPLE, _DICT = "__tensor__", "__tuple__", "__dict__"


def pack(tree: object, tensors: dict[str, Tensor], path: str = "") -> object:
    """``tree`` as JSON-ready data; its tensors are moved into ``tensors`` (CPU, contiguous).

    >>> tensors = {}
    >>> pack({"step": 3, "w": torch.ones(2)}, tensors)
    {'step': 3, 'w': {'__tensor__': 'w'}}
    """
    if tree is None or isinstance(tree, (bool, int, float, str)):
        return tree
    if isinstance(tree, Tensor):
        if path in tensors:  # keys with dots could spell another key's path
            raise ValueError(f"two tensors of a checkpoint would both be stored as {path!r}")
        tensors[path] = tree.detach().cpu().contiguous()
        return {_TENSOR: path}
    if isinstance(tree, (list, tuple)):
        items = [pack(value, tensors, f"{path}.{i}".lstrip(".")) for i, value in enumerate(tree)]
        return {_TUPLE: items} if isinstance(tree, tuple) else items
    if isinstance(tree, Mapping):
        if all(isinstance(key, str) and not key.startswith("__") for key in tree):
            return {key: pack(value, tensors, f"{path}.{key}".lstrip(".")) for key, value in tree.items()}
        return {_DICT: [[key, pack(value, tensors, f"{path}.{key}".lstrip("."))] for key, value in tree.items()]}
    raise TypeError(f"cannot store {type(tree).__name__} at {path or 'the top'} of a checkpoint "
                    f"(only tensors, numbers, strings, lists, tuples and dicts)")


def unpack(data: object, tensors: Mapping[str, Tensor]) -> object:
    """The inverse of [`pack`][interp.training.tensor_tree.pack].

    >>> tensors = {}
    >>> unpack(pack({1: (2.5, None)}, tensors), tensors)
    {1: (2.5, None)}
    """
    if isinstance(data, list):
        return [unpack(value, tensors) for value in data]
    if not isinstance(data, dict):
        return data
    if _TENSOR in data:
        return tensors[data[_TENSOR]]
    if _TUPLE in data:
        return tuple(unpack(value, tensors) for value in data[_TUPLE])
    if _DICT in data:
        return {_key(key): unpack(value, tensors) for key, value in data[_DICT]}
    return {key: unpack(value, tensors) for key, value in data.items()}


def _key(key: object) -> object:
    return tuple(key) if isinstance(key, list) else key


def same_tree(a: object, b: object) -> bool:
    """Whether two payloads hold the same values and types (tensors compared bit for bit).

    >>> same_tree({"w": torch.ones(2), "step": (3,)}, {"w": torch.ones(2), "step": (3,)})
    True
    >>> same_tree((3,), [3]), same_tree(torch.ones(2), torch.ones(2, dtype=torch.float64))
    (False, False)
    """
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        return isinstance(a, Tensor) and isinstance(b, Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if type(a) is not type(b):
        return False
    if isinstance(a, Mapping):
        return a.keys() == b.keys() and all(same_tree(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_tree(x, y) for x, y in zip(a, b))
    return a == b or (isinstance(a, float) and a != a and b != b)
