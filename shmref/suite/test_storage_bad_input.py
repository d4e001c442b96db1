"""The object store's bad input: every malformed handle is a ValueError on the
reader before any read (TestBadHandles), bad puts and misuse are clear errors
that leave nothing half-done (TestBadPuts), and the validation survives
`python -O`."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import refimpl
from shmref.contract import require_serde_in_process
from shmref.suite.stores import handle_of


class TestBadHandles:
    """Every malformed handle is a ValueError on the reader, before any read."""

    @pytest.fixture
    def setup(self, store_factory, attach):
        writer = store_factory()
        reader = attach(writer)
        writer.put("k", "value")
        return writer, reader, handle_of(writer, "k")

    def check(self, reader, handle):
        with pytest.raises(ValueError):
            reader.get(*handle)

    def test_forged_signature(self, setup):
        _, reader, (a, i, sig, k) = setup
        self.check(reader, (a, i, [sig[0] ^ 1, *sig[1:]], k))

    def test_wrong_key(self, setup):
        _, reader, (a, i, sig, _k) = setup
        self.check(reader, (a, i, sig, "other"))

    @pytest.mark.parametrize(
        "sig",
        [
            None,
            [],
            list(range(31)),
            list(range(33)),
            ["1"] * 32,
            [256] * 32,
            [-1] * 32,
            bytes(32),
            [1.0] * 32,
            [True] * 32,
            "x" * 32,
        ],
    )
    def test_malformed_signatures(self, setup, sig):
        _, reader, (a, i, _sig, k) = setup
        self.check(reader, (a, i, sig, k))

    @pytest.mark.parametrize("address", [-1, 2**64, 2**70, 1.0, "0", None, True])
    def test_bad_addresses(self, setup, address):
        _, reader, (_a, i, sig, k) = setup
        self.check(reader, (address, i, sig, k))

    @pytest.mark.parametrize("monotonic_id", [-1, 2**32, 2**40, 0.0, "0", None])
    def test_bad_ids(self, setup, monotonic_id):
        _, reader, (a, _i, sig, k) = setup
        self.check(reader, (a, monotonic_id, sig, k))

    @pytest.mark.parametrize("key", [None, 1, b"k"])
    def test_bad_keys(self, setup, key):
        _, reader, (a, i, sig, _k) = setup
        self.check(reader, (a, i, sig, key))

    def test_writer_rejects_handles_not_current(self, setup):
        writer, _, (a, i, sig, k) = setup
        with pytest.raises(ValueError):
            writer.verify_signature(k, a + 1, i, sig)


class TestBadPuts:
    def test_too_large_for_max_object_size(self, store_factory):
        writer = store_factory(max_object_size=64)
        with pytest.raises(ValueError, match="exceeds max object size"):
            writer.put("k", "x" * 100)
        assert writer.ring.monotonic_id_end == 0

    def test_too_large_for_the_buffer(self, store_factory):
        writer = store_factory(buffer_size=128, max_object_size=4096)
        with pytest.raises(MemoryError):
            writer.put("k", "x" * 1000)
        assert not writer.is_cached("k")

    @pytest.mark.parametrize("value", [object(), {1, 2}, lambda: 1, [1, {"a": {2}}]])
    def test_unstorable_types_are_type_errors(self, store_factory, is_refimpl, value):
        """A value refimpl's serde refuses (naming its type) leaves nothing
        behind. The store is given refimpl's serde: what a serde refuses is
        the serde's business, what the store does then is the store's."""
        writer = store_factory(serde=refimpl.MsgpackOnlySerde)
        with pytest.raises(TypeError, match="cannot store a (object|set|function)"):
            writer.put("k", value)
        assert not writer.is_cached("k") and writer.ring.monotonic_id_end == 0

    @pytest.mark.parametrize("value", [2**64, -(2**63) - 1, [2**70]])
    def test_ints_beyond_64_bits_are_value_errors(self, store_factory, value):
        """As above: refimpl's serde refuses, the store leaves nothing behind."""
        writer = store_factory(serde=refimpl.MsgpackOnlySerde)
        with pytest.raises(ValueError, match=r"ints in \[-2\*\*63, 2\*\*64\)"):
            writer.put("k", value)
        assert not writer.is_cached("k") and writer.ring.monotonic_id_end == 0

    def test_non_str_key(self, store_factory):
        with pytest.raises(ValueError):
            store_factory().put(1, "v")

    def test_failed_put_leaves_no_half_object(self, impl, store_factory, ring_factory):
        """A serializer that lies about its sizes must not leave a chunk behind
        (the seed allocates first and then wedges every later free). Judges
        the store's own serde call: not run where the serde runs elsewhere."""
        require_serde_in_process(impl, "writer")
        honest = store_factory().handle().serde_class

        class LyingSerde:  # the serde class is a constructor argument
            lies = True

            def __init__(self):
                self.inner = honest()

            def serialize(self, value):
                data, n, md, m = self.inner.serialize(value)
                return (data, n + 3, md, m) if LyingSerde.lies else (data, n, md, m)

            def deserialize(self, data):
                return self.inner.deserialize(data)

        ring = ring_factory(1024)
        writer = impl.SingleWriterShmObjectStorage(256, 1, ring, serde_class=LyingSerde)
        with pytest.raises(ValueError):
            writer.put("k", 1)
        LyingSerde.lies = False
        writer.free_unused()  # must not raise
        assert ring.monotonic_id_start == ring.monotonic_id_end  # nothing left allocated

    def test_use_after_close(self, store_factory):
        writer = store_factory()
        writer.put("k", 1)
        writer.close()
        for call in (
            lambda: writer.put("j", 1),
            writer.free_unused,
            lambda: writer.get_signature("k"),
        ):
            with pytest.raises(ValueError, match="closed"):
                call()

    def test_reader_cannot_use_writer_operations(self, store_factory, attach):
        reader = attach(store_factory())
        for call in (
            lambda: reader.put("k", 1),
            reader.free_unused,
            lambda: reader.get_cached("k"),
            lambda: reader.get_signature("k"),
        ):
            with pytest.raises(ValueError, match="only the writer"):
                call()

    @pytest.mark.parametrize("args", [(0, 1), (-1, 1), (64, -1), (1.5, 1), (64, None)])
    def test_bad_constructor_arguments(self, impl, ring_factory, args):
        with pytest.raises(ValueError):
            impl.SingleWriterShmObjectStorage(*args, ring_factory(128))


