"""The CI scripts run under `set -o pipefail`: a reader that stops early
(`head`, `grep -q`) makes the writer die of SIGPIPE, and the step fails at
random (exit 141), as a landing once did on `grep ... | head -3`."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EARLY_EXIT = re.compile(r"\|\s*(head\b|grep\s+(-\w+\s+)*-\w*q)")


def early_exit_pipes(script: str) -> list[str]:
    """Lines of a pipefail script whose pipeline ends in a reader that exits early."""
    if "pipefail" not in script:
        return []
    return [
        line.strip()
        for line in script.splitlines()
        if not line.lstrip().startswith("#") and EARLY_EXIT.search(line.split(" #")[0])
    ]


def test_no_ci_script_pipes_into_a_reader_that_exits_early() -> None:
    found = {
        path.name: early_exit_pipes(path.read_text())
        for path in sorted((ROOT / ".ci").iterdir())
        if path.is_file()
    }
    assert not {name: lines for name, lines in found.items() if lines}


def test_the_check_catches_the_pipe_that_broke_a_landing() -> None:
    broken = 'set -euo pipefail\ngrep -E "^FAILED" log | head -3\nmake help | grep -q lint\n'
    assert early_exit_pipes(broken) == [
        'grep -E "^FAILED" log | head -3',
        "make help | grep -q lint",
    ]
    assert early_exit_pipes(broken.replace("pipefail", "")) == []


def test_what_make_ci_leaves_to_the_wheels_run_is_run_there() -> None:
    """`make ci` deselects from `make test` the suite's tests that the wheel
    check's full oracle run of refimpl runs (Makefile, IN_WHEEL_RUN): each
    prefix names tests of a level group (the oracle runs every group of a
    full run), and the wheel check makes that full run (no --quick)."""
    from shmref.core.suitegroups import TEST_GROUPS, group_of

    makefile = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    listed = re.search(r"^IN_WHEEL_RUN = (.*)$", makefile, re.M)
    assert listed is not None
    prefixes = listed.group(1).split()
    assert prefixes and all(p.startswith("shmref/suite/") and p.endswith("[") for p in prefixes)
    for prefix in prefixes:
        node = prefix.split("shmref/suite/", 1)[1] + "seed]"
        assert group_of(node, TEST_GROUPS) is not None, node
    assert "SUITE_IN_WHEEL_RUN=1" in makefile
    script = " ".join((ROOT / ".ci" / "wheel-check").read_text().replace("\\\n", " ").split())
    full = re.search(r'"\$py" -m shmref\.conformance --impl refimpl (--out [^|]*)\|', script)
    assert full is not None and "--quick" not in full.group(1), "the wheel's run is not full"
    # a broken input: a checker's own self-test is in no group, so it may not be listed
    self_test = "test_stateful.py::test_state_machine_catches_injected_bugs[x]"
    assert group_of(self_test, TEST_GROUPS) is None
