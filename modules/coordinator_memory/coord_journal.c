/* The journal (see coord_journal.h). */
#define _GNU_SOURCE
#include "coord_journal.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define J_MAGIC "MCPGJNL1"
#define J_MAGIC_LEN 8
#define J_HEAD 12          /* len, crc32c(len), crc32c(payload) */
#define J_FIXED 21         /* type, revision, expiry, key length */
#define J_RECORD (J_HEAD + J_FIXED)
#define J_COMPACT_FACTOR 4
#define J_RETRY_MS 200

struct cm_journal {
    const mcpg_host *h;
    mcpg_instance *self;
    cm_store *store;
    char *path, *tmp_path;
    int fd, dirfd;
    uint64_t compact_min;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *buf; /* appended, not taken by the writer yet (under mu) */
    size_t len, cap;
    int kicked, stopping, lost; /* under mu */
    atomic_uint_fast64_t appended, durable, resolved;

    /* the writer's own */
    char *pend; /* taken, not on disk yet: a failed batch stays here */
    size_t plen, pcap;
    uint64_t pend_end; /* the last sequence in pend */
    uint64_t file_size;
    int failing;
    pthread_t thr;
    int started;
    void (*progress)(void *);
    void *parg;

    atomic_uint_fast64_t n_records, n_syncs, n_compactions, n_file;
};

/* ---- crc32c (Castagnoli), bytewise ------------------------------------------ */

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
}

