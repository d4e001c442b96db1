#!/usr/bin/env node
'use strict';
// A store for shmref's process protocol (docs/protocol.md), in Node with the
// standard library only: one JSON message a line on stdin/stdout, logs on stderr.
// It plays the seed's writer and reader (ring.js, storage.js) and answers each
// request with exactly one reply; the ring's free_buf asks the oracle is_free.
// Each reply to a request on a ring or a storage carries that ring's state
// (reply.ring_state): the oracle compares it after each step without asking;
// requests may come before the replies to earlier ones (request.pipeline):
// they wait in stdin and are answered in order, as every request is; a
// free_buf may bring the ids it frees (request.free_ids): then it asks nothing.
//   node store.js [--reader-lock own|oracle]
const fs = require('fs');
const { parse, dump } = require('./json');
const { Ring, PyError, valueError, int } = require('./ring');
const { Storage } = require('./storage');

// A deliberate protocol break for tests/examples/test_js_store.py, which must see it judged
// ERROR: JS_STORE_MUTANT=put-reply-id answers every put as if it were another request.
const MUTANT = process.env.JS_STORE_MUTANT || '';
const argLock = process.argv.indexOf('--reader-lock');
const READER_LOCK = argLock > 0 ? process.argv[argLock + 1] : 'own';
if (READER_LOCK !== 'own' && READER_LOCK !== 'oracle') {
  process.stderr.write('store.js: --reader-lock is own or oracle\n');
  process.exit(2);
}
Storage.ownLock = READER_LOCK === 'own';

// ---- lines in and out (synchronous: a callback's answer is read mid-request) ----
let pending = Buffer.alloc(0);
let eof = false;
function readLine() {
  for (;;) {
    const nl = pending.indexOf(10);
    if (nl >= 0) {
      const line = pending.subarray(0, nl).toString('utf8');
      pending = pending.subarray(nl + 1);
      return line;
    }
    if (eof) return null;
    const chunk = Buffer.alloc(1 << 16);
    let n;
    try { n = fs.readSync(0, chunk, 0, chunk.length, null); } catch (e) {
      if (e.code === 'EAGAIN') { Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1); continue; }
      if (e.code === 'EOF') n = 0; else throw e;
    }
    if (n === 0) { eof = true; if (pending.length === 0) return null; pending = Buffer.concat([pending, Buffer.from('\n')]); continue; }
    pending = Buffer.concat([pending, chunk.subarray(0, n)]);
  }
}
function send(msg) {
  const b = Buffer.from(dump(msg) + '\n', 'utf8');
  let off = 0;
  while (off < b.length) {
    try { off += fs.writeSync(1, b, off, b.length - off); } catch (e) {
      if (e.code !== 'EAGAIN') throw e;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1);
    }
  }
}
const log = (s) => process.stderr.write(`js_store: ${s}\n`);

// ---- objects by id ----
const objects = new Map();
let nextId = 0;
function register(prefix, obj) { const id = `${prefix}${++nextId}`; objects.set(id, obj); return id; }
function target(req, Kind) {
  const o = objects.get(req.object);
  if (!(o instanceof Kind)) throw valueError(`no ${Kind.name.toLowerCase()} ${JSON.stringify(req.object)}`);
  return o;
}
function b64(v, what) {
  if (typeof v !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(v)) throw valueError(`${what} must be base64`);
  return Buffer.from(v, 'base64');
}

// ---- free_buf's callback: ask the oracle whether a chunk may be freed ----
function askIsFree(requestId, id, chunk) {
  send({ type: 'callback', in_reply_to: requestId, op: 'is_free', monotonic_id: id, offset: chunk.offset, length: chunk.length });
  const line = readLine();
  if (line === null) throw new PyError('EOFError', 'stdin closed during a callback');
  const ans = parse(line);
  if (ans.error) throw new PyError(ans.error.kind, ans.error.message);
  return ans.result === true;
}

