"""The ring buffer: the seed docstring's four scenarios as its code behaves,
the allocation arithmetic, and bad input."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from decimal import Decimal
from fractions import Fraction

import pytest

from shmref.store.observe import Segment

ALWAYS = lambda _id, _buf: True  # noqa: E731
NEVER = lambda _id, _buf: False  # noqa: E731


def free_ids(ring, ids: set[int], nbytes: int | None = None) -> list[int]:
    return list(ring.free_buf(lambda i, _buf: i in ids, nbytes))


def test_scenario_1_linear_allocation(ring_factory):
    ring = ring_factory(100)
    assert (ring.data_buffer_start, ring.data_buffer_end) == (0, 0)
    assert ring.allocate_buf(20) == (0, 0)
    assert ring.data_buffer_end == 28  # the 8-byte header counts
    assert ring.allocate_buf(30) == (28, 1)
    assert (ring.data_buffer_start, ring.data_buffer_end) == (0, 66)
    with ring.access_buf(28) as (view, (chunk_id, size)):
        assert (chunk_id, size, len(view)) == (1, 38, 30)  # stored size includes header


def test_scenario_2_reclamation_resets_to_zero(ring_factory):
    """The docstring draws start=end=66 after both frees; the code resets to 0."""
    ring = ring_factory(100)
    ring.allocate_buf(20)
    ring.allocate_buf(30)
    assert free_ids(ring, {0}) == [0]
    assert (ring.data_buffer_start, ring.data_buffer_end) == (28, 66)
    assert free_ids(ring, {1}) == [1]
    assert (ring.data_buffer_start, ring.data_buffer_end) == (0, 0)
    assert (ring.monotonic_id_start, ring.monotonic_id_end) == (2, 2)


def test_scenario_3_after_reset_allocation_starts_at_zero(ring_factory):
    """From Scenario 2's end state the code places id 2 at 0, not at 100."""
    ring = ring_factory(100)
    ring.allocate_buf(20)
    ring.allocate_buf(30)
    free_ids(ring, {0, 1})
    assert ring.allocate_buf(40) == (0, 2)
    assert (ring.data_buffer_start, ring.data_buffer_end) == (0, 48)


def wrapped_ring(ring_factory):
    """Reach the docstring's Scenario 3 picture (start 66, end 148) the way
    the code can: a live chunk keeps the ring from resetting."""
    ring = ring_factory(100)
    ring.allocate_buf(20)  # id 0 at 0..28
    ring.allocate_buf(30)  # id 1 at 28..66
    free_ids(ring, {0})
    ring.allocate_buf(20)  # id 2 at 66..94
    free_ids(ring, {1})
    assert (ring.data_buffer_start, ring.data_buffer_end) == (66, 94)
    assert ring.allocate_buf(40) == (100, 3)  # 94 + 48 > 100: next lap
    assert (ring.data_buffer_start, ring.data_buffer_end) == (66, 148)
    return ring


def test_scenario_3_wraparound_to_next_lap(ring_factory):
    ring = wrapped_ring(ring_factory)
    with ring.access_buf(100) as (_, (chunk_id, size)):
        assert (chunk_id, size) == (3, 48)
    with ring.access_buf(0) as (_, (chunk_id, _size)):
        assert chunk_id == 3  # virtual 100 is physical 0


def test_address_of_a_far_lap_reads_the_same_chunk(ring_factory):
    """An address names its cell modulo the buffer size however many laps on:
    a store that indexes its mapping with the address unreduced reads far
    outside it (and dies there: this property's CRASH)."""
    ring = wrapped_ring(ring_factory)
    with ring.access_buf(100 + 10**9 * 100) as (_, (chunk_id, size)):
        assert (chunk_id, size) == (3, 48)


def test_scenario_4_out_of_space(ring_factory):
    ring = wrapped_ring(ring_factory)
    with pytest.raises(MemoryError, match="Not enough space"):
        ring.allocate_buf(20)  # 148 + 28 - 66 > 100
    assert (ring.data_buffer_start, ring.data_buffer_end) == (66, 148)


