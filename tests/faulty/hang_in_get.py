"""A store whose reader `get` never returns."""

import threading

from _base import faulty_module

globals().update(faulty_module(__name__, lambda: threading.Event().wait()))
