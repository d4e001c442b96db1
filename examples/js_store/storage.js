'use strict';
// The storage on a ring: object [4-byte read count][metadata][data]. The writer
// keeps key -> (address, id), id -> key, hand-outs per id and the touched ids; a
// read is counted in the segment under the readers' lock. Handles are signed with
// HMAC-SHA256(secret, sha256(key) || address (8 bytes LE) || id (4 bytes LE)).
const crypto = require('crypto');
const { PyError, valueError, int, SECRET } = require('./ring');

const COUNT = 4;
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?:[^\ud800-\udbff]|^)[\udc00-\udfff]/;

function checkKey(key) {
  if (typeof key !== 'string') throw valueError('key must be a str');
  if (LONE_SURROGATE.test(key)) throw valueError('key cannot be encoded as UTF-8');
  return key;
}

class Storage {
  constructor(ring, maxObjectSize, nReaders, readerLock) {
    this.maxObjectSize = int(maxObjectSize, 'max_object_size', 1, 2 ** 31 - 1);
    this.nReaders = int(nReaders, 'n_readers', 0, 2 ** 31 - 1);
    this.ring = ring;
    this.isWriter = ring.isWriter;
    this.hasLock = readerLock === true;
    if (!this.isWriter && !this.hasLock) throw valueError('Lock must be provided for readers.');
    this.keyIndex = new Map(); // key -> [address, id]
    this.idIndex = new Map(); // id -> key
    this.writerFlag = new Map(); // id -> hand-outs
    this.touched = new Set();
    this.reads = new Set(); // reads begun and not ended
    this.closed = false;
  }

  writerOnly(what) {
    if (!this.isWriter) throw valueError(`only the writer can ${what}`);
  }

  put(key, metadata, frames) {
    this.writerOnly('put');
    checkKey(key);
    if (this.keyIndex.has(key)) throw valueError(`Key '${key}' already exists in the storage.`);
    const size = COUNT + metadata.length + frames.reduce((s, f) => s + f.length, 0);
    if (size > this.maxObjectSize) {
      throw valueError(`Serialized object size (${size} bytes) exceeds max object size (${this.maxObjectSize} bytes)`);
    }
    let handle;
    try {
      handle = this.ring.allocate(size);
    } catch (e) {
      if (!(e instanceof PyError) || e.kind !== 'MemoryError') throw e;
      this.freeUnused();
      handle = this.ring.allocate(size);
    }
    const [address, id] = handle;
    const chunk = this.ring.access(address);
    this.ring.write(chunk.offset, Buffer.concat([Buffer.alloc(COUNT), metadata, ...frames]));
    this.writerFlag.set(id, (this.writerFlag.get(id) || 0) + 1);
    this.keyIndex.set(key, [address, id]);
    this.idIndex.set(id, key);
    return [address, id];
  }

  signature(key, address, id) {
    const payload = Buffer.alloc(44);
    crypto.createHash('sha256').update(Buffer.from(key, 'utf8')).digest().copy(payload, 0);
    payload.writeBigUInt64LE(BigInt(address), 32);
    payload.writeUInt32LE(Number(id), 40);
    return crypto.createHmac('sha256', this.ring.secret()).update(payload).digest();
  }

  verifySignature(key, address, id, signature) {
    if (this.isWriter) {
      const cur = typeof key === 'string' ? this.keyIndex.get(key) : undefined;
      if (!cur || cur[0] !== address || cur[1] !== id) throw valueError('Invalid SHM handle signature for cache key.');
    }
    if (signature === null || key === null) throw valueError('Missing SHM handle signature for cache key.');
    if (!Array.isArray(signature) || signature.length !== 32 || typeof key !== 'string'
        || signature.some((b) => typeof b !== 'number' || b < 0 || b > 255)) {
      throw valueError('Invalid SHM handle signature for cache key.');
    }
    checkKey(key);
    int(address, 'address', 0, 2n ** 64n - 1n);
    int(id, 'monotonic_id', 0, 2n ** 32n - 1n);
    const expected = this.signature(key, address, id);
    if (!crypto.timingSafeEqual(Buffer.from(signature), expected)) {
      throw valueError('Invalid SHM handle signature for cache key.');
    }
  }