static uint32_t crc_add(uint32_t crc, const void *p, size_t n) {
    const unsigned char *b = p;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) crc = crc_table[(crc ^ b[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

/* ---- encoding ------------------------------------------------------------------ */

static void put32(char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (char)(v >> (8 * i));
}
static void put64(char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (char)(v >> (8 * i));
}
static uint32_t get32(const char *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)(unsigned char)p[i] << (8 * i);
    return v;
}
static uint64_t get64(const char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)(unsigned char)p[i] << (8 * i);
    return v;
}

/* Monotonic expiry (us, 0: none) <-> wall-clock ms. */
static int64_t to_wall_ms(const mcpg_host *h, uint64_t expires_us) {
    if (!expires_us) return 0;
    if (expires_us == UINT64_MAX) return INT64_MAX;
    int64_t left = (int64_t)(expires_us - h->mono_us());
    int64_t ms = (h->wall_us() + left) / 1000;
    return ms > 0 ? ms : 1;
}

/* 0: expired at replay (leave the key out). */
static uint64_t from_wall_ms(const mcpg_host *h, int64_t wall_ms, int *expired) {
    *expired = 0;
    if (!wall_ms) return 0;
    if (wall_ms == INT64_MAX) return UINT64_MAX;
    int64_t left = wall_ms * 1000 - h->wall_us();
    if (left <= 0) {
        *expired = 1;
        return 0;
    }
    return h->mono_us() + (uint64_t)left;
}

/* One record into dst (J_RECORD + klen + vlen bytes). */
static void encode(char *dst, int type, const char *key, size_t klen, const char *val,
                   size_t vlen, uint64_t revision, int64_t wall_ms) {
    char *p = dst + J_HEAD;
    uint32_t len = (uint32_t)(J_FIXED + klen + vlen);
    p[0] = (char)type;
    put64(p + 1, revision);
    put64(p + 9, (uint64_t)wall_ms);
    put32(p + 17, (uint32_t)klen);
    if (klen) memcpy(p + J_FIXED, key, klen);
    if (vlen) memcpy(p + J_FIXED + klen, val, vlen);
    put32(dst, len);
    put32(dst + 4, crc_add(0, dst, 4));
    put32(dst + 8, crc_add(0, p, len));
}

static int grow(const mcpg_host *h, char **b, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64 * 1024;
    while (c < need) c *= 2;
    char *n = h->realloc(*b, c);
    if (!n) return MCPG_ENOMEM;
    *b = n;
    *cap = c;
    return 0;
}

/* ---- appending (any loop thread, under the key's shard lock) -------------------- */

uint64_t cm_journal_log(void *ctx, int type, const char *key, size_t klen, const char *val,
                        size_t vlen, uint64_t revision, uint64_t expires_us) {
    cm_journal *j = ctx;
    size_t n = J_RECORD + klen + vlen;
    int64_t wall_ms = to_wall_ms(j->h, expires_us);
    pthread_mutex_lock(&j->mu);
    uint64_t seq = 0;
    if (grow(j->h, &j->buf, &j->cap, j->len + n) == 0) {
        encode(j->buf + j->len, type, key, klen, val, vlen, revision, wall_ms);
        j->len += n;
        seq = atomic_load(&j->appended) + 1;
        atomic_store(&j->appended, seq);
    } else {
        j->lost = 1; /* the writer snapshots the whole store: the change is not lost for good */
        pthread_cond_signal(&j->cv);
    }
    pthread_mutex_unlock(&j->mu);
    return seq;
}

void cm_journal_kick(cm_journal *j) {
    pthread_mutex_lock(&j->mu);
    j->kicked = 1; /* signalled each time: a kick may come when the last batch took all */
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

uint64_t cm_journal_appended(cm_journal *j) { return atomic_load(&j->appended); }
uint64_t cm_journal_durable(cm_journal *j) { return atomic_load(&j->durable); }
uint64_t cm_journal_resolved(cm_journal *j) { return atomic_load(&j->resolved); }

/* ---- file helpers ------------------------------------------------------------------ */

static int pwrite_all(int fd, const char *p, size_t n, uint64_t off) {
    while (n) {
        ssize_t w = pwrite(fd, p, n, (off_t)off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return w < 0 ? errno : ENOSPC;
        p += w;
        n -= (size_t)w;
        off += (uint64_t)w;
    }
    return 0;
}

static int sync_fd(int fd) { return fdatasync(fd) == 0 ? 0 : errno; }

static char *dir_of(const char *path) {
    char *copy = strdup(path);
    if (!copy) return NULL;
    char *d = strdup(dirname(copy));
    free(copy);
    return d;
}

const char *cm_journal_path_problem(const char *path, char *buf, size_t n) {
    if (!path || !*path) return "must not be empty";
    struct stat st;
    if (stat(path, &st) == 0) {
        if (!S_ISREG(st.st_mode)) {
            snprintf(buf, n, "\"%s\" is not a regular file", path);
            return buf;
        }
        if (access(path, R_OK | W_OK) != 0) {
            snprintf(buf, n, "\"%s\": %s", path, strerror(errno));
            return buf;
        }
        return NULL;
    }
    if (errno != ENOENT) {
        snprintf(buf, n, "\"%s\": %s", path, strerror(errno));
        return buf;
    }
    char *dir = dir_of(path);
    if (!dir) return "out of memory";
    int bad = access(dir, W_OK | X_OK) != 0 ? errno : 0;
    if (bad) snprintf(buf, n, "directory \"%s\" is not writable: %s", dir, strerror(bad));
    free(dir);
    return bad ? buf : NULL;
}

/* ---- replay ------------------------------------------------------------------------- */

static int all_zero(const char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i]) return 0;
    return 1;
}

typedef enum { REC_OK, REC_TORN, REC_BAD } rec_kind;

/* The record at off: REC_OK with *next, REC_TORN (a prefix of a record, or
 * zeros, up to the end: a write cut short), REC_BAD with why. */
static rec_kind check_record(const char *m, size_t size, size_t off, size_t *next,
                             const char **why) {
    size_t rem = size - off;
    const char *p = m + off;
    if (rem < J_HEAD) return REC_TORN;
    uint32_t len = get32(p);
    if (get32(p + 4) != crc_add(0, p, 4)) {
        if (all_zero(p, rem)) return REC_TORN;
        *why = "bad length checksum";
        return REC_BAD;
    }
    if (len < J_FIXED) {
        *why = "record too short";
        return REC_BAD;
    }
    if (len > rem - J_HEAD) return REC_TORN;
    if (get32(p + 8) != crc_add(0, p + J_HEAD, len)) {
        if (off + J_HEAD + len == size || all_zero(p + J_HEAD + len, rem - J_HEAD - len))
            return REC_TORN;
        *why = "bad checksum";
        return REC_BAD;
    }
    const char *q = p + J_HEAD;
    if (q[0] != CM_LOG_PUT && q[0] != CM_LOG_DEL && q[0] != CM_LOG_REV) {
        *why = "unknown record type";
        return REC_BAD;
    }
    if (get32(q + 17) > len - J_FIXED) {
        *why = "key longer than the record";
        return REC_BAD;
    }
    *next = off + J_HEAD + len;
    return REC_OK;
}

static int apply_record(cm_journal *j, const char *q, uint32_t len) {
    int type = q[0];
    uint64_t rev = get64(q + 1);
    int64_t wall_ms = (int64_t)get64(q + 9);
    size_t klen = get32(q + 17);
    const char *key = q + J_FIXED, *val = key + klen;
    size_t vlen = len - J_FIXED - klen;
    cm_store_note_revision(j->store, rev);
    if (type == CM_LOG_REV) return 0;
    if (type == CM_LOG_DEL) {
        cm_store_load_del(j->store, key, klen);
        return 0;
    }
    int expired;
    uint64_t exp = from_wall_ms(j->h, wall_ms, &expired);
    if (expired) {
        cm_store_load_del(j->store, key, klen);
        return 0;
    }
    return cm_store_load(j->store, key, klen, val, vlen, rev, exp);
}

static int write_magic(cm_journal *j) {
    int e = pwrite_all(j->fd, J_MAGIC, J_MAGIC_LEN, 0);
    if (!e && ftruncate(j->fd, J_MAGIC_LEN) != 0) e = errno;
    if (!e) e = sync_fd(j->fd);
    if (!e && fsync(j->dirfd) != 0) e = errno;
    if (e) {
        j->h->log(j->self, MCPG_LOG_ERROR, "journal %s: cannot write: %s", j->path, strerror(e));
        return MCPG_EIO;
    }
    j->file_size = J_MAGIC_LEN;
    return 0;
}

static int replay(cm_journal *j, size_t size) {
    const mcpg_host *h = j->h;
    if (size < J_MAGIC_LEN) {
        char head[J_MAGIC_LEN] = {0};
        if (size && pread(j->fd, head, size, 0) != (ssize_t)size) return MCPG_EIO;
        if (memcmp(head, J_MAGIC, size) != 0) goto not_ours;
        if (size)
            h->log(j->self, MCPG_LOG_WARN, "journal %s: torn header (%zu bytes): rewritten",
                   j->path, size);
        return write_magic(j);
    }
    char *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, j->fd, 0);
    if (m == MAP_FAILED) {
        h->log(j->self, MCPG_LOG_ERROR, "journal %s: cannot map: %s", j->path, strerror(errno));
        return MCPG_EIO;
    }
    if (memcmp(m, J_MAGIC, J_MAGIC_LEN) != 0) {
        munmap(m, size);
        goto not_ours;
    }
    size_t off = J_MAGIC_LEN, n = 0, map_size = size;
    int rc = 0;
    while (off < size) {
        size_t next = 0;
        const char *why = NULL;
        rec_kind k = check_record(m, size, off, &next, &why);
        if (k == REC_BAD) {
            h->log(j->self, MCPG_LOG_ERROR,
                   "journal %s: bad record at offset %zu (%s) with %zu bytes after it: not "
                   "starting (move the file away to start empty, or cut it at that offset to "
                   "keep the %zu records before it)",
                   j->path, off, why, size - off, n);
            rc = MCPG_EIO;
            break;
        }
        if (k == REC_TORN) {
            h->log(j->self, MCPG_LOG_WARN,
                   "journal %s: torn last record at offset %zu (%zu bytes, a write cut short): "
                   "truncated",
                   j->path, off, size - off);
            if (ftruncate(j->fd, (off_t)off) != 0 || sync_fd(j->fd) != 0) {
                h->log(j->self, MCPG_LOG_ERROR, "journal %s: cannot truncate: %s", j->path,
                       strerror(errno));
                rc = MCPG_EIO;
            }
            size = off;
            break;
        }
        if (apply_record(j, m + off + J_HEAD, get32(m + off)) != 0) {
            h->log(j->self, MCPG_LOG_ERROR, "journal %s: out of memory at offset %zu", j->path,
                   off);
            rc = MCPG_ENOMEM;
            break;
        }
        n++;
        off = next;
    }
    munmap(m, map_size);
    if (rc) return rc;
    j->file_size = off;
    atomic_store(&j->n_file, off);
    size_t keys, bytes;
    cm_store_usage(j->store, &keys, &bytes);
    h->log(j->self, MCPG_LOG_INFO, "journal %s: %zu records (%zu bytes) replayed: %zu keys",
           j->path, n, off, keys);
    return 0;
not_ours:
    h->log(j->self, MCPG_LOG_ERROR,
           "journal %s: not a coordinator journal (no \"" J_MAGIC "\" at offset 0): not starting",
           j->path);
    return MCPG_EIO;
}

