"""How much memory a fit may still allocate: the one place every size check asks (no axis).

:func:`available_memory_bytes` is what :func:`~tnbayes._sizes.check_fits_in_memory`, the ALS engine's caches, the TT
Kalman filter's product check and ``ExactGP`` compare their needs with: a CUDA device's free memory, or on the CPU the
machine's available memory or, where it is less, what the process's memory control group still allows
(:func:`cgroup_memory_available`: a container's or a batch job's limit, which the machine's figure does not show
and past which the kernel kills the process instead of failing an allocation).
"""

from __future__ import annotations

import functools
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


def _v2_groups(relative: str) -> list[str]:
    """cgroup v2: the process's group and its ancestors up to the mount (the root group sets no limit), on the
    unified mount (``/sys/fs/cgroup``, or ``unified/`` below it on hybrid v1 + v2 systems)."""
    groups = []
    for mount in (_CGROUP_MOUNT, os.path.join(_CGROUP_MOUNT, "unified")):
        if not os.path.isfile(os.path.join(mount, "cgroup.controllers")):
            continue
        group = os.path.normpath(os.path.join(mount, relative))
        if not _inside(group, mount) or not os.path.isdir(group):  # another namespace's path: the mount is ours
            group = mount
        groups.append(group)
        while group != mount:
            group = os.path.dirname(group)
            groups.append(group)
    return groups


def _v2_available(group: str) -> int | None:
    """A v2 group's ``memory.max`` − ``memory.current`` + inactive file cache; None without a limit."""
    limit = _read_int(os.path.join(group, "memory.max"))
    usage = _read_int(os.path.join(group, "memory.current"))
    if limit is None or usage is None:
        return None
    return max(limit - usage + (_stat_value(os.path.join(group, "memory.stat"), "inactive_file") or 0), 0)


def _v1_group(relative: str) -> list[str]:
    """cgroup v1: the process's group on the memory mount, or the mount itself where that path is another
    namespace's (a container without its own cgroup namespace sees its group at the mount)."""
    mount = os.path.join(_CGROUP_MOUNT, "memory")
    group = os.path.normpath(os.path.join(mount, relative))
    return [group if _inside(group, mount) and os.path.isfile(os.path.join(group, "memory.usage_in_bytes"))
            else mount]


def _v1_available(group: str) -> int | None:
    """A v1 group's hierarchical limit (the smallest of the group and its ancestors) − usage + inactive file cache;
    None without a limit."""
    usage = _read_int(os.path.join(group, "memory.usage_in_bytes"))
    stat = os.path.join(group, "memory.stat")
    limit = _stat_value(stat, "hierarchical_memory_limit") or _read_int(os.path.join(group, "memory.limit_in_bytes"))
    if usage is None or limit is None or limit >= _V1_UNLIMITED:
        return None
    return max(limit - usage + (_stat_value(stat, "total_inactive_file") or 0), 0)


@functools.lru_cache(maxsize=8)
def _limited_groups(proc_cgroup: str, mount: str) -> tuple[tuple[str, bool], ...]:
    """The process's memory cgroups that set a limit, as (directory, whether v2), found once per process (and
    per pair of paths): the usage is read at every call, the hierarchy is not walked again."""
    try:
        with open(proc_cgroup) as fh:
            lines = fh.read().splitlines()
    except OSError:
        return ()
    groups: list[tuple[str, bool]] = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            groups += [(group, True) for group in _v2_groups(path.lstrip("/")) if _v2_available(group) is not None]
        elif "memory" in controllers.split(","):
            groups += [(group, False) for group in _v1_group(path.lstrip("/")) if _v1_available(group) is not None]
    return tuple(groups)


def cgroup_memory_available() -> int | None:
    """Bytes the process's memory control group (a container's, a batch job's) still lets it allocate.

    Read from ``/proc/self/cgroup`` and the cgroup file systems under ``/sys/fs/cgroup``, v2, v1 and hybrid: at each
    group that sets a limit (v2: the process's group and its ancestors; v1: the smallest limit of the group and its
    ancestors), the limit less the group's usage plus its inactive page cache, which the kernel reclaims before it
    kills (as ``MemAvailable`` counts it); the smallest of them. Where the listed path is another namespace's (a
    container without its own cgroup namespace), the mount's own group. Which groups set a limit is found once per
    process; their usage is read at every call.

    Returns
    -------
    int or None
        Bytes; None where no group sets a limit or the files cannot be read (not Linux).
    """
    free = [(_v2_available if v2 else _v1_available)(group) for group, v2 in _limited_groups(_PROC_CGROUP,
                                                                                           _CGROUP_MOUNT)]
    free = [value for value in free if value is not None]
    return min(free) if free else None
