'use strict';
// The ring: a POSIX shared-memory segment [32-byte secret][chunks], chunk
// [4-byte id][4-byte size incl. the 8-byte header][data], integers little-endian
// and signed (the seed's layout, so the seed's Python readers can share it).
// Node has no shm_open/mmap without an addon: on Linux a POSIX segment is the file
// /dev/shm/NAME, so we open it there and pread/pwrite at offsets (the page cache
// keeps every process's view coherent). A real implementation would mmap it.
const fs = require('fs');
const os = require('os');
const path = require('path');
const crypto = require('crypto');

const SHM_DIR = '/dev/shm';
const SECRET = 32;
const MD_SIZE = 8;

class PyError extends Error {
  constructor(kind, message) { super(message); this.kind = kind; }
}
const valueError = (m) => new PyError('ValueError', m);

/** An integer argument (not a bool, not a float), within [lo, hi]; a Number back. */
function int(v, what, lo = -Infinity, hi = Infinity) {
  if (typeof v !== 'number' && typeof v !== 'bigint') throw valueError(`${what} must be an int`);
  if (v < lo || v > hi) throw valueError(`${what} out of range: ${v}`);
  return typeof v === 'bigint' && v >= Number.MIN_SAFE_INTEGER && v <= Number.MAX_SAFE_INTEGER ? Number(v) : v;
}

function sleepMs(ms) { Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms); }

function osError(e) {
  const kind = { ENOENT: 'FileNotFoundError', EEXIST: 'FileExistsError', EACCES: 'PermissionError' }[e.code] || 'OSError';
  return new PyError(kind, `${e.code}: ${e.message}`);
}

/**
 * The readers' own lock ("reader_lock": "own"): a lock file made with O_EXCL beside
 * the segment's name in the temp folder, spun on. It holds our pid so that a lock
 * left by a killed process is broken.
 */
class FileLock {
  constructor(name) { this.path = path.join(os.tmpdir(), `shmref-js-${name}.lock`); }
  acquire() {
    const t0 = Date.now();
    for (let spin = 0; ; spin++) {
      try {
        const fd = fs.openSync(this.path, 'wx', 0o600);
        fs.writeSync(fd, String(process.pid));
        fs.closeSync(fd);
        return;
      } catch (e) {
        if (e.code !== 'EEXIST') throw osError(e);
      }
      if (Date.now() - t0 > 1000) this.breakIfStale();
      if (spin > 50) sleepMs(1);
    }
  }
  breakIfStale() {
    let pid = 0;
    try { pid = Number(fs.readFileSync(this.path, 'utf8')); } catch (e) { return; }
    if (!pid) return;
    try { process.kill(pid, 0); } catch (e) {
      if (e.code === 'ESRCH') { try { fs.unlinkSync(this.path); } catch (e2) { /* gone */ } }
    }
  }
  release() { try { fs.unlinkSync(this.path); } catch (e) { /* already gone */ } }
}

class Ring {
  /** create_ring: a writer makes the segment (and its secret), a reader opens it. */
  constructor(dataBufferSize, name, create) {
    if (typeof create !== 'boolean') throw valueError('create must be a bool');
    this.size = int(dataBufferSize, 'data_buffer_size', MD_SIZE + 1, 2 ** 40);
    if (name !== null && (typeof name !== 'string' || name === '' || name.replace(/^\/+/, '').includes('/'))) {
      throw valueError(`bad segment name: ${JSON.stringify(name)}`);
    }
    this.isWriter = create;
    this.ID_MAX = 2 ** 31;
    this.idStart = 0; this.idEnd = 0; this.bufStart = 0; this.bufEnd = 0;
    this.metadata = new Map(); // id -> address (writer only)
    this.closed = false;
    if (create) {
      this.name = name === null ? `psm_js${crypto.randomBytes(4).toString('hex')}` : name.replace(/^\/+/, '');
      try { this.fd = fs.openSync(this.file(), 'wx+', 0o600); } catch (e) { throw osError(e); }
      try {
        fs.ftruncateSync(this.fd, this.size + SECRET);
        this.write(0, crypto.randomBytes(SECRET));
      } catch (e) {
        fs.closeSync(this.fd); fs.unlinkSync(this.file());
        throw osError(e);
      }
    } else {
      if (name === null) throw valueError('a reader needs the segment name');
      this.name = name.replace(/^\/+/, '');
      try { this.fd = fs.openSync(this.file(), 'r+'); } catch (e) { throw osError(e); }
      if (fs.fstatSync(this.fd).size < this.size + SECRET) {
        fs.closeSync(this.fd);
        throw valueError(`segment ${this.name} holds less than ${this.size} + ${SECRET} bytes`);
      }
    }
    this.lock = new FileLock(this.name);
  }
  file() { return path.join(SHM_DIR, this.name); }
  open() { if (this.closed) throw valueError('the ring is closed'); }
  writer(what) { this.open(); if (!this.isWriter) throw valueError(`only the writer can ${what}`); }
  read(off, len) {
    const b = Buffer.alloc(Math.max(0, len));
    if (len > 0) fs.readSync(this.fd, b, 0, len, off);
    return b;
  }
  write(off, buf) { if (buf.length) fs.writeSync(this.fd, buf, 0, buf.length, off); }
  handle() { return [this.size, this.name]; }
  secret() { this.open(); return this.read(0, SECRET); }