const RING_OPS = {
  handle: (r) => r.handle(),
  clear: (r) => { r.clear(); return null; },
  close: (r) => { r.close(); return null; },
  get_auth_secret: (r) => r.secret().toString('base64'),
  allocate_buf: (r, q) => r.allocate(q.size),
  access_buf: (r, q) => { const c = r.access(q.address); return { monotonic_id: c.id, size: c.size, offset: c.offset, length: c.length }; },
  free_buf: (r, q) => {
    // request.free_ids: the ids the oracle's predicate frees come along; nothing to ask
    if (Array.isArray(q.free_ids)) { const free = new Set(q.free_ids.map(Number)); return r.free((id) => free.has(Number(id)), q.nbytes); }
    return r.free((id, chunk) => askIsFree(q.id, id, chunk), q.nbytes);
  },
  int2byte: (r, q) => {
    const v = int(q.integer, 'integer');
    if (v < -(2 ** 31) || v >= 2 ** 31) throw new PyError('OverflowError', 'int too big to convert');
    const b = Buffer.alloc(4); b.writeInt32LE(Number(v), 0); return b.toString('base64');
  },
  byte2int: (r, q) => {
    const b = b64(q.data, 'data');
    if (b.length === 0) return 0;
    let v = 0n;
    for (let i = b.length - 1; i >= 0; i--) v = (v << 8n) | BigInt(b[i]);
    if (b[b.length - 1] & 0x80) v -= 1n << BigInt(8 * b.length);
    return v >= Number.MIN_SAFE_INTEGER && v <= Number.MAX_SAFE_INTEGER ? Number(v) : v;
  },
  ring_state: (r) => r.state(),
  set_id_max: (r, q) => { r.ID_MAX = int(q.value, 'value', 2, 2 ** 31); return null; },
};

const STORAGE_OPS = {
  put: (s, q) => {
    if (!Array.isArray(q.data)) throw valueError('data must be a list of frames');
    return s.put(q.key, b64(q.metadata, 'metadata'), q.data.map((f) => b64(f, 'data frame')));
  },
  get: (s, q) => ({ data: s.get(q.address, q.monotonic_id, q.signature, q.key).toString('base64') }),
  get_cached: (s, q) => s.getCached(q.key),
  is_cached: (s, q) => s.isCached(q.key),
  get_signature: (s, q) => s.getSignature(q.key),
  verify_signature: (s, q) => { s.ring.open(); s.verifySignature(q.key, q.address, q.monotonic_id, q.signature); return null; },
  touch: (s, q) => { s.touch(q.key, q.address, q.monotonic_id, q.signature); return null; },
  release_touches: (s) => { s.releaseTouches(); return null; },
  free_unused: (s) => { s.freeUnused(); return null; },
  clear: (s) => { s.clear(); return null; },
  close: (s) => { s.close(); return null; },
  handle: (s) => s.handle(),
  get_begin: (s, q) => ({ read: register('read', s.getBegin(q.address, q.monotonic_id, q.signature, q.key)) }),
  get_copy: (s, q) => ({ data: s.getCopy(theRead(s, q.read, false)).toString('base64') }),
  get_end: (s, q) => { s.getEnd(theRead(s, q.read, true)); return null; },
};

function theRead(s, id, end) {
  const read = typeof id === 'string' ? objects.get(id) : undefined;
  if (!read || read.storage !== s || !s.reads.has(read)) throw valueError(`no read ${JSON.stringify(id)} in flight`);
  if (end) objects.delete(id);
  return read;
}

