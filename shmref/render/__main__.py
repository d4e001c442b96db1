"""`python -m shmref.render DIR`: (re)write a report folder's conformance.html."""

import sys

from shmref.render.html import main

sys.exit(main())
