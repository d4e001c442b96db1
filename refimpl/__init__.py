"""shmref's reference implementation of vLLM's shared-memory object store.

Drop-in compatible with ``vllm.distributed.device_communicators.shm_object_storage``:
same classes, signatures, byte layout and handle signatures. Its errors are
exact (refimpl.validate) and it handles a killed reader or writer and a full
/dev/shm (refimpl.readerlock, refimpl.segment).
"""

from refimpl.readerlock import ReaderLockTimeout
from refimpl.ring import SingleWriterShmRingBuffer
from refimpl.serde import MsgpackOnlySerde, MsgpackSerde, ObjectSerde
from refimpl.storage import ShmObjectStorageHandle, SingleWriterShmObjectStorage

__all__ = [
    "MsgpackOnlySerde",
    "MsgpackSerde",
    "ObjectSerde",
    "ReaderLockTimeout",
    "ShmObjectStorageHandle",
    "SingleWriterShmObjectStorage",
    "SingleWriterShmRingBuffer",
]