def test_lap_correction_brings_start_back(ring_factory):
    ring = wrapped_ring(ring_factory)
    assert free_ids(ring, {2}) == [2]
    assert (ring.data_buffer_start, ring.data_buffer_end) == (0, 48)


def test_free_stops_at_first_busy_chunk_fifo(ring_factory):
    ring = ring_factory(200)
    for _ in range(4):
        ring.allocate_buf(10)
    assert free_ids(ring, {0, 2, 3}) == [0]  # 1 is busy: 2 and 3 wait behind it
    assert ring.monotonic_id_start == 1
    assert free_ids(ring, {1, 2, 3}) == [1, 2, 3]


def test_free_stops_after_nbytes(ring_factory):
    ring = ring_factory(200)
    for _ in range(4):
        ring.allocate_buf(10)  # 18-byte chunks
    assert list(ring.free_buf(ALWAYS, 19)) == [0, 1]
    assert list(ring.free_buf(NEVER)) == []


def test_ids_wrap_and_freed_ids_follow(ring_factory):
    ring = ring_factory(400, id_max=4)
    got = []
    for _ in range(10):
        got.append(ring.allocate_buf(8)[1])
        got_freed = list(ring.free_buf(ALWAYS))
        assert got_freed == [got[-1]]
    assert got == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]


def test_freed_ids_across_the_wrap(ring_factory):
    ring = ring_factory(400, id_max=4)
    ring.allocate_buf(8)
    ring.allocate_buf(8)
    list(ring.free_buf(ALWAYS))  # ids 0, 1 gone; next is 2
    for _ in range(3):
        ring.allocate_buf(8)  # ids 2, 3, 0
    assert list(ring.free_buf(ALWAYS)) == [2, 3, 0]


def test_clear_keeps_ids_increasing(ring_factory):
    ring = ring_factory(100)
    ring.allocate_buf(20)
    ring.allocate_buf(20)
    ring.clear()
    assert (ring.data_buffer_start, ring.data_buffer_end) == (0, 0)
    assert ring.monotonic_id_start == ring.monotonic_id_end == 2
    assert ring.allocate_buf(10) == (0, 2)


def test_secret_is_random(ring_factory):
    """Each writer ring signs with its own 32-byte secret (get_auth_secret)."""
    a, b = ring_factory(64), ring_factory(64)
    assert len(a.get_auth_secret()) == 32
    assert a.get_auth_secret() != b.get_auth_secret()


def test_secret_at_segment_start(ring_factory):
    """Seed-layout: the secret is the segment's first 32 bytes, where the
    seed's readers look for it (read from the segment, not an attribute)."""
    ring = ring_factory(64)
    with Segment(ring.handle()) as segment:
        assert segment.secret() == ring.get_auth_secret()


def test_int_roundtrip(ring_factory):
    """int2byte and byte2int are inverse on the 4-byte signed range."""
    ring = ring_factory(64)
    for value in (0, 1, -2, 2**31 - 1, -(2**31)):
        assert ring.byte2int(ring.int2byte(value)) == value


def test_int_encoding_is_little_endian_signed(ring_factory):
    """Seed-layout: the segment's integers (headers, read counts) are the
    seed's 4-byte little-endian signed ones."""
    ring = ring_factory(64)
    assert ring.int2byte(1) == b"\x01\x00\x00\x00"
    assert ring.int2byte(-2) == b"\xfe\xff\xff\xff"


def test_reader_sees_writer_chunks(impl, ring_factory):
    ring = ring_factory(128)
    address, chunk_id = ring.allocate_buf(16)
    with ring.access_buf(address) as (view, _):
        view[:4] = b"abcd"
    reader = impl.SingleWriterShmRingBuffer(*ring.handle())
    try:
        with reader.access_buf(address) as (view, (rid, size)):
            assert (rid, size, bytes(view[:4])) == (chunk_id, 24, b"abcd")
        assert reader.get_auth_secret() == ring.get_auth_secret()
    finally:
        reader.close()