def test_validation_survives_python_O():
    """Checks are not asserts: they hold under `python -O`."""
    script = (
        "import refimpl\n"
        "r = refimpl.SingleWriterShmRingBuffer(100, create=True)\n"
        "try:\n"
        "    for bad in (0, -8):\n"
        "        try:\n"
        "            r.allocate_buf(bad)\n"
        "        except ValueError:\n"
        "            continue\n"
        "        raise SystemExit('accepted size %r' % bad)\n"
        "finally:\n"
        "    r.close()\n"
        "print('ok')\n"
    )
    run = subprocess.run(
        [sys.executable, "-O", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=os.path.dirname(os.path.dirname(__file__)),
    )
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr


_DASH_O_HANDLES = """
import dataclasses, multiprocessing as mp, refimpl
ring = refimpl.SingleWriterShmRingBuffer(1024, create=True)
try:
    writer = refimpl.SingleWriterShmObjectStorage(256, 1, ring)
    reader = refimpl.SingleWriterShmObjectStorage.create_from_handle(
        dataclasses.replace(writer.handle(), reader_lock=mp.Lock()))
    a, i = writer.put("k", b"v")
    sig = writer.get_signature("k")
    bad = [(a, i, sig, "other"), (-1, i, sig, "k"), (a, 2**32, sig, "k"), (a, i, [True] * 32, "k"),
           (a, i, sig[:-1], "k"), (1.0, i, sig, "k"), (a, i, sig, None), (a, i, [256] * 32, "k")]
    for handle in bad:
        try:
            reader.get(*handle)
        except ValueError:
            continue
        raise SystemExit("accepted %r" % (handle,))
    for key in (1, None):
        try:
            writer.put(key, 1)
        except ValueError:
            continue
        raise SystemExit("accepted key %r" % (key,))
    reader.close()
finally:
    ring.close()
print("ok")
"""


def test_bad_handles_and_keys_are_value_errors_under_python_O() -> None:
    """The storage's checks are not asserts either (refimpl's code, run under -O)."""
    run = subprocess.run(
        [sys.executable, "-O", "-c", _DASH_O_HANDLES],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=os.path.dirname(os.path.dirname(__file__)),
    )
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr
