"""How much memory a fit may still allocate: the one place every size check asks (no axis).

:func:`available_memory_bytes` is what :func:`~tnbayes._sizes.check_fits_in_memory`, the ALS engine's caches, the TT
Kalman filter's product check and ``ExactGP`` compare their needs with: a CUDA device's free memory, or on the CPU the
machine's available memory or, where it is less, what the process's memory control group still allows
(:func:`cgroup_memory_available`: a container's or a batch job's limit, which the machine's figure does not show
and past which the kernel kills the process instead of failing an allocation).
"""

from __future__ import annotations

import os

import torch

__all__ = ["available_memory_bytes", "cgroup_memory_available"]


def available_memory_bytes(device: torch.device | str | None = None) -> int:
    """Memory currently free for new tensors on ``device``.

    CUDA devices report their free memory (``torch.cuda.mem_get_info``); the CPU reports available
    physical memory (Linux ``MemAvailable``; a conservative 4 GiB where that is unavailable), or what the process's
    memory control group still allows where that is less (:func:`cgroup_memory_available`: a container's limit,
    which ``MemAvailable`` does not see, and past which the kernel kills the process instead of failing an
    allocation).
    """
    device = torch.device(device) if device is not None else torch.device("cpu")
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    machine = _machine_memory_available()
    limited = cgroup_memory_available()
    return machine if limited is None else min(machine, limited)


def _machine_memory_available() -> int:
    """The machine's available physical memory in bytes (``MemAvailable``; 4 GiB where that is unavailable)."""
    try:  # MemAvailable counts reclaimable page cache; MemFree (SC_AVPHYS_PAGES) does not
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 4 * 2**30


#: where the kernel lists the process's control groups, and where their file systems are mounted
_PROC_CGROUP = "/proc/self/cgroup"
_CGROUP_MOUNT = "/sys/fs/cgroup"
#: a cgroup v1 limit at or above this many bytes means "no limit" (the kernel writes 2⁶³ rounded down to a page)
_V1_UNLIMITED = 2**62


def _read_int(path: str) -> int | None:
    """The integer in a one-value cgroup file; None where it is missing or not a number (v2's ``max``)."""
    try:
        with open(path) as fh:
            text = fh.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _stat_value(path: str, key: str) -> int | None:
    """The value of ``key`` in a cgroup ``memory.stat`` file; None where it is missing."""
    try:
        with open(path) as fh:
            for line in fh:
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
    except (OSError, ValueError):
        pass
    return None


def _inside(path: str, mount: str) -> bool:
    """Whether ``path`` is ``mount`` or below it (a listed path with ``..`` belongs to another cgroup namespace)."""
    return os.path.commonpath([path, mount]) == mount


def _chain(mount: str, relative: str) -> list[str]:
    """The process's group (``relative`` below ``mount``) and its ancestors up to the mount; the mount alone where the
    path is another namespace's or not there (a container without its own cgroup namespace sees its group there)."""
    group = os.path.normpath(os.path.join(mount, relative))
    if not _inside(group, mount) or not os.path.isdir(group):
        return [mount]
    chain = [group]
    while group != mount:
        group = os.path.dirname(group)
        chain.append(group)
    return chain


def _v2_available(group: str) -> int | None:
    """A v2 group's ``memory.max`` − ``memory.current`` + inactive file cache; None without a limit (``max``, or
    the root group, which has neither file)."""
    limit = _read_int(os.path.join(group, "memory.max"))
    usage = None if limit is None else _read_int(os.path.join(group, "memory.current"))
    if usage is None:
        return None
    return max(limit - usage + (_stat_value(os.path.join(group, "memory.stat"), "inactive_file") or 0), 0)


def _v1_available(group: str, top: bool) -> int | None:
    """A v1 group's ``memory.limit_in_bytes`` − ``memory.usage_in_bytes`` (which counts its descendants) + inactive
    file cache; for the topmost group visible (``top``) the limit is ``hierarchical_memory_limit``, which includes the
    limits of ancestors outside the mount (whose usage this group's stands in for). None without a limit."""
    stat = os.path.join(group, "memory.stat")
    limit = _read_int(os.path.join(group, "memory.limit_in_bytes"))
    if top:
        limit = _stat_value(stat, "hierarchical_memory_limit") or limit
    usage = None if limit is None or limit >= _V1_UNLIMITED else _read_int(os.path.join(group,
                                                                                         "memory.usage_in_bytes"))
    if usage is None:
        return None
    return max(limit - usage + (_stat_value(stat, "total_inactive_file") or 0), 0)


#: the groups to read for each (``/proc/self/cgroup``, mount) pair, found once per process: (directory, version 2,
#: topmost visible); their limits and usage are read at every call
_GROUPS: dict[tuple[str, str], tuple[tuple[str, bool, bool], ...]] = {}


def _memory_groups() -> tuple[tuple[str, bool, bool], ...]:
    """The process's memory cgroups and their visible ancestors (v2 on the unified mount, ``/sys/fs/cgroup`` or
    ``unified/`` below it on hybrid systems; v1 on ``memory/``), as (directory, whether v2, whether the topmost)."""
    key = (_PROC_CGROUP, _CGROUP_MOUNT)
    if key in _GROUPS:
        return _GROUPS[key]
    try:
        with open(_PROC_CGROUP) as fh:
            lines = fh.read().splitlines()
    except OSError:
        return ()  # not cached: a later call may read it
    groups: list[tuple[str, bool, bool]] = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            for mount in (_CGROUP_MOUNT, os.path.join(_CGROUP_MOUNT, "unified")):
                if os.path.isfile(os.path.join(mount, "cgroup.controllers")):
                    chain = _chain(mount, path.lstrip("/"))
                    groups += [(group, True, group == chain[-1]) for group in chain]
        elif "memory" in controllers.split(","):
            chain = _chain(os.path.join(_CGROUP_MOUNT, "memory"), path.lstrip("/"))
            groups += [(group, False, group == chain[-1]) for group in chain]
    _GROUPS[key] = tuple(groups)
    return _GROUPS[key]


def cgroup_memory_available() -> int | None:
    """Bytes the process's memory control group (a container's, a batch job's) still lets it allocate.

    Read from ``/proc/self/cgroup`` and the cgroup file systems under ``/sys/fs/cgroup``, v2, v1 and hybrid: at the
    process's group and each ancestor visible that sets a limit, the limit less the group's usage (which counts its
    descendants) plus its inactive page cache, which the kernel reclaims before it kills (as ``MemAvailable`` counts
    it); the smallest of them. Where the listed path is another namespace's (a container without its own cgroup
    namespace), the mount's own group; in v1 the topmost group visible takes ``hierarchical_memory_limit``, which
    includes the limits of ancestors outside the mount (against its own usage, not theirs). Which groups to read is
    found once per process (a process moved to another cgroup keeps reading its first); their limits and usage are
    read at every call.

    Returns
    -------
    int or None
        Bytes; None where no group sets a limit or the files cannot be read (not Linux).
    """
    free = [_v2_available(group) if v2 else _v1_available(group, top) for group, v2, top in _memory_groups()]
    free = [value for value in free if value is not None]
    return min(free) if free else None
