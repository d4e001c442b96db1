"""A store whose reader `get` ends the process (os._exit), as a store that
calls abort() or exit() in a library does."""

import os

from _base import faulty_module

globals().update(faulty_module(__name__, lambda: os._exit(3)))
