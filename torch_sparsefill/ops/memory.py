"""The CPU output cache (``sf.memory``): the blocks of large outputs that the
kernels write in full (32 MiB and more: a 10M-element union's values and
indices, a big softmax) are kept when their tensor dies and serve the next
output of about their size, as torch's CUDA caching allocator keeps device
memory. A fresh block costs its page faults on the first write (most of a
10M-element union on a VM: 140 ms a call against 62-65 ms on reused memory;
docs/design.md#cpu-output-cache); glibc unmaps blocks that large on
free, so without the cache every call pays them again.

A kept block is marked ``MADV_FREE``: under memory pressure the kernel takes
its pages back without asking, so the cache holds nothing another program
needs; it still counts in the process's resident size until then. The limit
is an eighth of the memory, at most 1 GiB, or the environment variable
SPARSEFILL_CPU_CACHE_BYTES read at import (0 turns the cache off).
"""
from __future__ import annotations

import os
from typing import NamedTuple

from .. import _C

__all__ = ["CacheInfo", "cache_info", "empty_cache", "set_cache_limit"]


class CacheInfo(NamedTuple):
    """What ``cache_info()`` returns: bytes kept now, the limit, and how many
    large outputs a kept block served (``hits``) or a fresh one (``misses``)."""
    kept_bytes: int
    limit: int
    hits: int
    misses: int


def cache_info() -> CacheInfo:
    """The CPU output cache's state.

    Example::

        >>> sf.memory.cache_info().limit > 0
        True
    """
    return CacheInfo(*_C.output_cache_info())


def set_cache_limit(nbytes: int) -> int:
    """Sets how many bytes of freed outputs the cache may keep (0 keeps none);
    blocks kept beyond the new limit are returned to the system now. Returns
    the previous limit.

    Example::

        >>> previous = sf.memory.set_cache_limit(0)   # off
        >>> _ = sf.memory.set_cache_limit(previous)   # back on
    """
    if isinstance(nbytes, bool) or not isinstance(nbytes, int):
        raise TypeError(f"set_cache_limit(): nbytes must be an int, got {type(nbytes).__name__}")
    # a negative nbytes: ValueError from _C, which checks it for every caller
    return _C.set_output_cache_limit(nbytes)


def empty_cache() -> None:
    """Returns every kept block to the system (as ``torch.cuda.empty_cache``);
    the limit stays.

    Example::

        >>> sf.memory.empty_cache(); sf.memory.cache_info().kept_bytes
        0
    """
    set_cache_limit(set_cache_limit(0))


def _limit_from_environment() -> None:
    text = os.environ.get("SPARSEFILL_CPU_CACHE_BYTES")
    if text is None or not text.strip():
        return
    try:
        nbytes = int(text)
    except ValueError:
        raise ValueError(f"SPARSEFILL_CPU_CACHE_BYTES must be a number of bytes, "
                         f"got {text!r}") from None
    set_cache_limit(nbytes)


_limit_from_environment()
