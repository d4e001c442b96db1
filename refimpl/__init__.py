"""shmref's reference implementation of vLLM's shared-memory object store.

Drop-in compatible with ``vllm.distributed.device_communicators.shm_object_storage``:
same classes, signatures, byte layout and handle signatures.
"""

from refimpl.ring import SingleWriterShmRingBuffer
from refimpl.serde import MsgpackSerde, ObjectSerde
from refimpl.storage import ShmObjectStorageHandle, SingleWriterShmObjectStorage

__all__ = [
    "MsgpackSerde",
    "ObjectSerde",
    "ShmObjectStorageHandle",
    "SingleWriterShmObjectStorage",
    "SingleWriterShmRingBuffer",
]
