"""libtpu as tpukit uses it: a TPU compiler on a host that may have no TPU.

With ``jax[tpu]`` installed, JAX loads libtpu the first time it starts its backends (any JAX
computation, or tpukit lowering a kernel for TPU). On a host without a TPU, libtpu then asks
the cloud metadata server which accelerator and workers it belongs to, fails, and prints five
lines to stderr (``Failed to find host bounds…``, ``E0000 … unexpected worker hostname…``, a
source-location trace) — noise, since tpukit only compiles for topologies it names. Telling
libtpu the answers before it loads keeps it quiet; ``prepare_environment`` does so, once, at
``import tpukit``. It must run before libtpu loads: libtpu reads its environment only then.

On a host with a TPU (or what may be one) nothing is set, so libtpu finds the real chips as
usual; settings the user made are always kept.
"""

import glob
import os
import pathlib

# Google's PCI vendor id: TPU chips carry it, and so do Google Cloud's virtual NICs and disks.
_GOOGLE_PCI_VENDOR = "0x1ae0"
# PCI class prefixes of those NICs (0x02: network) and disks (0x01: storage): not TPUs.
_NOT_TPU_CLASSES = ("0x01", "0x02")

# What libtpu would otherwise look up on a TPU VM: an accelerator (any of those tpukit
# compiles for; compile-only topologies are named per compile) and this host as its worker.
_COMPILE_ONLY = {
    "TPU_ACCELERATOR_TYPE": "v5litepod-4",
    "TPU_WORKER_HOSTNAMES": "localhost",
}


def host_may_have_tpu(devices: str = "/sys/bus/pci/devices") -> bool:
    """Whether a PCI device of Google's that is neither a NIC nor a disk is attached: a TPU
    chip, or something that could be one (counted as one: then libtpu is left alone)."""
    for vendor in glob.glob(os.path.join(devices, "*", "vendor")):
        path = pathlib.Path(vendor)
        try:
            if path.read_text().strip() != _GOOGLE_PCI_VENDOR:
                continue
            klass = path.with_name("class").read_text().strip()
        except OSError:
            return True  # unreadable: do not assume there is no TPU
        if not klass.startswith(_NOT_TPU_CLASSES):
            return True
    return False


def prepare_environment() -> None:
    """Lets several processes load libtpu at once (compile-only: none owns a TPU; without this
    a second one fails on libtpu's lockfile) and, on a host without a TPU, tells libtpu what
    it would otherwise probe the network for (see the module docstring)."""
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    if host_may_have_tpu():
        return
    for name, value in _COMPILE_ONLY.items():
        os.environ.setdefault(name, value)
