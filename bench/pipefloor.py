"""What a JSON-lines exchange between two Python processes costs when
nothing else happens: the floor under any Python store program behind the
process protocol, whatever the oracle or the program do besides.

A client writes `k` requests (`is_cached`, as the oracle writes them), then
reads their `k` replies; the server reads each line, parses it and answers
with a reply that carries a ring state (`reply.ring_state`). k=1 is a round
trip per request; larger k is what `request.pipeline` allows. CPU time is
counted on both sides, the server's from its own rusage.

Given a run's traffic (its report's `traffic`: requests and round trips),
it also says what that traffic costs at the floor: every round trip at
k=1's price, every other request at k=8's. Issue 49 weighed that against
the CPU that 1.5x a module's run leaves for the protocol.

    python -m bench.pipefloor [--requests N] [--traffic REQUESTS ROUND_TRIPS]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import select
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from shmref.core.tables import text

SERVER = r"""
import json, resource, sys
out = sys.stdout
state = {"data_buffer_start": 0, "data_buffer_end": 48, "monotonic_id_start": 3,
         "monotonic_id_end": 4, "ID_MAX": 5}
for line in sys.stdin:
    request = json.loads(line)
    out.write(json.dumps({"type": "reply", "in_reply_to": request["id"], "result": True,
                          "ring_state": state}) + "\n")
    out.flush()
usage = resource.getrusage(resource.RUSAGE_SELF)
print(usage.ru_utime + usage.ru_stime, file=sys.stderr)
"""
WINDOWS = (1, 8, 64)  # requests written before their replies are read
PIPELINED = 8  # the window a request sent ahead is priced at


@dataclass(frozen=True)
class Floor:
    """Per request, in microseconds: wall time, and CPU on each side."""

    window: int
    wall_us: float
    client_us: float
    server_us: float

    @property
    def both_us(self) -> float:
        return self.client_us + self.server_us


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(window: int, requests: int) -> Floor:
    """`requests` exchanged `window` at a time with a fresh server."""
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
    )
    assert server.stdin is not None and server.stdout is not None and server.stderr is not None
    fd, pending, rid = server.stdout.fileno(), bytearray(), 0
    rounds = max(1, requests // window)
    started, cpu = time.perf_counter(), cpu_seconds()
    for _ in range(rounds):
        lines = []
        for _ in range(window):
            rid += 1
            request = {"type": "request", "id": rid, "op": "is_cached", "object": "s1", "key": "a"}
            lines.append(json.dumps(request) + "\n")
        server.stdin.write("".join(lines).encode())
        read = 0
        while read < window:
            end = pending.find(b"\n")
            if end < 0:
                select.select([fd], [], [], 10.0)
                pending += os.read(fd, 1 << 16)
                continue
            json.loads(bytes(pending[:end]))
            del pending[: end + 1]
            read += 1
    wall, client = time.perf_counter() - started, cpu_seconds() - cpu
    server.stdin.close()
    server.wait(timeout=30)
    served = float(server.stderr.read() or 0)
    n = rounds * window
    return Floor(window, 1e6 * wall / n, 1e6 * client / n, 1e6 * served / n)


def traffic_cost(floors: dict[int, Floor], requests: int, round_trips: int) -> float:
    """CPU seconds a run's traffic costs at the floor."""
    ahead = max(0, requests - round_trips)
    return (round_trips * floors[1].both_us + ahead * floors[PIPELINED].both_us) / 1e6


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pipefloor", description=__doc__)
    parser.add_argument("--requests", type=int, default=40_000, help="per window size")
    parser.add_argument(
        "--traffic",
        type=int,
        nargs=2,
        metavar=("REQUESTS", "ROUND_TRIPS"),
        help="a run's traffic (its report's), priced at the floor",
    )
    args = parser.parse_args(argv)
    if args.requests < 64 or (args.traffic and min(args.traffic) < 0):
        parser.error("--requests takes at least 64; --traffic two counts of 0 or more")
    floors = {k: measure(k, args.requests) for k in WINDOWS}
    rows = [
        (k, f"{f.wall_us:.1f}", f"{f.client_us:.1f}", f"{f.server_us:.1f}", f"{f.both_us:.1f}")
        for k, f in floors.items()
    ]
    print(text(("requests per write", "wall µs", "client CPU µs", "server CPU µs", "both"), rows))
    if args.traffic:
        requests, round_trips = args.traffic
        cost = traffic_cost(floors, requests, round_trips)
        print(
            f"\n{requests:,} requests in {round_trips:,} round trips cost {cost:.1f} CPU s "
            f"at the floor (round trips at 1 per write, the rest at {PIPELINED})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
