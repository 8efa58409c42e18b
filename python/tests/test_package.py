"""The package as a user meets it: documented entry points exist where the docs say."""

import ast
import importlib.metadata
import inspect
import json
import os
import pathlib
import re
import subprocess
import sys
import textwrap
import tomllib

import pytest

import tpukit
from tpukit import _native


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


def _stub():
    path = pathlib.Path(tpukit.__file__).with_name("_native.pyi")
    return ast.parse(path.read_text())


def _stub_names(body) -> dict:
    """Top-level names a stub body defines (private type aliases left out) -> their node."""
    names = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
    return names


def test_the_native_stub_names_every_export_with_its_parameters():
    stub = _stub_names(_stub().body)
    exported = {n for n in dir(_native) if not n.startswith("__") or n == "__version__"}
    exported.discard("__all__")
    assert set(stub) == exported
    (declared,) = [
        ast.literal_eval(n.value) for n in _stub().body
        if isinstance(n, ast.Assign) and n.targets[0].id == "__all__"
    ]
    assert set(declared) == set(_native.__all__)
    for name, node in stub.items():
        obj = getattr(_native, name)
        if isinstance(node, ast.FunctionDef):
            params = [a.arg for a in node.args.args]
            assert params == list(inspect.signature(obj).parameters), name
        elif isinstance(node, ast.ClassDef) and not issubclass(obj, BaseException):
            members = _stub_names(node.body)
            public = {m for m in dir(obj) if not m.startswith("_")}
            assert {m for m in members if not m.startswith("_")} == public, name
            for m, method in members.items():
                if isinstance(method, ast.FunctionDef) and not method.decorator_list:
                    if m.startswith("__"):
                        continue
                    params = [a.arg for a in method.args.args]
                    assert params == list(inspect.signature(getattr(obj, m)).parameters), m


def test_the_package_is_typed():
    assert pathlib.Path(tpukit.__file__).with_name("py.typed").exists()


def test_version_is_the_crates_version():
    root = pathlib.Path(__file__).resolve().parents[2]
    cargo = tomllib.loads((root / "Cargo.toml").read_text())
    assert tpukit.__version__ == cargo["workspace"]["package"]["version"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", tpukit.__version__)


def test_version_is_the_installed_metadata_version():
    try:
        installed = importlib.metadata.version("tpukit")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("tpukit is not installed (run from a source tree)")
    assert tpukit.__version__ == installed


def test_license_and_metadata():
    root = pathlib.Path(__file__).resolve().parents[2]
    license_text = (root / "LICENSE").read_text()
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert "END OF TERMS AND CONDITIONS" in license_text
    project = tomllib.loads((root / "python" / "pyproject.toml").read_text())["project"]
    assert (root / "python" / project["readme"]).exists()
    assert "License :: OSI Approved :: Apache Software License" in project["classifiers"]
    assert "Typing :: Typed" in project["classifiers"]
    assert project["license"] == {"text": "Apache-2.0"}
    # lowering for TPU needs libtpu, which only jax's `tpu` extra brings
    assert all("jax[tpu]" in d for d in project["optional-dependencies"]["jax"])


def test_the_first_shipped_bundle_that_fits_is_loaded_and_only_a_miss_is_reported(tmp_path):
    """`import tpukit` lists its bundles best first: one this machine cannot use is passed over
    silently when a later one fits (which then serves the kernels), and if none fits one
    message says so and kernels compile."""
    shipped = pathlib.Path(tpukit.__file__).with_name("host.tpkb")
    if not shipped.exists():
        pytest.skip("no bundle in this build of the package (make setup builds it)")
    broken = tmp_path / "broken.tpkb"
    broken.write_bytes(shipped.read_bytes()[:1000])  # cut inside its index: refused
    code = textwrap.dedent(
        f"""
        import json, sys, numpy as np, tpukit
        from tpukit import _native
        chosen = _native.register_first_bundle(sys.argv[1:])
        x, y = np.random.default_rng(0).standard_normal((2, 1000)).astype(np.float32)
        (out,) = tpukit.launch(tpukit.instantiate("add_vectors", (1000,), "f32"), x, y)
        np.testing.assert_array_equal(out, x + y)
        print(json.dumps([chosen, _native.loaded_bundles(), tpukit.cache_stats()._asdict()]))
        """
    )

    def run(*paths):
        done = subprocess.run(
            [sys.executable, "-c", code, *map(str, paths)], capture_output=True, text=True,
            timeout=300, env={**os.environ, "TPUKIT_BUNDLE": "", "TPUKIT_CACHE_DIR": ""},
        )
        assert done.returncode == 0, done.stderr
        return (*json.loads(done.stdout), done.stderr)

    chosen, loaded, stats, stderr = run(broken, shipped)
    assert chosen == str(shipped) and [p for p, _ in loaded] == [str(shipped)]
    assert stats["bundle_hits"] == 1 and stats["compiled"] == 0
    assert stderr == ""
    chosen, loaded, stats, stderr = run(broken)
    assert chosen is None and loaded == [] and stats["compiled"] == 1
    assert stderr.count("tpukit: no bundle fits this machine") == 1
    assert str(broken) in stderr and "kernels will be compiled instead" in stderr
