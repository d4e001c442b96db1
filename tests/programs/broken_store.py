"""Store programs that break the process protocol (docs/protocol.md), each in
one way, for tests/process/test_process.py: the reference program (refimpl behind
shmref.process.serve) with one fault.

    python3 broken_store.py MODE [N]
      exit       exits at once, before its hello
      garbage    prints a line that is not JSON for its Nth request (default 3)
      silent     never answers its Nth request
      wrong_id   answers its Nth request with another request's id
      schema     answers its Nth request with a reply that has no result
      abort      os.abort() on its Nth get
      lying_state     offers reply.ring_state and carries a wrong one (data_buffer_end + 16)
      bad_state       offers reply.ring_state and carries one with a field that is no integer
      unoffered_state carries ring_state without offering reply.ring_state
      lie_then_abort  as lying_state, and os.abort() on its Nth allocate_buf
      stateless       offers reply.ring_state and request.pipeline, carries no ring_state
      keeps_free_ids  offers request.free_ids and frees nothing a free_buf's ids name
      quiet_constructors  carries ring_state in every reply but a constructor's
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import refimpl
from shmref.process.serve import Server


class Broken(Server):
    def __init__(self, mode: str, nth: int) -> None:
        super().__init__(refimpl, ["writer", "reader"], sys.stdout, sys.stdin)
        self.mode, self.nth, self.requests, self.gets = mode, nth, 0, 0
        self.constructing = False  # the request being answered is a constructor

    def ring_state_of(self, target: Any) -> dict[str, int] | None:
        state = Server.ring_state_of(self, target)
        if self.mode == "stateless":
            return None
        if state is not None and self.mode in ("lying_state", "lie_then_abort"):
            state["data_buffer_end"] += 16  # one unit of the replay's ring
        if state is not None and self.mode == "bad_state":
            state["ID_MAX"] = str(state["ID_MAX"])  # type: ignore[assignment]
        return state

    def send(self, message: dict[str, Any]) -> None:
        if self.mode == "quiet_constructors" and self.constructing:
            message = {k: v for k, v in message.items() if k != "ring_state"}
        if message.get("type") == "hello" and self.mode == "unoffered_state":
            unoffered = ("reply.ring_state", "request.pipeline")  # the second needs the first
            caps = [c for c in message["capabilities"] if c not in unoffered]
            message = {**message, "capabilities": caps}  # and carries it all the same
        if message.get("type") == "reply":
            self.requests += 1
            if self.requests == self.nth:
                if self.mode == "garbage":
                    self.out.write("panic: the store is confused\n")
                    self.out.flush()
                    return
                if self.mode == "silent":
                    time.sleep(3600)
                if self.mode == "wrong_id":
                    message = {**message, "in_reply_to": message["in_reply_to"] + 7}
                if self.mode == "schema":
                    message = {"type": "reply", "in_reply_to": message["in_reply_to"]}
        super().send(message)

    def handle(self, op: str, raw: dict[str, Any], a: dict[str, Any]) -> Any:
        self.constructing = op in ("create_ring", "create", "attach")
        if op == "get" and self.mode == "abort":
            self.gets += 1
            if self.gets == self.nth:
                os.abort()
        if op == "allocate_buf" and self.mode == "lie_then_abort":
            self.gets += 1
            if self.gets == self.nth:
                os.abort()
        if op == "free_buf" and self.mode == "keeps_free_ids" and "free_ids" in raw:
            raw = {**raw, "free_ids": []}
        return super().handle(op, raw, a)


if __name__ == "__main__":
    if sys.argv[1] == "exit":
        print("broken_store: exiting at once", file=sys.stderr)
        sys.exit(3)
    sys.stdout, out = sys.stderr, sys.stdout
    server = Broken(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3)
    server.out = out
    server.run()