def test_a_size_of_zero_is_refused(ring_factory):
    """The seed refuses an empty chunk (by an assertion; a ValueError is the
    hardened level's): nothing is allocated, so the next chunk is (0, 0)."""
    if sys.flags.optimize:
        pytest.skip("python -O: the seed's own refusal of size 0 is an assertion")
    ring = ring_factory(100)
    with pytest.raises(Exception):  # noqa: B017 - any refusal
        ring.allocate_buf(0)
    assert ring.allocate_buf(8) == (0, 0)


class TestBadInput:
    """Clear exceptions, never a crash or a silent wrong state."""

    @pytest.mark.parametrize("size", [0, -1, -8])
    def test_non_positive_sizes(self, ring_factory, size):
        ring = ring_factory(100)
        with pytest.raises(ValueError):
            ring.allocate_buf(size)
        assert ring.data_buffer_end == 0 and ring.monotonic_id_end == 0

    @pytest.mark.parametrize("size", [1.5, "8", None, True])
    def test_non_int_sizes(self, ring_factory, size):
        with pytest.raises(ValueError):
            ring_factory(100).allocate_buf(size)

    def test_larger_than_buffer(self, ring_factory):
        with pytest.raises(MemoryError):
            ring_factory(100).allocate_buf(93)  # 93 + 8 > 100

    def test_exactly_the_buffer(self, ring_factory):
        assert ring_factory(100).allocate_buf(92) == (0, 0)

    @pytest.mark.parametrize("address", [-1, 1.0, "0", None])
    def test_bad_addresses(self, ring_factory, address):
        ring = ring_factory(100)
        ring.allocate_buf(10)
        with pytest.raises(ValueError):
            with ring.access_buf(address):
                pass

    def test_address_without_a_chunk(self, ring_factory):
        ring = ring_factory(100)
        with pytest.raises(ValueError, match="no valid chunk"):
            with ring.access_buf(50):  # zeroed memory: size 0
                pass

    def test_reader_cannot_write(self, impl, ring_factory):
        ring = ring_factory(100)
        reader = impl.SingleWriterShmRingBuffer(*ring.handle())
        try:
            for call in (
                lambda: reader.allocate_buf(8),
                reader.clear,
                lambda: reader.free_buf(ALWAYS),
            ):
                with pytest.raises(ValueError, match="only the writer"):
                    call()
        finally:
            reader.close()

    def test_use_after_close(self, impl):
        ring = impl.SingleWriterShmRingBuffer(100, create=True)
        ring.close()
        ring.close()  # idempotent
        for call in (
            lambda: ring.allocate_buf(8),
            ring.get_auth_secret,
            lambda: list(ring.free_buf(ALWAYS)),
        ):
            with pytest.raises(ValueError, match="closed"):
                call()

    def test_attach_to_missing_segment(self, impl):
        with pytest.raises(FileNotFoundError):
            impl.SingleWriterShmRingBuffer(100, name="shmref-no-such-segment")

    def test_attach_with_larger_size_than_segment(self, impl, ring_factory):
        ring = ring_factory(100)
        with pytest.raises(ValueError, match="less than"):
            impl.SingleWriterShmRingBuffer(100_000, name=ring.handle()[1])

    @pytest.mark.parametrize("size", [0, -5, 8, 2.0])
    def test_bad_buffer_sizes(self, impl, size):
        with pytest.raises(ValueError):
            impl.SingleWriterShmRingBuffer(size, create=True)

    def test_more_live_chunks_than_ids(self, ring_factory):
        """The seed silently overwrites metadata here; refimpl refuses."""
        ring = ring_factory(400, id_max=4)
        for _ in range(3):
            ring.allocate_buf(8)
        with pytest.raises(MemoryError, match="ids are live"):
            ring.allocate_buf(8)
        assert list(ring.free_buf(ALWAYS)) == [0, 1, 2]