  close() {
    if (this.closed) return;
    this.closed = true;
    if (this.isWriter) { try { fs.unlinkSync(this.file()); } catch (e) { /* already gone */ } }
    fs.closeSync(this.fd);
  }

  clear() {
    this.writer('clear the ring');
    // F4's fence: the oldest id forgotten here; allocate rotates the secret before
    // issuing it again, so no handle signed before the clear can name its new chunk.
    if (this.metadata.size > 0 && this.rotateAt === undefined) this.rotateAt = this.idStart;
    this.metadata.clear();
    this.idStart = this.idEnd; // ids keep increasing across a clear
    this.bufStart = 0; this.bufEnd = 0;
  }

  allocate(size) {
    this.writer('allocate buffers');
    size = int(size, 'size', 1, 2 ** 31 - 1 - MD_SIZE) + MD_SIZE;
    if (this.metadata.size >= this.ID_MAX - 1) throw new PyError('MemoryError', `all ${this.ID_MAX - 1} ids are live: no free monotonic id`);
    let end = this.bufEnd;
    if ((end % this.size) + size > this.size) end = (Math.floor(end / this.size) + 1) * this.size; // next lap
    if (end + size - this.bufStart > this.size) {
      throw new PyError('MemoryError', 'Not enough space in the data buffer');
    }
    this.bufEnd = end;
    if (this.idEnd === this.rotateAt) { this.write(0, crypto.randomBytes(SECRET)); this.rotateAt = undefined; }
    const hdr = Buffer.alloc(MD_SIZE);
    hdr.writeInt32LE(this.idEnd, 0); hdr.writeInt32LE(size, 4);
    this.write(SECRET + (end % this.size), hdr);
    const id = this.idEnd;
    this.metadata.set(id, end);
    this.bufEnd = end + size;
    this.idEnd = (this.idEnd + 1) % this.ID_MAX;
    return [end, id];
  }

  /** Where a chunk's header and data lie: {id, size, offset, length} (offset from the segment's start). */
  access(address) {
    this.open();
    address = int(address, 'address', 0, 2n ** 64n - 1n);
    const idx = typeof address === 'bigint' ? Number(address % BigInt(this.size)) : address % this.size;
    const phys = SECRET + idx;
    const hdr = this.read(phys, MD_SIZE);
    const id = hdr.readInt32LE(0); const size = hdr.readInt32LE(4);
    if (size < MD_SIZE || phys + size > SECRET + this.size) throw valueError(`no valid chunk at address ${address}`);
    return { id, size, offset: phys + MD_SIZE, length: size - MD_SIZE };
  }

  /** free_buf: oldest first while isFree(id, chunk) says so and fewer than nbytes are freed. */
  free(isFree, nbytes) {
    this.writer('free buffers');
    nbytes = nbytes === null ? this.size : int(nbytes, 'nbytes');
    const freed = [];
    let freedBytes = 0;
    while (this.metadata.has(this.idStart) && freedBytes < nbytes) {
      const chunk = this.access(this.metadata.get(this.idStart));
      if (!isFree(this.idStart, chunk)) break;
      this.metadata.delete(this.idStart);
      freed.push(this.idStart);
      this.idStart = (this.idStart + 1) % this.ID_MAX;
      if (this.metadata.has(this.idStart)) {
        const next = this.metadata.get(this.idStart);
        this.bufStart += (((next - this.bufStart) % this.size) + this.size) % this.size;
      } else {
        this.bufStart = 0; this.bufEnd = 0; // empty: back to the start
      }
      freedBytes += chunk.size;
    }
    if (this.bufStart >= this.size) { this.bufStart -= this.size; this.bufEnd -= this.size; }
    return freed;
  }

  state() {
    return {
      data_buffer_start: this.bufStart, data_buffer_end: this.bufEnd,
      monotonic_id_start: this.idStart, monotonic_id_end: this.idEnd, ID_MAX: this.ID_MAX,
    };
  }
}

module.exports = { Ring, PyError, valueError, int, SECRET, MD_SIZE };
