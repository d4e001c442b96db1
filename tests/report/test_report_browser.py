"""conformance.html in a real browser: headless Chromium (Debian's `chromium`,
which `make setup` installs) opens the report of a failing store from the
file system, and the test checks there are no console errors or uncaught
exceptions, the failing properties' timelines and rings are drawn, the
filters and the copy button work; a screenshot is saved under build/. Without
Chromium the tests are skipped with one line.

The report is a recorded seed run (`python -m shmref.conformance --impl seed
--quick --level hardened --level protocol-safe`, tests/data/report-seed:
its conformance.json and timelines, paths made neutral), drawn afresh by
today's renderer: every failing property has a timeline.
Chromium is driven over the DevTools protocol on a pipe (fds 3 and 4): no
network, no port, no extra package.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from shmref.render import html

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "data" / "report-seed"
SCREENSHOTS = REPO / "build" / "report-browser"
BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-pipe",
)

pytestmark = pytest.mark.skipif(
    BROWSER is None, reason="not run: chromium is not installed (`make setup` installs it)"
)


class Browser:
    """One headless Chromium and one page, over the DevTools pipe."""

    def __init__(self, profile: Path) -> None:
        assert BROWSER is not None
        commands_r, self.commands = os.pipe()
        self.replies, replies_w = os.pipe()

        def on_fds_3_and_4() -> None:  # in the child: what --remote-debugging-pipe uses
            a, b = os.dup(commands_r), os.dup(replies_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.process = subprocess.Popen(
            [BROWSER, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            preexec_fn=on_fds_3_and_4,
            close_fds=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(commands_r)
        os.close(replies_w)
        self.buffer, self.next_id = b"", 0
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        attached = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})
        self.session = attached["sessionId"]
        for domain in ("Runtime", "Page", "Log"):
            self.call(f"{domain}.enable", session=True)

    def call(self, method: str, params: dict[str, Any] | None = None, session: bool = False) -> Any:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        os.write(self.commands, json.dumps(message).encode() + b"\0")
        reply = self.read_until(lambda m: m.get("id") == self.next_id, 30)
        if reply is None or "error" in reply:
            raise AssertionError(f"{method}: {reply and reply.get('error')}")
        return reply.get("result", {})

    def read_until(self, done: Any, seconds: float) -> dict[str, Any] | None:
        end = time.monotonic() + seconds
        while True:
            while b"\0" in self.buffer:
                raw, self.buffer = self.buffer.split(b"\0", 1)
                message = json.loads(raw)
                if "method" in message:
                    self.events.append(message)
                if done(message):
                    return message
            ready, _, _ = select.select([self.replies], [], [], max(end - time.monotonic(), 0))
            if not ready:
                return None
            chunk = os.read(self.replies, 1 << 16)
            if not chunk:
                return None
            self.buffer += chunk

    def open(self, url: str) -> None:
        self.call("Page.navigate", {"url": url}, session=True)
        loaded = self.read_until(lambda m: m.get("method") == "Page.loadEventFired", 30)
        assert loaded is not None, f"{url} did not load"

    def js(self, expression: str) -> Any:
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            session=True,
        )
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def problems(self) -> list[str]:
        """Console errors and warnings, uncaught exceptions, failed loads."""
        self.read_until(lambda m: False, 0.3)
        found = []
        for event in self.events:
            params = event.get("params", {})
            if event["method"] == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                found.append(
                    f"uncaught: {details.get('exception', {}).get('description', details)}"
                )
            elif event["method"] == "Runtime.consoleAPICalled" and params["type"] in (
                "error",
                "warning",
                "assert",
            ):
                found.append(f"console.{params['type']}: {params['args']}")
            elif event["method"] == "Log.entryAdded" and params["entry"]["level"] == "error":
                found.append(f"log: {params['entry'].get('text')}")
        return found

    def screenshot(self, path: Path, width: int = 1400, height: int = 1800) -> None:
        """What a reader sees in a window of `width` x `height` at the current scroll."""
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=True,
        )
        shot = self.call("Page.captureScreenshot", {"format": "png"}, session=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (AssertionError, OSError):
            pass
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self.commands)
        os.close(self.replies)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One Chromium for the module (it takes seconds to start); each test
    starts on a blank page with no events."""
    opened = Browser(tmp_path_factory.mktemp("chromium") / "profile")
    yield opened
    opened.close()


