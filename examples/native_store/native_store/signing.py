"""Handle signatures for the storage: the seed's HMAC-SHA256(secret,
sha256(key) || address || id), computed and compared in C (ns_sign.c) with
the secret the segment holds now, so that clear()'s new secret refuses
every handle signed before it (F4)."""

from __future__ import annotations

from typing import Any

from native_store.ring import SingleWriterShmRingBuffer
from refimpl.validate import SIGNATURE_BYTES, check_handle_fields, check_key

INVALID = "Invalid SHM handle signature for cache key."


class Signing:
    """get_signature and verify_signature of SingleWriterShmObjectStorage."""

    is_writer: bool
    key_index: dict[str, tuple[int, int]]
    ring_buffer: SingleWriterShmRingBuffer
    _lib: Any
    _state: Any
    _signature_out: bytearray  # C writes a writer's signatures here
    _signature_c: Any
    _signature_view: memoryview
    _signed: dict[str, tuple[int, int, int, bytes]]  # what put signed (storage.py)

    def get_signature(self, key: str) -> list[int]:
        """Sign `key`'s current handle (C: HMAC-SHA256 with the segment's secret)."""
        if not self.is_writer:
            raise ValueError("only the writer can sign handles")
        if type(key) is not str or not key.isascii():
            check_key(key)
        address, monotonic_id = self.key_index[key]
        ring = self.ring_buffer
        found = self._signed.get(key)
        if (
            found is not None
            and found[0] == address
            and found[1] == monotonic_id
            and found[2] == ring._secret_epoch
            and not ring._closed
        ):
            return list(found[3])  # put signed this handle with the secret the ring has now
        key_bytes = key.encode("utf-8")
        rc = self._lib.ns_sign(
            self._state, key_bytes, len(key_bytes), address, monotonic_id, self._signature_c
        )
        if rc:
            self.ring_buffer._fail(rc, "sign handles")
        return self._signature_view.tolist()

    def verify_signature(
        self, key: str | None, address: int, monotonic_id: int, signature: list[int] | None
    ) -> None:
        """ValueError unless the writer issued this handle for `key` (with the
        current secret; on the writer, also `key`'s current entry)."""
        key_bytes, given = self._signed_fields(key, signature)
        check_handle_fields(address, monotonic_id)
        if self.is_writer and self.key_index.get(key) != (address, monotonic_id):  # type: ignore[arg-type]
            raise ValueError(INVALID)
        rc = self._lib.ns_verify(
            self._state, key_bytes, len(key_bytes), address, monotonic_id, given
        )
        if rc == self._lib.NS_E_SIGNATURE:
            raise ValueError(INVALID)
        if rc:
            self.ring_buffer._fail(rc, "verify a signature")

    @staticmethod
    def _signed_fields(key: str | None, signature: list[int] | None) -> tuple[bytes, bytes]:
        """(key as UTF-8, signature as 32 bytes), or the ValueError refimpl raises."""
        if signature is None or key is None:
            raise ValueError("Missing SHM handle signature for cache key.")
        if type(key) is not str or not key.isascii():
            check_key(key)
        # a list of 32 ints in [0, 255]; other int-likes convert and then fail the HMAC
        if type(signature) is not list or len(signature) != SIGNATURE_BYTES:
            raise ValueError(INVALID)
        try:
            given = bytes(bytearray(signature))  # bytearray's list path is the fast one
        except (TypeError, ValueError):
            raise ValueError(INVALID) from None
        return key.encode("utf-8"), given
