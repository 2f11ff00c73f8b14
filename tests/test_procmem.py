"""The process-memory readings the run status prints: anonymous and file pages told apart, and
the memory left under a container's limit."""

import mmap
import sys

import numpy as np
import pytest
from lexrag.io.procmem import _cgroup_available, mem_available, process_memory

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")


@linux
def test_an_array_counts_as_anonymous_and_a_read_memory_map_as_file_pages(tmp_path):
    before = process_memory()
    assert before["peak"] >= before["resident"] > 0
    a = np.ones(300 * 2**20 // 8)  # 300 MB, every page written
    grown = process_memory()
    assert grown["anon"] - before["anon"] >= 0.25 and grown["file"] - before["file"] < 0.1
    del a
    path = tmp_path / "blob"
    path.write_bytes(b"\1" * (200 * 2**20))
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        assert int(np.frombuffer(m, dtype=np.uint8)[::4096].sum()) == 200 * 2**20 // 4096  # touch every page
        mapped = process_memory()
        assert mapped["file"] - grown["file"] >= 0.15 and mapped["anon"] - before["anon"] < 0.1


def test_the_memory_left_under_a_cgroup_limit_counts_the_page_cache_as_free(tmp_path):
    (tmp_path / "memory.max").write_text("1000\n")
    (tmp_path / "memory.current").write_text("700\n")
    (tmp_path / "memory.stat").write_text("anon 400\nfile 300\ninactive_file 250\n")
    assert _cgroup_available(str(tmp_path)) == 1000 - 700 + 250
    (tmp_path / "memory.max").write_text("max\n")
    assert _cgroup_available(str(tmp_path)) is None  # no limit
    v1 = tmp_path / "v1" / "memory"
    v1.mkdir(parents=True)
    (v1 / "memory.limit_in_bytes").write_text("2000\n")
    (v1 / "memory.usage_in_bytes").write_text("1500\n")
    (v1 / "memory.stat").write_text("total_inactive_file 100\n")
    assert _cgroup_available(str(tmp_path / "v1")) == 600
    assert _cgroup_available(str(tmp_path / "none")) is None
    avail = mem_available()
    assert avail is None or avail > 0
