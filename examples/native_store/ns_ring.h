/* native_store's C interface. Plain declarations only: build.py feeds this
 * file to cffi's cdef as it is, and ns_ring.c includes it. */

#define NS_DATA_OFFSET 64  /* the data area starts after the control block */
#define NS_HEADER 8        /* chunk header: one 64-bit word (size, id) */
#define NS_COUNT 4         /* an object's read count */
#define NS_SECRET 32       /* the signing secret, after the data area */
#define NS_ID_LIMIT 2147483648
#define NS_MAX_CHUNK 2147483647
#define NS_MAX_CAPACITY 4611686018427387904

#define NS_OK 0
#define NS_E_CLOSED -1      /* the ring has been closed */
#define NS_E_NOT_WRITER -2  /* a writer-only call on a reader */
#define NS_E_RANGE -3       /* a size or id outside its range */
#define NS_E_NO_CHUNK -4    /* no valid chunk header at that address */
#define NS_E_STALE -5       /* the chunk there has another id (or size) */
#define NS_E_NOMEM -6       /* no room in the ring */
#define NS_E_IDS -7         /* every usable id is live */
#define NS_E_LAYOUT -8      /* the segment is not ours, or too small */
#define NS_E_OOM -9         /* malloc failed */
#define NS_E_EMPTY -10      /* no live chunk */
#define NS_E_SIGNATURE -11  /* the handle's signature is not the writer's */

typedef struct {
    uint64_t address;       /* virtual address (grows by a lap per wrap) */
    uint32_t id;
    uint32_t size;          /* header included */
    uint64_t handouts;      /* put + get_cached: reads owed per reader */
    uint64_t touched_epoch; /* == epoch + 1 while touched */
} ns_chunk_info;

typedef struct {
    uint32_t id;            /* a chunk as C found it: out-parameter of reads */
    uint32_t size;          /* header included */
    uint64_t data_at;       /* where its data starts in the mapping */
} ns_span;

typedef struct {
    uint8_t *base;          /* the mapping; NULL once closed */
    uint64_t map_len;
    uint64_t capacity;      /* data_buffer_size */
    int is_writer;
    uint64_t start, end;    /* data_buffer_start / _end */
    uint32_t id_start, id_end, id_max;
    uint64_t epoch;         /* release_touches moves it on */
    ns_chunk_info *live;    /* writer: live chunks, a FIFO in a ring array */
    uint64_t live_len, live_cap, live_head;
    uint8_t hmac_key[32];   /* ns_sign.c: the secret whose HMAC states follow */
    uint32_t hmac_inner[8], hmac_outer[8];
    int hmac_ready;
} ns_ring;

uint64_t ns_segment_bytes(uint64_t capacity);
int ns_init(ns_ring *r, uint8_t *base, uint64_t map_len, uint64_t capacity, int is_writer);
void ns_detach(ns_ring *r);
int ns_secret(ns_ring *r, uint8_t *out);
int ns_set_secret(ns_ring *r, const uint8_t *secret);
int ns_set_id_max(ns_ring *r, uint64_t id_max);
int ns_chunk(ns_ring *r, uint64_t address, ns_span *out);
int ns_allocate(ns_ring *r, uint64_t size, uint64_t *address, uint32_t *id);
int ns_oldest(ns_ring *r, uint32_t *id, uint64_t *address);
uint64_t ns_pop_oldest(ns_ring *r);
void ns_lap_correct(ns_ring *r);
int ns_clear(ns_ring *r, const uint8_t *secret);
int ns_write_object(ns_ring *r, uint64_t address, uint32_t id, const char *md, uint64_t md_len,
                    const char *data, uint64_t data_len);
int ns_open(ns_ring *r, uint64_t address, uint32_t id, ns_span *out);
int ns_end(ns_ring *r, uint64_t address, uint32_t id, uint32_t size, int copied_ok);
int64_t ns_count(ns_ring *r, uint64_t address, uint32_t id);
int ns_handout(ns_ring *r, uint32_t id);
int ns_touch(ns_ring *r, uint32_t id);
void ns_release_touches(ns_ring *r);
int ns_free_unused(ns_ring *r, uint64_t target, uint32_t n_readers, uint32_t *id_before);
int ns_put(ns_ring *r, uint64_t size, const char *md, uint64_t md_len, const char *data,
           uint64_t data_len, uint64_t *address, uint32_t *id);
int ns_begin_signed(ns_ring *r, const char *key, uint64_t key_len, uint64_t address, uint32_t id,
                    const char *signature, ns_span *out);
void ns_sha256(const char *data, uint64_t n, uint8_t *out);
int ns_sha_ni(int wanted);
int ns_sign(ns_ring *r, const char *key, uint64_t key_len, uint64_t address, uint32_t id,
            uint8_t *out);
int ns_verify(ns_ring *r, const char *key, uint64_t key_len, uint64_t address, uint32_t id,
              const char *signature);
int ns_put_signed(ns_ring *r, uint64_t size, const char *md, uint64_t md_len, const char *data,
                  uint64_t data_len, const char *key, uint64_t key_len, uint64_t *address,
                  uint32_t *id, uint8_t *signature);
