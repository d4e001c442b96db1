"""A store whose reader `get` dies by SIGSEGV, as a buggy native store does."""

import ctypes

from _base import faulty_module

globals().update(faulty_module(__name__, lambda: ctypes.string_at(0)))
