"""Errors raised by ``tpukit.helion``."""

from __future__ import annotations

from tpukit._native import TpukitError, UnsupportedError


class HelionError(TpukitError):
    """A Helion program that cannot run (misuse of the API, a bad config, …); a
    ``tpukit.TpukitError``."""


class UnsupportedConstruct(HelionError, UnsupportedError):
    """A Helion construct (op, torch function, indexing form) tpukit does not translate.

    The message names the construct and, when known, the kernel source line."""


class NotInsideKernel(HelionError):
    """A device-only ``hl.*`` function called outside a device loop."""