function handle(q) {
  switch (q.op) {
    case 'create_ring': {
      const ring = new Ring(q.data_buffer_size, q.name, q.create);
      return { ring: register('ring', ring), is_writer: ring.isWriter, handle: ring.handle() };
    }
    case 'create': {
      const ring = typeof q.ring === 'string' ? objects.get(q.ring) : undefined;
      if (!(ring instanceof Ring)) throw valueError(`ring must be a ring, not ${dump(q.ring)}`);
      ring.open();
      const s = new Storage(ring, q.max_object_size, q.n_readers, q.reader_lock);
      return { storage: register('storage', s), is_writer: s.isWriter };
    }
    case 'attach': {
      const h = q.ring_buffer_handle;
      if (!Array.isArray(h) || h.length !== 2 || typeof h[1] !== 'string') throw valueError('ring_buffer_handle must be [size, name]');
      if (q.reader_lock !== true) throw valueError('Lock must be provided for readers.');
      int(q.max_object_size, 'max_object_size', 1, 2 ** 31 - 1);
      int(q.n_readers, 'n_readers', 0, 2 ** 31 - 1);
      const ring = new Ring(h[0], h[1], false);
      let s;
      try { s = new Storage(ring, q.max_object_size, q.n_readers, q.reader_lock); } catch (e) { ring.close(); throw e; }
      return { storage: register('storage', s), ring: register('ring', ring), is_writer: s.isWriter };
    }
    default: {
      const o = objects.get(q.object);
      if (o instanceof Storage && q.op in STORAGE_OPS) return STORAGE_OPS[q.op](o, q);
      if (o instanceof Ring && q.op in RING_OPS) return RING_OPS[q.op](o, q);
      if (o === undefined) throw valueError(`no object ${JSON.stringify(q.object)}`);
      throw valueError(`${q.op} is not an operation of ${q.object}`);
    }
  }
}

// The state of the request's ring (its target, or its target's ring) after the
// request; for a constructor, of the ring its result names (or its storage's ring).
function ringStateOf(q, result) {
  const made = result && typeof result === 'object' ? (result.ring ?? result.storage) : undefined;
  const id = q.object === undefined ? made : q.object;
  const o = typeof id === 'string' ? objects.get(id) : undefined;
  if (o instanceof Ring) return o.state();
  if (o instanceof Storage) return o.ring.state();
  return undefined;
}

function closeAll() {
  for (const o of objects.values()) {
    try { if (o instanceof Storage || o instanceof Ring) o instanceof Storage ? o.close() : o.close(); } catch (e) { /* best effort */ }
  }
  objects.clear();
}
process.on('exit', closeAll);
for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(sig, () => { closeAll(); process.exit(1); });

send({
  type: 'hello', protocol: 2, name: 'js_store 0.1 (Node ' + process.version + ')', roles: ['writer', 'reader'],
  capabilities: [
    'storage.get_begin', 'storage.get_copy', 'storage.get_end',
    'ring.data_buffer_start', 'ring.data_buffer_end', 'ring.monotonic_id_start', 'ring.monotonic_id_end', 'ring.ID_MAX',
    'ring.allocate_buf', 'ring.access_buf', 'ring.free_buf', 'ring.int2byte', 'ring.byte2int', 'ring.get_auth_secret',
    'reply.ring_state', 'request.pipeline', 'request.free_ids',
  ],
  reader_lock: READER_LOCK,
});

for (;;) {
  const line = readLine();
  if (line === null) break;
  if (line.trim() === '') continue;
  let q;
  try { q = parse(line); } catch (e) { log(`not JSON: ${line.slice(0, 200)}`); continue; }
  if (!q || q.type !== 'request') { log(`not a request: ${line.slice(0, 200)}`); continue; }
  let reply;
  try {
    reply = { type: 'reply', in_reply_to: q.id, result: handle(q) ?? null };
  } catch (e) {
    const kind = e instanceof PyError ? e.kind : 'RuntimeError';
    if (!(e instanceof PyError)) log(`internal error on ${q.op}: ${e.stack}`);
    reply = { type: 'reply', in_reply_to: q.id, error: { kind, message: String(e.message) } };
  }
  const state = ringStateOf(q, reply.result);
  if (state !== undefined) reply.ring_state = state;
  if (MUTANT === 'put-reply-id' && q.op === 'put') reply.in_reply_to = q.id + 1;
  send(reply);
}
closeAll();
process.exit(0);
