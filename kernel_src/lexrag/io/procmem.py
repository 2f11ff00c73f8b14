"""This process's memory as the kernel counts it, split the way a memory limit sees it.

Linux counts a process's resident set as anonymous pages (Python objects, numpy arrays, a FAISS
index: what an out-of-memory kill frees) plus file pages (memory-mapped files it has touched:
shared with the page cache, dropped by the kernel under pressure and read again on the next
touch).  The peak (``VmHWM``, which is what ``ru_maxrss`` and ``/usr/bin/time -v`` report) counts
both, so a run that memory-maps a 5 GB file and reads it once shows 5 GB more "peak" than it
needs.  :func:`process_memory` gives the parts separately; elsewhere (no ``/proc``) only the peak.
"""

from __future__ import annotations

import resource
import sys

__all__ = ["process_memory", "mem_available", "GB"]

GB = 2**30


def _status_kb() -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("VmHWM", "VmRSS", "RssAnon", "RssFile", "RssShmem"):
                    out[key] = int(rest.split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return out


def process_memory() -> dict[str, float]:
    """GB (2^30 bytes, unrounded): ``peak`` (the resident high-water mark, file pages included),
    ``resident`` now and, where the kernel reports them, ``anon`` (anonymous and shared-memory
    pages now: what only freeing, not the page cache, gives back) and ``file`` (file-backed pages
    now, mostly memory maps).  Only ``peak`` where ``/proc`` is missing."""
    kb = _status_kb()
    if "VmHWM" not in kb:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KB on Linux, bytes on macOS
        return {"peak": peak / (GB if sys.platform == "darwin" else 2**20)}
    out = {"peak": kb["VmHWM"], "resident": kb.get("VmRSS", 0)}
    if "RssAnon" in kb and "RssFile" in kb:  # Linux 4.5 and later
        out.update(anon=kb["RssAnon"] + kb.get("RssShmem", 0), file=kb["RssFile"])
    return {k: v / 2**20 for k, v in out.items()}


def _cgroup_available(root: str = "/sys/fs/cgroup") -> int | None:
    """Bytes left under this container's memory limit (cgroup v2, else v1), counting the
    reclaimable page cache as free; None without a limit.  A container's ``/proc/meminfo``
    shows the host's memory, not the limit the container is killed at."""
    for limit_f, used_f, stat_f, key in (("memory.max", "memory.current", "memory.stat", "inactive_file"),
                                          ("memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes",
                                           "memory/memory.stat", "total_inactive_file")):
        limit_f, used_f, stat_f = (f"{root}/{f}" for f in (limit_f, used_f, stat_f))
        try:
            limit = open(limit_f, encoding="ascii").read().strip()
            if limit == "max" or int(limit) >= 2**60:
                return None
            used = int(open(used_f, encoding="ascii").read().strip())
            cache = 0
            for line in open(stat_f, encoding="ascii"):
                name, _, value = line.partition(" ")
                if name == key:
                    cache = int(value)
            return max(0, int(limit) - used + cache)
        except (OSError, ValueError):
            continue
    return None


def mem_available() -> int | None:
    """Bytes of memory this process can still take: the kernel's ``MemAvailable`` (Linux), or
    what is left under the container's memory limit when that is less; None when unknown."""
    avail = None
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    cg = _cgroup_available()
    if cg is not None:
        avail = cg if avail is None else min(avail, cg)
    return avail