int cm_journal_open(const mcpg_host *h, mcpg_instance *self, const char *path, cm_store *s,
                    uint64_t compact_min, cm_journal **out) {
    pthread_once(&crc_once, crc_init);
    cm_journal *j = h->calloc(1, sizeof *j);
    if (!j) return MCPG_ENOMEM;
    j->h = h;
    j->self = self;
    j->store = s;
    j->compact_min = compact_min;
    j->fd = j->dirfd = -1;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    size_t plen = strlen(path);
    j->path = h->alloc(plen + 1);
    j->tmp_path = h->alloc(plen + sizeof ".compact");
    char *dir = dir_of(path);
    int rc = MCPG_ENOMEM;
    if (!j->path || !j->tmp_path || !dir) goto fail;
    memcpy(j->path, path, plen + 1);
    snprintf(j->tmp_path, plen + sizeof ".compact", "%s.compact", path);
    rc = MCPG_EIO;
    j->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (j->dirfd < 0) {
        h->log(self, MCPG_LOG_ERROR, "journal %s: directory %s: %s", path, dir, strerror(errno));
        goto fail;
    }
    j->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (j->fd < 0) {
        h->log(self, MCPG_LOG_ERROR, "journal %s: cannot open: %s", path, strerror(errno));
        goto fail;
    }
    if (flock(j->fd, LOCK_EX | LOCK_NB) != 0) {
        h->log(self, MCPG_LOG_ERROR,
               "journal %s: in use (locked by another gateway, or by this one's coordinator "
               "before a reload that changed its config: a reload must keep it)",
               path);
        goto fail;
    }
    struct stat st;
    if (fstat(j->fd, &st) != 0) goto fail;
    unlink(j->tmp_path); /* a compaction cut short: the journal itself is whole */
    if ((rc = replay(j, (size_t)st.st_size)) != 0) goto fail;
    atomic_store(&j->n_file, j->file_size);
    free(dir);
    *out = j;
    return 0;
fail:
    free(dir);
    cm_journal_free(j);
    return rc;
}

