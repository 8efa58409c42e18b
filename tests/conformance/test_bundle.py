"""The bundle the Python package ships (built by `make setup` with `tpukit bundle build`): every
entry is usable on this host, carries its StableHLO module, and the executables libtpu compiled
from it for v5e and v6e; and a bundle written by `tpukit bundle build --no-tpu` has none."""

import re

import pytest
from conftest import ROOT, tpukit

SHIPPED = ROOT / "python" / "tpukit" / "host.tpkb"


def inspect(path):
    """`tpukit bundle inspect`: (header line, [(entry name, its line)])."""
    lines = tpukit("bundle", "inspect", str(path)).splitlines()
    entries = [(re.split(r"\s{2,}", line.strip())[0], line) for line in lines[1:]]
    return lines[0], entries


@pytest.fixture(scope="module")
def shipped():
    assert SHIPPED.exists(), "the package ships no bundle: run `make setup`"
    return inspect(SHIPPED)


def test_the_shipped_bundle_is_usable_here(shipped):
    header, entries = shipped
    assert "(usable on this host)" in header
    assert len(entries) > 100


def test_every_shipped_kernel_has_tpu_executables_for_v5e_and_v6e(shipped):
    _, entries = shipped
    for name, line in entries:
        assert "TPU module" in line, f"{name}: no TPU module"
        assert re.search(r"v5e:2x2 \d+ KiB", line), f"{name}: no v5e executable ({line})"
        assert re.search(r"v6e:2x2 \d+ KiB", line), f"{name}: no v6e executable ({line})"


def test_every_shipped_kernel_is_in_the_shipped_bundle(shipped):
    _, entries = shipped
    names = {name for name, _ in entries}
    for dtype in ("f32", "bf16"):
        for line in tpukit("kernels", "--dtype", dtype).splitlines():
            kernel_id, kernel = line.split()
            if kernel_id.startswith("op."):
                continue  # the op-table kernels the conformance suite compiles: not shipped
            assert f"{kernel_id} {kernel} {dtype}" in names


def test_a_bundle_without_tpu_executables(tmp_path):
    path = tmp_path / "cpu-only.tpkb"
    tpukit("bundle", "build", "--no-tpu", "-o", str(path))
    _, entries = inspect(path)
    assert entries and all("executables: none" in line for _, line in entries)
