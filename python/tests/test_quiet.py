"""A plain kernel call prints nothing: libtpu, loaded to lower the kernel for TPU, is told at
``import tpukit`` that this host has no TPU (``tpukit._libtpu``) instead of probing for one and
printing five lines to stderr."""

import os
import subprocess
import sys
import textwrap

import pytest

from tpukit import _libtpu

KERNEL_CALL = textwrap.dedent(
    """
    import numpy as np
    from tpukit import pallas

    @pallas.custom_kernel(lambda x, y: np.empty_like(x))
    def add(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    x = np.random.default_rng(0).standard_normal((8, 128)).astype(np.float32)
    np.testing.assert_allclose(add(x, x), x + x, rtol=1e-6)
    print("ok")
    """
)


def _run(code, tmp_path):
    """Runs ``code`` as a script (Helion reads its kernels' source) in a fresh process, with
    none of libtpu's settings in its environment."""
    script = tmp_path / "program.py"
    script.write_text(code)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TPU_")}
    return subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300
    )


@pytest.mark.skipif(_libtpu.host_may_have_tpu(), reason="a TPU host: libtpu is left alone")
def test_a_plain_kernel_call_prints_nothing(tmp_path):
    done = _run(KERNEL_CALL, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"
    assert done.stderr == ""


@pytest.mark.skipif(_libtpu.host_may_have_tpu(), reason="a TPU host: libtpu is left alone")
def test_a_helion_program_prints_nothing(tmp_path):
    code = textwrap.dedent(
        """
        import torch
        from tpukit import helion
        import tpukit.helion.language as hl

        @helion.kernel(config=helion.Config(block_sizes=[8]))
        def double(x: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(x)
            for tile in hl.tile(x.size(0)):
                out[tile, :] = x[tile, :] * 2
            return out

        x = torch.randn(20, 128)
        torch.testing.assert_close(double(x), x * 2)
        print("ok")
        """
    )
    pytest.importorskip("torch")
    done = _run(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert (done.stdout, done.stderr) == ("ok\n", "")


def _device(root, name, vendor, klass):
    d = root / name
    d.mkdir()
    (d / "vendor").write_text(vendor + "\n")
    (d / "class").write_text(klass + "\n")


def test_only_a_google_device_that_is_no_nic_or_disk_may_be_a_tpu(tmp_path):
    _device(tmp_path, "0000:00:01.0", "0x8086", "0x060000")  # an Intel bridge
    _device(tmp_path, "0000:00:04.0", "0x1ae0", "0x020000")  # Google's virtual NIC
    _device(tmp_path, "0000:00:05.0", "0x1ae0", "0x010802")  # Google's NVMe disk
    assert not _libtpu.host_may_have_tpu(str(tmp_path))
    _device(tmp_path, "0000:00:06.0", "0x1ae0", "0x120000")  # an accelerator: a TPU chip
    assert _libtpu.host_may_have_tpu(str(tmp_path))


def test_the_environment_is_prepared_and_user_settings_are_kept(monkeypatch):
    monkeypatch.setattr(_libtpu, "host_may_have_tpu", lambda: False)
    monkeypatch.delenv("TPU_WORKER_HOSTNAMES", raising=False)
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v6e-8")
    _libtpu.prepare_environment()
    assert os.environ["TPU_ACCELERATOR_TYPE"] == "v6e-8"
    assert os.environ["TPU_WORKER_HOSTNAMES"] == "localhost"


def test_a_tpu_host_is_left_alone(monkeypatch):
    monkeypatch.setattr(_libtpu, "host_may_have_tpu", lambda: True)
    monkeypatch.delenv("TPU_ACCELERATOR_TYPE", raising=False)
    monkeypatch.delenv("TPU_WORKER_HOSTNAMES", raising=False)
    _libtpu.prepare_environment()
    assert "TPU_ACCELERATOR_TYPE" not in os.environ
    assert "TPU_WORKER_HOSTNAMES" not in os.environ
