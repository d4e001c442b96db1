"""A store that behaves exactly as the seed, on a segment laid out otherwise.

The seed's classes (through shmref.seed.port) with three byte-level changes a
native store might make, none visible through the API (the same addresses,
ids, sizes, values and exceptions as the seed):

- the 32-byte secret at the END of the segment, after a 32-byte zero gap
  (the data starts at byte 0): `[data][32-byte gap][secret]`;
- every integer in the segment big-endian: chunk headers and read counts
  (and so `int2byte`/`byte2int`, the seed's helpers for those bytes);
- hence the seed's readers cannot use this store's segment, nor it theirs.

The oracle must give it the seed's verdict on every property outside the
seed-layout level, and fail seed-layout (tests/oracle/test_layout_claim.py).
"""

from _seedtext import edit, load_into, port_source

GAP = 32

load_into(
    globals(),
    edit(
        port_source(),
        [
            (
                "self._port_DATA_OFFSET = self._port_AUTH_SECRET_BYTES",
                f"self._port_DATA_OFFSET = 0\n        self._port_SECRET_AT = "
                f"self._port_data_buffer_size + {GAP}",
                1,
            ),
            (
                "self._port_data_buffer_size + self._port_DATA_OFFSET",
                "self._port_SECRET_AT + self._port_AUTH_SECRET_BYTES",
                2,
            ),
            (
                "buf[:self._port_AUTH_SECRET_BYTES]",
                "buf[self._port_SECRET_AT:self._port_SECRET_AT + self._port_AUTH_SECRET_BYTES]",
                2,
            ),
            (
                "to_bytes(self._port_ID_NBYTES, 'little', signed=True)",
                "to_bytes(self._port_ID_NBYTES, 'big', signed=True)",
                1,
            ),
            (
                "int.from_bytes(byte_data, 'little', signed=True)",
                "int.from_bytes(byte_data, 'big', signed=True)",
                1,
            ),
            (
                "int.from_bytes(buf[0:4], 'little', signed=True)",
                "int.from_bytes(buf[0:4], 'big', signed=True)",
                1,
            ),
        ],
    ),
)