  /** The chunk at address if its header still carries id, else the seed's ValueError. */
  chunkOf(address, id) {
    int(id, 'monotonic_id');
    const chunk = this.ring.access(address);
    if (chunk.id !== id) throw valueError(`Data for address:id '${address}:${id}' has been modified or is invalid.`);
    if (chunk.length < COUNT) throw valueError(`Data for address:id '${address}:${id}' has been modified or is invalid.`);
    return chunk;
  }

  getBegin(address, id, signature, key) {
    this.ring.open();
    if (!this.isWriter) this.verifySignature(key, address, id, signature);
    const chunk = this.chunkOf(address, id);
    const read = { storage: this, address, id, chunk };
    this.reads.add(read);
    return read;
  }

  getCopy(read) {
    this.ring.open();
    const c = read.chunk;
    return this.ring.read(c.offset + COUNT, c.length - COUNT);
  }

  /** Count the read (under the readers' lock), after checking that the chunk is still the one begun. */
  getEnd(read) {
    this.reads.delete(read);
    this.ring.open();
    if (!this.hasLock) return; // a writer without the readers' lock counts nothing
    const c = read.chunk;
    const lock = Storage.ownLock ? this.ring.lock : { acquire() {}, release() {} }; // "oracle": the caller's lock is held around the request
    lock.acquire();
    try {
      const now = this.ring.access(read.address);
      if (now.id !== read.id || now.size !== c.size) {
        throw valueError(`Data for address:id '${read.address}:${read.id}' has been modified or is invalid.`);
      }
      const b = this.ring.read(c.offset, COUNT);
      b.writeInt32LE((b.readInt32LE(0) + 1) | 0, 0);
      this.ring.write(c.offset, b);
    } finally {
      lock.release();
    }
  }

  get(address, id, signature, key) {
    const read = this.getBegin(address, id, signature, key);
    let data;
    try { data = this.getCopy(read); } catch (e) { this.reads.delete(read); throw e; }
    this.getEnd(read);
    return data;
  }

  isCached(key) { this.writerOnly('is_cached'); return this.keyIndex.has(checkKey(key)); }

  lookup(key) {
    this.writerOnly('a key lookup');
    const h = this.keyIndex.get(checkKey(key));
    if (!h) throw new PyError('KeyError', JSON.stringify(key));
    return h;
  }

  getCached(key) {
    const [address, id] = this.lookup(key);
    this.writerFlag.set(id, (this.writerFlag.get(id) || 0) + 1);
    this.touched.delete(id);
    return [address, id];
  }

  getSignature(key) {
    const [address, id] = this.lookup(key);
    return Array.from(this.signature(key, address, id));
  }

  touch(key, address, id, signature) {
    if (!this.hasLock) {
      this.writerOnly('touch without the readers\' lock');
      const h = this.keyIndex.get(checkKey(key));
      if (h) this.touched.add(h[1]);
      return;
    }
    this.ring.open();
    this.verifySignature(key, address, id, signature);
    this.chunkOf(address, id);
  }

  releaseTouches() { this.writerOnly('release_touches'); this.touched.clear(); }

  isFree(id, chunk) {
    if (this.touched.has(id)) return false;
    const count = this.ring.read(chunk.offset, COUNT).readInt32LE(0);
    return count >= (this.writerFlag.get(id) || 0) * this.nReaders;
  }

  freeUnused() {
    this.writerOnly('free_unused');
    const freed = this.ring.free((id, chunk) => this.isFree(id, chunk), 2 * this.maxObjectSize);
    for (const id of freed) {
      this.keyIndex.delete(this.idIndex.get(id));
      this.idIndex.delete(id);
      this.writerFlag.delete(id);
    }
  }

  clear() {
    if (!this.isWriter) return; // a reader's clear does nothing, as the seed's
    // The secret stays: a handle from before the clear reads its own object until
    // its address is reused; the ring rotates it when the ids come back (F4's fence).
    this.ring.clear();
    this.keyIndex.clear(); this.idIndex.clear(); this.writerFlag.clear(); this.touched.clear();
  }

  close() {
    this.reads.clear();
    this.closed = true;
    this.ring.close();
  }

  handle() {
    return { max_object_size: this.maxObjectSize, n_readers: this.nReaders, ring_buffer_handle: this.ring.handle() };
  }
}

Storage.ownLock = true; // hello's reader_lock: "own" (store.js sets it)

module.exports = { Storage };