@pytest.fixture(autouse=True)
def blank(browser: Browser) -> None:
    browser.open("about:blank")
    browser.events.clear()


@pytest.fixture()
def page(tmp_path: Path) -> Path:
    out = tmp_path / "report"
    shutil.copytree(FIXTURE, out)
    written = html.write_report(out, quiet=True)
    assert written is not None
    return written


VISIBLE_ROWS = "[...document.querySelectorAll('tbody tr')].filter(r => !r.hidden)"


def test_the_report_opens_offline_draws_its_failures_and_filters(
    browser: Browser, page: Path
) -> None:
    browser.open(page.as_uri())
    assert browser.js("document.body.dataset.ready") == "yes"  # the script ran to its end
    assert browser.problems() == []
    report = json.loads((FIXTURE / "conformance.json").read_text())
    checks = [c for level in report["levels"].values() for c in level["checks"]]
    failing = [c for c in checks if c["status"] in ("FAIL", "ERROR", "CRASH", "TIMEOUT")]
    assert browser.js("document.querySelectorAll('tbody tr').length") == len(checks)
    # the failing properties' timelines and rings, drawn with a size
    drawn = browser.js(
        "[...document.querySelectorAll('details.failure svg.timeline')].map(s => "
        "[s.closest('details').querySelector('code').textContent, "
        "s.getBoundingClientRect().height, s.querySelectorAll('.ring .chunk').length, "
        "s.querySelectorAll('.diverged').length])"
    )
    names = {name for name, *_ in drawn}
    assert {c["name"] for c in failing} <= names  # every failing property is drawn
    with_chunks = {name for name, _h, chunks, _m in drawn if chunks > 0}
    assert {
        "hazard MCDoubleRead",
        "trace validation",
        "test_stateful.py::test_store_machine[fixed]",
        "test_ring.py::TestBadInput::test_more_live_chunks_than_ids",  # a test's own calls
    } <= with_chunks
    first = browser.js(
        "(() => { const s = document.querySelector('details.failure[open] svg.timeline');"
        " return s ? s.getBoundingClientRect().height : 0; })()"
    )
    assert first > 100  # the first failure is open and its picture has a size
    assert all(height > 100 and marked == 1 for _name, height, _c, marked in drawn)
    # filters: failing only, then one level off, then all again
    browser.js("document.getElementById('only-failing').click()")
    statuses = browser.js(f"{VISIBLE_ROWS}.map(r => r.dataset.status)")
    assert len(statuses) == len(failing) and set(statuses) <= {"FAIL", "ERROR", "CRASH", "TIMEOUT"}
    browser.js("document.querySelector('input[data-kind=level][value=hardened]').click()")
    levels = browser.js(f"{VISIBLE_ROWS}.map(r => r.dataset.level)")
    assert levels and set(levels) == {"protocol-safe"}
    assert browser.js("document.getElementById('shown').textContent").startswith(
        f"{len(levels)} of"
    )
    browser.js("document.getElementById('show-all').click()")
    browser.js("document.querySelector('input[data-kind=level][value=hardened]').click()")
    assert browser.js(f"{VISIBLE_ROWS}.length") == len(checks)
    # a filter from the address: #status=assumption
    browser.js("location.hash = 'status=assumption'")  # a filter changed by the address
    assert browser.js(f"{VISIBLE_ROWS}.map(r => r.dataset.status)") == ["assumption"]
    browser.open("about:blank")
    browser.open(page.as_uri() + "#level=protocol-safe&status=FAIL")  # ... or given with it
    rows = browser.js(f"{VISIBLE_ROWS}.map(r => r.dataset.level + ' ' + r.dataset.status)")
    assert rows and set(rows) == {"protocol-safe FAIL"}
    # the copy button
    browser.js("document.querySelector('button.copy').click()")
    browser.read_until(lambda m: False, 0.5)
    assert browser.js("document.querySelector('button.copy').textContent") == "copied"
    assert browser.problems() == []
    browser.open("about:blank")
    browser.open(page.as_uri())
    browser.screenshot(SCREENSHOTS / "conformance-seed.png")
    browser.js(
        "document.getElementById('only-failing').click();"
        "document.querySelector('details.failure[open]').open = false;"
        "const d = [...document.querySelectorAll('details.failure')]"
        ".find(d => d.querySelector('code').textContent === 'hazard MCDoubleRead');"
        "d.open = true; d.scrollIntoView();"
    )
    browser.screenshot(SCREENSHOTS / "conformance-seed-failing.png")


