"""What the writer gives readers: the storage's handle (everything a reader
process needs to attach) and each object's signed handle.

An object's handle is ``(key, address, monotonic_id)``, signed with HMAC-SHA256
under the secret at the start of the segment (`SingleWriterShmRingBuffer.
get_auth_secret`), byte for byte as the seed signs it, so that a reader can
refuse a handle the writer never issued before it dereferences the address.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from multiprocessing.synchronize import Lock as LockType

from refimpl.serde import ObjectSerde


@dataclass
class ShmObjectStorageHandle:
    """Everything a reader process needs to attach to a writer's storage."""

    max_object_size: int
    n_readers: int
    ring_buffer_handle: tuple[int, str]
    serde_class: type[ObjectSerde]
    reader_lock: LockType | None


HANDLE_FIELDS = ("max_object_size", "n_readers", "ring_buffer_handle", "serde_class", "reader_lock")


def sign(secret: bytes, key: str, address: int, monotonic_id: int) -> bytes:
    """The 32-byte signature of the handle ``(key, address, monotonic_id)``."""
    message = (
        hashlib.sha256(key.encode("utf-8")).digest()
        + address.to_bytes(8, "little", signed=False)
        + monotonic_id.to_bytes(4, "little", signed=False)
    )
    return hmac.digest(secret, message, "sha256")
