"""Locations at the user's line for IR built from Python.

Builders emit ops several calls below the user's code; MLIR's default
location is whatever the enclosing ``with Location`` says (the kernel layer
pushes ``Location.unknown``), so diagnostics would read ``unknown: error``.
``user_location()`` walks the Python stack to the innermost frame outside
this package and outside the ``mlir`` bindings, and returns
``Location.file(file, line, column)`` for it: verifier, checker and
simulator messages then read ``my_kernel.py:42:9: error: ...``.
"""

import functools
import os
import sys

import mlir
import mlir.ir as ir

# This package and the MLIR bindings (generated op builders, ods helpers).
_SKIPPED_DIRS = tuple(
    os.path.realpath(d) + os.sep
    for d in [os.path.dirname(os.path.abspath(__file__)),
              *getattr(mlir, "__path__", [])])


# Every op built walks a few frames; resolving their files (realpath: a
# few lstat calls each) once per file instead of once per frame keeps the
# walk off the build profile.
@functools.lru_cache(maxsize=1024)
def _is_library_file(filename):
    if filename.startswith("<"):  # <frozen importlib...>: skip; <stdin>: user
        return filename.startswith("<frozen")
    path = os.path.realpath(filename)
    return path.startswith(_SKIPPED_DIRS) or path.endswith(os.sep + "contextlib.py")


@functools.lru_cache(maxsize=256)
def _positions(code):
    return tuple(code.co_positions())


def _column(frame):
    """1-based column of the call in ``frame`` (1 where Python has none)."""
    try:
        _, _, col, _ = _positions(frame.f_code)[frame.f_lasti // 2]
        return (col or 0) + 1
    except (AttributeError, IndexError, TypeError):
        return 1


def user_location():
    """``Location.file`` of the user's calling line, or None (no user frame,
    or no current MLIR context)."""
    frame = sys._getframe(1)
    while frame is not None and _is_library_file(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return None
    try:
        return ir.Location.file(frame.f_code.co_filename, frame.f_lineno,
                                _column(frame))
    except (RuntimeError, ValueError):  # no context in scope
        return None


def at_user_line(build):
    """Wrap an op builder function (``loc=None`` keyword) so that ops built
    without an explicit location get the user's line."""

    @functools.wraps(build)
    def wrapper(*args, loc=None, **kwargs):
        if loc is None:
            loc = user_location()
        return build(*args, loc=loc, **kwargs)

    return wrapper


class UserLine:
    """``with UserLine():`` -- ops built inside (arith, scf, nvvm, ...) get the
    user's line as their default location."""

    def __enter__(self):
        loc = user_location()
        self._loc = loc
        if loc is not None:
            loc.__enter__()
        return self

    def __exit__(self, *exc):
        if self._loc is not None:
            self._loc.__exit__(*exc)
        return False


def user_line(build):
    """Decorate a builder function so that every op it emits (nvvm, arith,
    ...) gets the user's line: notes that point at those ops (a wgmma a
    stage release must wait for, a tcgen05 op on the wrong chip) then name
    the user's code instead of ``unknown``."""

    @functools.wraps(build)
    def wrapper(*args, **kwargs):
        with UserLine():
            return build(*args, **kwargs)

    return wrapper