class TestBoundary:
    """refimpl's one validation place (refimpl/validate.py), issue 19."""

    @pytest.fixture(autouse=True)
    def only_refimpl(self, is_refimpl):
        if not is_refimpl:
            pytest.skip("refimpl's validation (the seed raises struct.error or accepts these)")

    @pytest.mark.parametrize("address", [93, 99, 199, 100 * 7 + 95])
    def test_header_past_the_end_is_a_value_error(self, ring_factory, address):
        ring = ring_factory(100)  # a header at 93..99 would end past byte 100
        with pytest.raises(ValueError, match="past the 100-byte buffer"):
            ring.read_header(address)
        with pytest.raises(ValueError, match="past the 100-byte buffer"):
            with ring.access_buf(address):
                pass

    @pytest.mark.parametrize("look_alike", [Fraction(0), 0.0, Decimal(0), 0j, False])
    def test_numbers_equal_to_an_int_are_not_ints(self, impl, ring_factory, look_alike):
        ring = ring_factory(100)
        ring.allocate_buf(8)
        for call in (
            lambda: ring.read_header(look_alike),
            lambda: ring.access_buf(look_alike).__enter__(),
            lambda: ring.allocate_buf(look_alike),
        ):
            with pytest.raises(TypeError) as caught:
                call()
            assert isinstance(caught.value, ValueError)  # the seed's documented type too

    @pytest.mark.parametrize("value", [2**31, -(2**31) - 1])
    def test_int2byte_out_of_range(self, ring_factory, value):
        with pytest.raises(ValueError, match="integer"):
            ring_factory(100).int2byte(value)

    def test_bad_segment_names(self, impl):
        for name in ("", "a/b", "x\0y", "\ud800", "z" * 300):
            with pytest.raises(ValueError, match="segment name"):
                impl.SingleWriterShmRingBuffer(64, name=name)
        with pytest.raises(TypeError):
            impl.SingleWriterShmRingBuffer(64, name=b"bytes")


def run_python(script: str) -> subprocess.CompletedProcess[str]:
    """Run `script`; stderr also collects what this process's resource tracker prints."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )


def test_close_after_a_failed_init_is_silent(is_refimpl):
    """Class-level defaults: __del__ of a half-built ring must neither raise nor print."""
    if not is_refimpl:
        pytest.skip("refimpl's class-level defaults")
    run = run_python("""
        import gc, refimpl
        for args in [(64.0,), (64, "shmref-no-such-segment"), (64, None, False), (2, None, True)]:
            try:
                refimpl.SingleWriterShmRingBuffer(*args)
            except Exception:
                pass
        ring = refimpl.SingleWriterShmRingBuffer.__new__(refimpl.SingleWriterShmRingBuffer)
        ring.close()
        del ring
        gc.collect()
        print("done")
    """)
    assert (run.stdout.strip(), run.stderr) == ("done", "")


READER_IN_WRITER_PROCESS = """
    from multiprocessing import resource_tracker, shared_memory
    import refimpl
    writer = refimpl.SingleWriterShmRingBuffer(64, create=True)
    {attach}
    writer.close()
    print("done")
"""


def test_attached_readers_leave_the_resource_tracker_alone(is_refimpl):
    """A reader in the writer's process must not make the tracker complain or
    forget the writer's segment; the naive alternative (attach, then
    `resource_tracker.unregister`) makes it print a KeyError at the writer's unlink."""
    if not is_refimpl:
        pytest.skip("refimpl's untracked attach")
    ours = run_python(
        READER_IN_WRITER_PROCESS.format(
            attach="refimpl.SingleWriterShmRingBuffer(*writer.handle()).close()"
        )
    )
    assert (ours.stdout.strip(), ours.stderr) == ("done", "")
    naive = run_python(
        READER_IN_WRITER_PROCESS.format(
            attach=(
                "m = shared_memory.SharedMemory(writer.handle()[1]); "
                "resource_tracker.unregister('/' + m.name, 'shared_memory'); m.close()"
            )
        )
    )
    assert "KeyError" in naive.stderr
