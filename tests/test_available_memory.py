"""The free memory every size check uses honours the process's memory control group (a container's limit), read
from cgroup file trees laid out as the kernel writes them (v2, v1 and hybrid systems) in a temporary directory."""

from __future__ import annotations

import pytest

import tnbayes._memory as memory
from tnbayes._sizes import check_fits_in_memory

GIB = 2**30


def _write(path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def cgroup_tree(tmp_path, monkeypatch):
    """A fake /proc/self/cgroup and /sys/fs/cgroup, returned as (proc file, mount directory)."""
    proc, mount = tmp_path / "proc_self_cgroup", tmp_path / "cgroup"
    mount.mkdir()
    monkeypatch.setattr(memory, "_PROC_CGROUP", str(proc))
    monkeypatch.setattr(memory, "_CGROUP_MOUNT", str(mount))
    monkeypatch.setattr(memory, "_machine_memory_available", lambda: 2**40)  # a large machine: the group binds
    memory._GROUPS.clear()  # which groups to read is found once per pair of paths
    yield proc, mount
    memory._GROUPS.clear()


def _v2_group(directory, limit: str, usage: int, inactive_file: int = 0) -> None:
    _write(directory / "memory.max", f"{limit}\n")
    _write(directory / "memory.current", f"{usage}\n")
    _write(directory / "memory.stat", f"anon {usage}\nfile 0\ninactive_file {inactive_file}\nactive_file 0\n")


def test_a_v2_container_limit_is_what_is_free(cgroup_tree):
    """With a cgroup namespace the container's group is the mount; its usage is read at every call."""
    proc, mount = cgroup_tree
    _write(proc, "0::/\n")  # a cgroup namespace: the container's group is the mount
    _write(mount / "cgroup.controllers", "cpu memory pids\n")
    _v2_group(mount, str(4 * GIB), usage=GIB, inactive_file=GIB // 4)
    assert memory.cgroup_memory_available() == 4 * GIB - GIB + GIB // 4  # the inactive page cache is reclaimed
    assert memory.available_memory_bytes("cpu") == 4 * GIB - GIB + GIB // 4
    _v2_group(mount, str(4 * GIB), usage=2 * GIB)
    assert memory.cgroup_memory_available() == 2 * GIB


def test_a_v2_parent_limit_binds_below_an_unlimited_group(cgroup_tree):
    proc, mount = cgroup_tree
    _write(proc, "0::/pod/app\n")
    _write(mount / "cgroup.controllers", "memory\n")
    _v2_group(mount / "pod", str(2 * GIB), usage=3 * GIB // 2)
    _v2_group(mount / "pod" / "app", "max", usage=GIB)
    assert memory.cgroup_memory_available() == GIB // 2


def test_no_limit_anywhere_leaves_the_machine_s_memory(cgroup_tree):
    proc, mount = cgroup_tree
    _write(proc, "0::/app\n4:memory:/app\n")
    _write(mount / "cgroup.controllers", "memory\n")
    _v2_group(mount / "app", "max", usage=GIB)
    _write(mount / "memory" / "app" / "memory.usage_in_bytes", f"{GIB}\n")
    _write(mount / "memory" / "app" / "memory.limit_in_bytes", "9223372036854771712\n")
    _write(mount / "memory" / "app" / "memory.stat", "hierarchical_memory_limit 9223372036854771712\n")
    assert memory.cgroup_memory_available() is None
    assert memory.available_memory_bytes("cpu") > 0


def test_v1_walks_the_visible_ancestors_and_takes_the_mount_s_hierarchical_limit(cgroup_tree):
    proc, mount = cgroup_tree
    parent, group = mount / "memory" / "docker", mount / "memory" / "docker" / "abc"
    _write(proc, "5:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n0::/\n")
    _write(group / "memory.usage_in_bytes", f"{GIB}\n")
    _write(group / "memory.limit_in_bytes", "9223372036854771712\n")  # the group's own: none, its parent's binds
    _write(parent / "memory.usage_in_bytes", f"{2 * GIB}\n")  # the group and a sibling
    _write(parent / "memory.limit_in_bytes", f"{3 * GIB}\n")
    _write(parent / "memory.stat", f"cache 0\ntotal_inactive_file {GIB // 2}\n")
    assert memory.cgroup_memory_available() == 3 * GIB - 2 * GIB + GIB // 2  # the parent's usage, not the group's
    # without a cgroup namespace the listed path is the host's: the container sees its own group at the mount, whose
    # hierarchical limit includes those of ancestors it cannot see
    _write(proc, "4:memory:/docker/elsewhere\n")
    _write(mount / "memory" / "memory.usage_in_bytes", f"{GIB}\n")
    _write(mount / "memory" / "memory.limit_in_bytes", "9223372036854771712\n")
    _write(mount / "memory" / "memory.stat", f"hierarchical_memory_limit {2 * GIB}\ntotal_inactive_file 0\n")
    memory._GROUPS.clear()
    assert memory.cgroup_memory_available() == GIB


def test_hybrid_systems_read_the_unified_mount_and_take_the_smaller(cgroup_tree):
    proc, mount = cgroup_tree
    _write(proc, "4:memory:/job\n0::/job\n")
    _write(mount / "unified" / "cgroup.controllers", "memory\n")
    _v2_group(mount / "unified" / "job", str(8 * GIB), usage=GIB)
    _write(mount / "memory" / "job" / "memory.usage_in_bytes", f"{GIB}\n")
    _write(mount / "memory" / "job" / "memory.limit_in_bytes", f"{5 * GIB}\n")
    assert memory.cgroup_memory_available() == 4 * GIB


def test_an_unreadable_or_odd_cgroup_file_changes_nothing(cgroup_tree):
    proc, mount = cgroup_tree
    assert memory.cgroup_memory_available() is None  # no /proc/self/cgroup
    _write(proc, "garbage\n0::/../../elsewhere\n")
    _write(mount / "cgroup.controllers", "memory\n")
    _v2_group(mount, "not-a-number", usage=GIB)
    memory._GROUPS.clear()
    assert memory.cgroup_memory_available() is None
    _v2_group(mount, str(2 * GIB), usage=GIB)  # the same path, read as the mount's group, once it sets a limit
    memory._GROUPS.clear()
    assert memory.cgroup_memory_available() == GIB


def test_a_size_check_refuses_what_the_container_cannot_hold(cgroup_tree):
    """A fit that fits the machine but not the container's limit gets the MemoryError with the remedy, before any
    allocation, instead of the kernel's OOM kill."""
    proc, mount = cgroup_tree
    _write(proc, "0::/\n")
    _write(mount / "cgroup.controllers", "memory\n")
    _v2_group(mount, str(2 * GIB), usage=GIB)
    check_fits_in_memory(0.5 * GIB, "a test object", "lower it")
    with pytest.raises(MemoryError, match=r"needs about 0\.9 GiB but only 1\.0 GiB are free; lower it"):
        check_fits_in_memory(0.9 * GIB, "a test object", "lower it")