/* ---- compaction (on the writer) ------------------------------------------------------- */

typedef struct snap {
    cm_journal *j;
    char *b;
    size_t len, cap;
    int nomem;
} snap;

static void snap_add(void *ctx, const char *key, size_t klen, const char *val, size_t vlen,
                     uint64_t revision, uint64_t expires_us) {
    snap *sn = ctx;
    size_t n = J_RECORD + klen + vlen;
    if (sn->nomem || grow(sn->j->h, &sn->b, &sn->cap, sn->len + n)) {
        sn->nomem = 1;
        return;
    }
    encode(sn->b + sn->len, CM_LOG_PUT, key, klen, val, vlen, revision,
           to_wall_ms(sn->j->h, expires_us));
    sn->len += n;
}

/* The live keys to <path>.compact, then renamed over the journal. 0, or
 * why not (the old journal stays). */
static int compact(cm_journal *j) {
    const mcpg_host *h = j->h;
    int fd = open(j->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return errno;
    snap sn = {.j = j};
    int e = flock(fd, LOCK_EX | LOCK_NB) == 0 ? 0 : errno;
    uint64_t off = 0;
    if (!e) e = pwrite_all(fd, J_MAGIC, J_MAGIC_LEN, 0);
    off = J_MAGIC_LEN;
    for (size_t i = 0; i < CM_SHARDS && !e; i++) {
        sn.len = 0;
        cm_store_each(j->store, i, h->mono_us(), snap_add, &sn);
        if (sn.nomem) e = ENOMEM;
        if (!e) e = pwrite_all(fd, sn.b, sn.len, off);
        off += sn.len;
    }
    if (!e) {
        sn.len = 0;
        if (grow(h, &sn.b, &sn.cap, J_RECORD)) e = ENOMEM;
        else encode(sn.b, CM_LOG_REV, NULL, 0, NULL, 0, cm_store_revision(j->store), 0);
        if (!e) e = pwrite_all(fd, sn.b, J_RECORD, off);
        off += J_RECORD;
    }
    h->free(sn.b);
    if (!e && fsync(fd) != 0) e = errno;
    if (!e && rename(j->tmp_path, j->path) != 0) e = errno;
    if (e) {
        close(fd);
        unlink(j->tmp_path);
        return e;
    }
    if (fsync(j->dirfd) != 0) e = errno; /* the new file is in place: keep it either way */
    close(j->fd);
    j->fd = fd;
    uint64_t before = j->file_size;
    j->file_size = off;
    atomic_store(&j->n_file, off);
    atomic_fetch_add(&j->n_compactions, 1);
    h->log(j->self, MCPG_LOG_INFO, "journal %s: compacted %llu -> %llu bytes%s%s", j->path,
           (unsigned long long)before, (unsigned long long)off,
           e ? "; directory fsync failed: " : "", e ? strerror(e) : "");
    return 0;
}

static int compact_due(cm_journal *j) {
    if (j->file_size < j->compact_min) return 0;
    size_t keys, bytes;
    cm_store_usage(j->store, &keys, &bytes);
    uint64_t live = J_MAGIC_LEN + (uint64_t)bytes + (uint64_t)keys * J_RECORD;
    return j->file_size > J_COMPACT_FACTOR * live;
}

/* ---- the writer ------------------------------------------------------------------------ */

static void *writer(void *arg) {
    cm_journal *j = arg;
    const mcpg_host *h = j->h;
    pthread_mutex_lock(&j->mu);
    for (;;) {
        while (!j->stopping && !(j->kicked && j->len) && !j->lost) {
            j->kicked = 0; /* a kick with nothing new: the next record's kick wakes us */
            if (!j->plen) {
                pthread_cond_wait(&j->cv, &j->mu);
                continue;
            }
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += J_RETRY_MS * 1000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            if (pthread_cond_timedwait(&j->cv, &j->mu, &ts) == ETIMEDOUT) break;
        }
        if (j->stopping && !j->len && !j->plen && !j->lost) break;
        j->kicked = 0;
        int lost = j->lost;
        j->lost = 0;
        if (j->len) {
            if (!j->plen) {
                char *t = j->pend;
                size_t c = j->pcap;
                j->pend = j->buf;
                j->pcap = j->cap;
                j->plen = j->len;
                j->buf = t;
                j->cap = c;
                j->len = 0;
                j->pend_end = atomic_load(&j->appended);
            } else if (grow(h, &j->pend, &j->pcap, j->plen + j->len) == 0) {
                memcpy(j->pend + j->plen, j->buf, j->len);
                j->plen += j->len;
                j->len = 0;
                j->pend_end = atomic_load(&j->appended);
            }
        }
        int stopping = j->stopping;
        pthread_mutex_unlock(&j->mu);

        int e = 0;
        if (j->plen) {
            e = pwrite_all(j->fd, j->pend, j->plen, j->file_size);
            if (!e) e = sync_fd(j->fd);
            atomic_fetch_add(&j->n_syncs, 1);
        }
        if (!e) {
            j->file_size += j->plen;
            atomic_store(&j->n_file, j->file_size);
            j->plen = 0;
            atomic_store(&j->durable, j->pend_end);
            atomic_store(&j->resolved, j->pend_end);
            if (j->failing) {
                h->log(j->self, MCPG_LOG_WARN, "journal %s: writing again: the episode is over",
                       j->path);
                j->failing = 0;
            }
        } else {
            atomic_store(&j->resolved, j->pend_end);
            if (!j->failing)
                h->log(j->self, MCPG_LOG_ERROR,
                       "journal %s: write or sync failed: %s: the ops waiting answer "
                       "MCPG_EUNAVAIL; retrying every %d ms (logged once per episode)",
                       j->path, strerror(e), J_RETRY_MS);
            j->failing = 1;
        }
        if (j->progress) j->progress(j->parg);
        if (!e && (lost || compact_due(j))) {
            int ce = compact(j);
            if (ce)
                h->log(j->self, MCPG_LOG_WARN, "journal %s: compaction failed: %s", j->path,
                       strerror(ce));
            else if (lost)
                h->log(j->self, MCPG_LOG_WARN,
                       "journal %s: a record could not be kept (out of memory): the snapshot "
                       "has it",
                       j->path);
        }
        pthread_mutex_lock(&j->mu);
        if (stopping && e) {
            h->log(j->self, MCPG_LOG_ERROR,
                   "journal %s: stopping with %zu bytes not written: their changes are lost",
                   j->path, j->plen + j->len);
            break;
        }
    }
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

int cm_journal_start(cm_journal *j, void (*progress)(void *arg), void *arg) {
    j->progress = progress;
    j->parg = arg;
    if (pthread_create(&j->thr, NULL, writer, j) != 0) return MCPG_ENOMEM;
    j->started = 1;
    return 0;
}

void cm_journal_stop(cm_journal *j) {
    if (!j || !j->started) return;
    pthread_mutex_lock(&j->mu);
    j->stopping = 1;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    pthread_join(j->thr, NULL);
    j->started = 0;
}

void cm_journal_stats(cm_journal *j, uint64_t *records, uint64_t *syncs, uint64_t *compactions,
                      uint64_t *file_bytes) {
    *records = atomic_load(&j->appended);
    *syncs = atomic_load(&j->n_syncs);
    *compactions = atomic_load(&j->n_compactions);
    *file_bytes = atomic_load(&j->n_file);
}

void cm_journal_free(cm_journal *j) {
    if (!j) return;
    cm_journal_stop(j);
    if (j->fd >= 0) close(j->fd);
    if (j->dirfd >= 0) close(j->dirfd);
    j->h->free(j->buf);
    j->h->free(j->pend);
    j->h->free(j->path);
    j->h->free(j->tmp_path);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    j->h->free(j);
}
