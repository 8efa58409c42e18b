"""The package as a user meets it: documented entry points exist where the docs say."""

import json
import os
import subprocess
import sys
import textwrap

import tpukit


def test_cache_stats_counts_where_kernels_came_from():
    """In a fresh process without bundles or a disk cache, a first launch compiles; the same
    kernel again compiles nothing."""
    code = textwrap.dedent(
        """
        import json, numpy as np, tpukit
        kernel = tpukit.instantiate("softmax", (20, 128), "f32")
        x = np.random.default_rng(0).standard_normal((20, 128)).astype(np.float32)
        before = tpukit.cache_stats()
        (out,) = tpukit.launch(kernel, x)
        after_first = tpukit.cache_stats()
        tpukit.launch(kernel, x)
        e = np.exp(x - x.max(axis=1, keepdims=True))
        np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)
        print(json.dumps([before._asdict(), after_first._asdict(), tpukit.cache_stats()._asdict()]))
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "TPUKIT_CACHE_DIR"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
        env={**env, "TPUKIT_BUNDLE": ""},
    )
    assert done.returncode == 0, done.stderr
    before, first, again = json.loads(done.stdout)
    assert list(before) == ["compiled", "disk_hits", "bundle_hits", "damaged"]
    assert first["compiled"] > before["compiled"]
    assert first["bundle_hits"] == before["bundle_hits"] == 0
    assert again == first


def test_cache_stats_is_a_tuple_of_four_counts():
    stats = tpukit.cache_stats()
    assert isinstance(stats, tuple) and len(stats) == 4
    assert all(isinstance(n, int) and n >= 0 for n in stats)
    assert "cache_stats" in tpukit.__all__
