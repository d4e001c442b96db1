/* native_store's core: the ring allocator, chunk headers, read counts and
 * the copies, over a shared-memory mapping that Python creates and passes in.
 *
 * Segment layout (our own, not the seed's):
 *   [64-byte control block: magic, layout version, capacity]
 *   [data area: capacity bytes, starting on a cache line (offset 64)]
 *   [32-byte signing secret, on the next cache line after the data]
 * A chunk keeps the seed's geometry (an 8-byte header counted in its size,
 * so every address the API returns is the seed's), but its header is one
 * 64-bit word: size in the low half, id in the high half, read and written
 * whole. An object is [4-byte read count][serde bytes]; the count is a
 * C11 atomic where it is aligned (the reader lock serializes it anyway).
 *
 * Every address, id and size from Python is checked here against the
 * mapping before it is dereferenced: a bad one is an error code, never a
 * crash. Mutants (build.py) are this file compiled with one NS_MUT_* flag.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ns_ring.h"

#define NS_MAGIC 0x31304d48534e544eULL /* "NTNSHM01" little-endian */
#define NS_VERSION 1u

typedef struct {
    uint64_t magic;
    uint32_t version, reserved;
    uint64_t capacity;
} ns_control;

static uint64_t round_up(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

uint64_t ns_segment_bytes(uint64_t capacity) {
    return NS_DATA_OFFSET + round_up(capacity, 64) + 64;
}

static uint64_t secret_offset(const ns_ring *r) {
    return NS_DATA_OFFSET + round_up(r->capacity, 64);
}

int ns_init(ns_ring *r, uint8_t *base, uint64_t map_len, uint64_t capacity, int is_writer) {
    memset(r, 0, sizeof *r);
    if (capacity < NS_HEADER + 1 || capacity > NS_MAX_CAPACITY) return NS_E_RANGE;
    if (map_len < ns_segment_bytes(capacity)) return NS_E_LAYOUT;
    ns_control *control = (ns_control *)base;
    if (is_writer) {
        control->magic = NS_MAGIC;
        control->version = NS_VERSION;
        control->capacity = capacity;
    } else if (control->magic != NS_MAGIC || control->version != NS_VERSION ||
               control->capacity < capacity) {
        return NS_E_LAYOUT;
    }
    r->base = base;
    r->map_len = map_len;
    r->capacity = capacity;
    r->is_writer = is_writer;
    r->id_max = NS_ID_LIMIT;
    return NS_OK;
}

void ns_detach(ns_ring *r) {
    r->base = NULL;
    free(r->live);
    r->live = NULL;
    r->live_len = r->live_cap = r->live_head = 0;
}

#define LIVE(r) ((r)->base == NULL ? NS_E_CLOSED : NS_OK)
#define WRITER(r) ((r)->base == NULL ? NS_E_CLOSED : !(r)->is_writer ? NS_E_NOT_WRITER : NS_OK)

int ns_secret(ns_ring *r, uint8_t *out) {
    if (r->base == NULL) return NS_E_CLOSED;
    memcpy(out, r->base + secret_offset(r), NS_SECRET);
    return NS_OK;
}

int ns_set_secret(ns_ring *r, const uint8_t *secret) {
    int rc = WRITER(r);
    if (rc) return rc;
    memcpy(r->base + secret_offset(r), secret, NS_SECRET);
    return NS_OK;
}

int ns_set_id_max(ns_ring *r, uint64_t id_max) {
    if (id_max < 2 || id_max > NS_ID_LIMIT) return NS_E_RANGE;
    r->id_max = (uint32_t)id_max;
    return NS_OK;
}

/* -- headers --------------------------------------------------------------- */

static void write_header(ns_ring *r, uint64_t offset, uint32_t id, uint32_t size) {
    uint64_t word = (uint64_t)id << 32 | size;
    memcpy(r->base + NS_DATA_OFFSET + offset, &word, sizeof word);
}

/* The chunk at `address`: its id, its size (header included) and where its
 * data starts in the mapping; NS_E_NO_CHUNK when no header fits there. */
int ns_chunk(ns_ring *r, uint64_t address, ns_span *out) {
    if (r->base == NULL) return NS_E_CLOSED;
#ifdef NS_MUT_UNCHECKED_ADDRESS
    uint64_t offset = address; /* the mutant trusts the address: no modulo, no bound */
#else
    uint64_t offset = address % r->capacity;
    if (offset > r->capacity - NS_HEADER) return NS_E_NO_CHUNK;
#endif
    uint64_t word;
    memcpy(&word, r->base + NS_DATA_OFFSET + offset, sizeof word);
    out->id = (uint32_t)(word >> 32);
    out->size = (uint32_t)word;
#ifndef NS_MUT_UNCHECKED_ADDRESS
    if (out->size < NS_HEADER || out->size > r->capacity - offset) return NS_E_NO_CHUNK;
#endif
    out->data_at = NS_DATA_OFFSET + offset + NS_HEADER;
    return NS_OK;
}

/* -- the live chunks, oldest first (writer only) ----------------------------- */

static ns_chunk_info *live_at(ns_ring *r, uint64_t i) {
    return &r->live[(r->live_head + i) % r->live_cap];
}

static int live_push(ns_ring *r, ns_chunk_info info) {
    if (r->live_len == r->live_cap) {
        uint64_t cap = r->live_cap ? 2 * r->live_cap : 64;
        ns_chunk_info *grown = malloc(cap * sizeof *grown);
        if (grown == NULL) return NS_E_OOM;
        for (uint64_t i = 0; i < r->live_len; i++) grown[i] = *live_at(r, i);
        free(r->live);
        r->live = grown;
        r->live_cap = cap;
        r->live_head = 0;
    }
    r->live_len++;
    *live_at(r, r->live_len - 1) = info;
    return NS_OK;
}

/* The live chunk with id `id`: live ids are consecutive from id_start. */
static ns_chunk_info *live_by_id(ns_ring *r, uint32_t id) {
    if (id >= r->id_max) return NULL;
    uint64_t i = ((uint64_t)id + r->id_max - r->id_start) % r->id_max;
    return i < r->live_len ? live_at(r, i) : NULL;
}

/* -- allocator --------------------------------------------------------------- */

int ns_allocate(ns_ring *r, uint64_t size, uint64_t *address, uint32_t *id) {
    int rc = WRITER(r);
    if (rc) return rc;
    if (size < 1 || size > NS_MAX_CHUNK - NS_HEADER) return NS_E_RANGE;
    uint64_t total = size + NS_HEADER, cap = r->capacity, at = r->end;
#ifdef NS_MUT_LAP_OFF_BY_ONE
    if (r->end % cap + total >= cap) at = (r->end / cap + 1) * cap;
#else
    if (r->end % cap + total > cap) at = (r->end / cap + 1) * cap;
#endif
    if (at + total - r->start > cap) return NS_E_NOMEM;
    if (r->live_len >= (uint64_t)r->id_max - 1) return NS_E_IDS;
    ns_chunk_info info = {at, r->id_end, (uint32_t)total, 0, 0};
    if ((rc = live_push(r, info))) return rc;
    write_header(r, at % cap, r->id_end, (uint32_t)total);
    *address = at;
    *id = r->id_end;
    r->end = at + total;
    r->id_end = (r->id_end + 1) % r->id_max;
    return NS_OK;
}

int ns_oldest(ns_ring *r, uint32_t *id, uint64_t *address) {
    int rc = WRITER(r);
    if (rc) return rc;
    if (r->live_len == 0) return NS_E_EMPTY;
    *id = r->id_start;
    *address = live_at(r, 0)->address;
    return NS_OK;
}

/* Reclaim the oldest chunk; returns its size. start moves to the next live
 * chunk's physical place (possibly into the next lap), or both reset to 0. */
uint64_t ns_pop_oldest(ns_ring *r) {
    if (r->base == NULL || !r->is_writer || r->live_len == 0) return 0;
    uint32_t size = live_at(r, 0)->size;
    r->live_head = (r->live_head + 1) % r->live_cap;
    r->live_len--;
    r->id_start = (r->id_start + 1) % r->id_max;
    if (r->live_len == 0) {
        r->start = r->end = 0;
    } else {
        uint64_t next = live_at(r, 0)->address, cap = r->capacity;
        r->start += ((next % cap) + cap - (r->start % cap)) % cap;
    }
    return size;
}

void ns_lap_correct(ns_ring *r) {
    if (r->start >= r->capacity) {
        r->start -= r->capacity;
        r->end -= r->capacity;
    }
}

int ns_clear(ns_ring *r, const uint8_t *secret) {
    int rc = ns_set_secret(r, secret);
    if (rc) return rc;
    r->live_len = r->live_head = 0;
    r->id_start = r->id_end;
    r->start = r->end = 0;
    return NS_OK;
}

/* -- objects: [4-byte read count][serde bytes] ------------------------------- */

static uint32_t *count_at(ns_ring *r, uint64_t data_at) { return (uint32_t *)(r->base + data_at); }

static uint32_t load_count(ns_ring *r, uint64_t data_at) {
    uint32_t *p = count_at(r, data_at);
    if (((uintptr_t)p & 3) == 0) return atomic_load_explicit((_Atomic uint32_t *)p, memory_order_acquire);
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Whether the glue must hold the readers' lock around ns_end (it always does,
 * but for the racy_count mutant, which models a lock-free read whose
 * increment is not atomic). */
#ifdef NS_MUT_RACY_COUNT
static const int NS_READS_LOCKED = 0;
#else
static const int NS_READS_LOCKED = 1;
#endif

static void add_count(ns_ring *r, uint64_t data_at) {
    uint32_t *p = count_at(r, data_at);
#ifdef NS_MUT_RACY_COUNT
    uint32_t v;
    memcpy(&v, p, 4); /* load ... */
    for (volatile int spin = 0; spin < 200000; spin++) {
    } /* ... another reader's increment lands here and is lost ... */
    v++;
    memcpy(p, &v, 4); /* ... store */
#else
    if (((uintptr_t)p & 3) == 0) {
        atomic_fetch_add_explicit((_Atomic uint32_t *)p, 1u, memory_order_acq_rel);
    } else { /* unaligned: no C11 atomic; the reader lock serializes it */
        uint32_t v;
        memcpy(&v, p, 4);
        v++;
        memcpy(p, &v, 4);
    }
#endif
}

/* A fresh object in the chunk just allocated at `address`: count 0, then
 * the serde's metadata and data, each copied once from Python's buffers. */
int ns_write_object(ns_ring *r, uint64_t address, uint32_t id, const char *md, uint64_t md_len,
                    const char *data, uint64_t data_len) {
    int rc = WRITER(r);
    if (rc) return rc;
    ns_span chunk;
    if ((rc = ns_chunk(r, address, &chunk))) return rc;
    if (chunk.id != id) return NS_E_STALE;
    uint64_t size = chunk.size, data_at = chunk.data_at;
    if (md_len > size || data_len > size || NS_HEADER + NS_COUNT + md_len + data_len != size)
        return NS_E_RANGE;
    memset(r->base + data_at, 0, NS_COUNT);
    memcpy(r->base + data_at + NS_COUNT, md, md_len);
    memcpy(r->base + data_at + NS_COUNT + md_len, data, data_len);
    return NS_OK;
}

/* A read's first step: the chunk at `address` must carry `id`. */
int ns_open(ns_ring *r, uint64_t address, uint32_t id, ns_span *out) {
    int rc = ns_chunk(r, address, out);
    if (rc) return rc;
#ifdef NS_MUT_STALE_ACCEPTED
    (void)id;
#else
    if (out->id != id) return NS_E_STALE;
#endif
    if (out->size < NS_HEADER + NS_COUNT) return NS_E_NO_CHUNK;
    return NS_OK;
}

/* A read's last step, under the reader lock: the header must still be the
 * one opened (same id and size), then the read is counted. A failed copy
 * is counted too, so that one bad read does not pin the chunk. */
int ns_end(ns_ring *r, uint64_t address, uint32_t id, uint32_t size, int copied_ok) {
    ns_span now;
    int rc = ns_open(r, address, id, &now);
    if (rc) return rc == NS_E_NO_CHUNK ? NS_E_STALE : rc;
    if (now.size != size) return NS_E_STALE;
#ifdef NS_MUT_FAILED_COPY_UNCOUNTED
    if (!copied_ok) return NS_OK;
#else
    (void)copied_ok;
#endif
    add_count(r, now.data_at);
    return NS_OK;
}

/* put's C half in one call: allocate, write the object, count the hand-out.
 * NS_E_NOMEM / NS_E_IDS leave everything as it was (the caller frees and retries). */
int ns_put(ns_ring *r, uint64_t size, const char *md, uint64_t md_len, const char *data,
           uint64_t data_len, uint64_t *address, uint32_t *id) {
    int rc = ns_allocate(r, size, address, id);
    if (rc) return rc;
    if ((rc = ns_write_object(r, *address, *id, md, md_len, data, data_len))) return rc;
    return ns_handout(r, *id);
}

int ns_verify(ns_ring *r, const char *key, uint64_t key_len, uint64_t address, uint32_t id,
              const char *signature);

/* A reader's get_begin in one call: the signature (ns_sign.c), then the chunk. */
int ns_begin_signed(ns_ring *r, const char *key, uint64_t key_len, uint64_t address, uint32_t id,
                    const char *signature, ns_span *out) {
    int rc = ns_verify(r, key, key_len, address, id, signature);
    return rc ? rc : ns_open(r, address, id, out);
}

int64_t ns_count(ns_ring *r, uint64_t address, uint32_t id) {
    ns_span chunk;
    int rc = ns_open(r, address, id, &chunk);
    return rc ? rc : (int64_t)load_count(r, chunk.data_at);
}

/* -- the writer's bookkeeping of hand-outs and touches ----------------------- */

int ns_handout(ns_ring *r, uint32_t id) {
    int rc = WRITER(r);
    if (rc) return rc;
    ns_chunk_info *info = live_by_id(r, id);
    if (info == NULL) return NS_E_STALE;
    info->handouts++;
    info->touched_epoch = 0;
    return NS_OK;
}

int ns_touch(ns_ring *r, uint32_t id) {
    int rc = WRITER(r);
    if (rc) return rc;
    ns_chunk_info *info = live_by_id(r, id);
    if (info == NULL) return NS_E_STALE;
    info->touched_epoch = r->epoch + 1;
    return NS_OK;
}

void ns_release_touches(ns_ring *r) { r->epoch++; }

/* Free when untouched and every reader has read every hand-out; counts
 * wrap at 2**32, so "owed" is computed modulo 2**32 (refimpl's rule). */
static int is_free(ns_ring *r, ns_chunk_info *info, uint32_t n_readers) {
    if (info->touched_epoch == r->epoch + 1) return 0;
    ns_span chunk;
    if (ns_chunk(r, info->address, &chunk) || chunk.size < NS_HEADER + NS_COUNT) return 1;
    uint64_t data_at = chunk.data_at;
#ifdef NS_MUT_FREE_AFTER_ONE_READ
    uint32_t owed = (uint32_t)info->handouts - load_count(r, data_at);
    (void)n_readers;
#else
    uint32_t owed = (uint32_t)(info->handouts * n_readers) - load_count(r, data_at);
#endif
    return owed == 0 || owed >= 0x80000000u;
}

/* storage.free_unused: reclaim free objects, oldest first, until `target`
 * bytes or a busy one; the reclaimed ids are [*id_before, r->id_start). */
int ns_free_unused(ns_ring *r, uint64_t target, uint32_t n_readers, uint32_t *id_before) {
    int rc = WRITER(r);
    if (rc) return rc;
    *id_before = r->id_start;
    uint64_t freed = 0;
    while (freed < target && r->live_len > 0 && is_free(r, live_at(r, 0), n_readers))
        freed += ns_pop_oldest(r);
    ns_lap_correct(r);
    return NS_OK;
}
