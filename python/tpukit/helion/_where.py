"""Which line of the user's kernel is running: for error messages."""

from __future__ import annotations

import linecache
import os
import sys

# source files of @helion.kernel functions (their rewritten code keeps file and line numbers)
KERNEL_FILES: set[str] = set()
_HERE = os.path.dirname(os.path.abspath(__file__))


def _describe(filename: str, lineno: int) -> str:
    text = linecache.getline(filename, lineno).strip()
    short = os.path.basename(filename)
    return f" (at {short}:{lineno}: `{text}`)" if text else f" (at {short}:{lineno})"


def where() -> str:
    """`` (at file.py:12: `source`)`` for the innermost kernel-source frame on the stack."""
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if fn in KERNEL_FILES and not os.path.abspath(fn).startswith(_HERE):
            return _describe(fn, f.f_lineno)
        f = f.f_back
    return ""


def where_tb(tb) -> str:
    """The same, from a traceback (the innermost kernel-source frame)."""
    found = ""
    while tb is not None:
        fn = tb.tb_frame.f_code.co_filename
        if fn in KERNEL_FILES and not os.path.abspath(fn).startswith(_HERE):
            found = _describe(fn, tb.tb_lineno)
        tb = tb.tb_next
    return found