def test_the_check_catches_a_page_with_a_script_error(browser: Browser, page: Path) -> None:
    """The broken input: the same page with a script that throws."""
    text = page.read_text()
    page.write_text(text.replace("<script>", "<script>undefinedCall();</script><script>", 1))
    browser.open(page.as_uri())
    problems = browser.problems()
    assert len(problems) == 1 and "undefinedCall" in problems[0]


def test_the_check_catches_a_page_whose_script_never_finished(browser: Browser, page: Path) -> None:
    text = page.read_text()
    page.write_text(text.replace('"use strict";', '"use strict"; return;', 1))
    browser.open(page.as_uri())
    assert browser.js("document.body.dataset.ready") is None


NEW_FAILURE = "test_ring.py::TestBadInput::test_more_live_chunks_than_ids"  # drawn
FIXED = "hazard MCDoubleRead"


@pytest.fixture()
def judged_page(tmp_path: Path) -> Path:
    """The seed's report as a store's that its expectations file judged: it
    lists every failure but NEW_FAILURE, and FIXED, which this store passes
    (not the seed's result)."""
    from shmref.core.levels import BAD
    from shmref.oracle.expectations import parse
    from shmref.oracle.verdict import Check

    out = tmp_path / "report"
    shutil.copytree(FIXTURE, out)
    report = json.loads((out / "conformance.json").read_text())
    checks = [c for level in report["levels"].values() for c in level["checks"]]
    listed = [c["name"] for c in checks if c["status"] in BAD and c["name"] != NEW_FAILURE]
    for check in checks:
        if check["name"] == FIXED:
            check.update(status="pass", failures=[], detail="closed")
    text = "version = 1\n" + "".join(
        f'[[expected]]\nproperty = "{name}"\nstatus = "FAIL"\n' for name in listed
    )
    expect = parse(text, "store.toml")
    report["expectations"] = expect.summary([Check(**c) for c in checks])
    (out / "conformance.json").write_text(json.dumps(report))
    written = html.write_report(out, quiet=True)
    assert written is not None
    return written


def test_the_page_leads_with_what_differs_and_marks_expected_failures(
    browser: Browser, judged_page: Path
) -> None:
    browser.open(judged_page.as_uri())
    assert browser.js("document.body.dataset.ready") == "yes" and browser.problems() == []
    leading = browser.js("[...document.querySelectorAll('ul.differs li')].map(l => l.dataset.name)")
    assert leading == [NEW_FAILURE, FIXED]  # the surprises, in level order
    why = browser.js("[...document.querySelectorAll('ul.differs .why')].map(w => w.textContent)")
    assert why == ["new failure", "unexpected pass"]
    above = browser.js(
        "document.querySelector('ul.differs').getBoundingClientRect().top < "
        "document.querySelector('table.grid').getBoundingClientRect().top"
    )
    assert above  # before the grid
    rows = browser.js(
        "[...document.querySelectorAll('tbody tr')].map(r => "
        "[r.querySelector('code').textContent, r.dataset.status, r.dataset.expected])"
    )
    assert [name for name, _s, _m in rows[:2]] == leading  # the grid leads with them too
    marks = {name: mark for name, _s, mark in rows}
    assert marks[NEW_FAILURE] == "unexpected" and marks[FIXED] == ""
    failing = [name for name, status, _m in rows if status == "FAIL"]
    assert {marks[name] for name in failing if name != NEW_FAILURE} == {"expected"}
    opened = browser.js("document.querySelector('details.failure[open] code').textContent")
    assert opened == NEW_FAILURE  # the first failure drawn and open is the new one
    assert "2 properties not as expected" in browser.js(
        "document.querySelector('p.sub').textContent"
    )
    browser.screenshot(SCREENSHOTS / "conformance-judged.png")
