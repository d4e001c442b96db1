"""`python -m shmref.render DIR`: (re)write a report folder's conformance.html."""

import sys

from shmref.core.extras import require_oracle_extra

require_oracle_extra()  # jinja2 comes with shmref[oracle]: one line, exit 2, without it

from shmref.render.html import main  # noqa: E402

sys.exit(main())
