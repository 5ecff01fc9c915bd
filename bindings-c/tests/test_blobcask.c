/* C tests for the blobcask C API: every call and every error path.
 * Built and run by bindings-c/Makefile (plain, under valgrind, with ASan). */
#define _POSIX_C_SOURCE 200809L /* mkfifo, symlink */
#include "blobcask.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>

static int failures = 0;
#define CHECK(cond)                                                         \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                     \
        }                                                                   \
    } while (0)
#define K(s) (const uint8_t *)(s), strlen(s)

static char path[256];

static void fill(uint8_t *buf, size_t len, unsigned seed) {
    for (size_t i = 0; i < len; i++) buf[i] = (uint8_t)(seed * 31 + i * 7 + (i >> 9));
}

static bc_store *open_store(void) {
    bc_options o = BC_OPTIONS_INIT;
    o.capacity = 64u << 20;
    o.max_capacity = 64u << 20; /* test_full_store fills it */
    bc_error *err = NULL;
    bc_store *s = bc_open(path, &o, &err);
    if (!s) {
        fprintf(stderr, "open failed: %s\n", bc_error_message(err));
        bc_error_free(err);
        exit(1);
    }
    return s;
}

static void test_put_get_read_stat_delete(bc_store *s) {
    static uint8_t val[100000];
    fill(val, sizeof val, 1);
    bc_info info = BC_INFO_INIT;
    CHECK(bc_put(s, K("photo/1"), val, sizeof val, &info, NULL) == BC_OK);
    CHECK(info.size == sizeof val && info.version > 0 && !info.is_inline);
    CHECK(bc_put(s, K("tiny"), (const uint8_t *)"abc", 3, NULL, NULL) == BC_OK);

    bc_buf buf = {0};
    CHECK(bc_get(s, K("photo/1"), &buf, NULL) == BC_OK);
    CHECK(buf.len == sizeof val && memcmp(buf.data, val, sizeof val) == 0);
    bc_buf_free(&buf);
    CHECK(buf.data == NULL && buf.len == 0);
    bc_buf_free(&buf); /* a released buffer is a no-op */

    CHECK(bc_read(s, K("photo/1"), 5000, 10, &buf, NULL) == BC_OK);
    CHECK(buf.len == 10 && memcmp(buf.data, val + 5000, 10) == 0);
    bc_buf_free(&buf);
    CHECK(bc_read(s, K("photo/1"), sizeof val - 4, 100, &buf, NULL) == BC_OK);
    CHECK(buf.len == 4); /* clipped at the end */
    bc_buf_free(&buf);

    uint8_t dst[64];
    size_t n = 0;
    CHECK(bc_read_into(s, K("photo/1"), 4096, dst, sizeof dst, &n, NULL) == BC_OK);
    CHECK(n == sizeof dst && memcmp(dst, val + 4096, sizeof dst) == 0);
    CHECK(bc_read_into(s, K("tiny"), 1, dst, sizeof dst, &n, NULL) == BC_OK);
    CHECK(n == 2 && memcmp(dst, "bc", 2) == 0);

    bc_info st = BC_INFO_INIT;
    CHECK(bc_stat(s, K("photo/1"), &st, NULL) == BC_OK);
    CHECK(st.size == sizeof val && st.version == info.version && st.created_unix_micros > 0);
    CHECK(bc_stat(s, K("tiny"), &st, NULL) == BC_OK && st.is_inline);

    bool has = false;
    CHECK(bc_contains(s, K("photo/1"), &has, NULL) == BC_OK && has);
    CHECK(bc_delete(s, K("photo/1"), NULL) == BC_OK);
    CHECK(bc_contains(s, K("photo/1"), &has, NULL) == BC_OK && !has);
}

static void test_errors(bc_store *s) {
    bc_error *err = NULL;
    bc_buf buf = {0};
    CHECK(bc_get(s, K("missing"), &buf, &err) == BC_NOT_FOUND);
    CHECK(err && bc_error_code(err) == BC_NOT_FOUND);
    CHECK(strstr(bc_error_message(err), "missing") != NULL); /* names the key */
    bc_error_free(err);
    err = NULL;
    CHECK(bc_delete(s, K("missing"), NULL) == BC_NOT_FOUND);
    CHECK(bc_stat(s, K("missing"), &(bc_info)BC_INFO_INIT, NULL) == BC_NOT_FOUND);

    /* Out-of-range read, empty key, huge key. */
    CHECK(bc_read(s, K("tiny"), 4, 1, &buf, NULL) == BC_INVALID_ARGUMENT);
    CHECK(bc_put(s, (const uint8_t *)"", 0, (const uint8_t *)"x", 1, NULL, NULL) == BC_INVALID_ARGUMENT);
    static uint8_t big_key[2000];
    memset(big_key, 'k', sizeof big_key);
    CHECK(bc_put(s, big_key, sizeof big_key, (const uint8_t *)"x", 1, NULL, &err) == BC_TOO_LARGE);
    CHECK(bc_error_code(err) == BC_TOO_LARGE);
    bc_error_free(err);
    err = NULL;

    /* NULL pointers never crash. */
    CHECK(bc_put(NULL, K("k"), (const uint8_t *)"x", 1, NULL, NULL) == BC_INVALID_ARGUMENT);
    CHECK(bc_put(s, NULL, 3, (const uint8_t *)"x", 1, NULL, NULL) == BC_INVALID_ARGUMENT);
    CHECK(bc_put(s, K("k"), NULL, 5, NULL, NULL) == BC_INVALID_ARGUMENT);
    CHECK(bc_put(s, K("empty"), NULL, 0, NULL, NULL) == BC_OK); /* empty value */
    CHECK(bc_get(s, K("k"), NULL, NULL) == BC_INVALID_ARGUMENT);
    CHECK(bc_read_into(s, K("tiny"), 0, NULL, 5, &(size_t){0}, NULL) == BC_INVALID_ARGUMENT);
    CHECK(bc_read_into(s, K("tiny"), 0, (uint8_t[4]){0}, 4, NULL, NULL) == BC_INVALID_ARGUMENT);
    CHECK(bc_stat(s, K("tiny"), NULL, NULL) == BC_INVALID_ARGUMENT);
    CHECK(bc_contains(s, K("tiny"), NULL, NULL) == BC_INVALID_ARGUMENT);
    CHECK(bc_store_stats(s, NULL, NULL) == BC_INVALID_ARGUMENT);
    CHECK(bc_sync(NULL, NULL) == BC_INVALID_ARGUMENT);
    CHECK(bc_upload_write(NULL, 0, (const uint8_t *)"x", 1, NULL) == BC_INVALID_ARGUMENT);
    CHECK(bc_upload_commit(NULL, NULL, NULL) == BC_INVALID_ARGUMENT);
    CHECK(bc_upload_abort(NULL) == BC_OK);
    CHECK(bc_error_code(NULL) == BC_INVALID_ARGUMENT);
    CHECK(strcmp(bc_error_message(NULL), "") == 0);
    bc_error_free(NULL);
    bc_buf_free(NULL);
    bc_store_free(NULL);
    CHECK(strcmp(bc_code_name(BC_NO_SPACE), "NO_SPACE") == 0);
    CHECK(strcmp(bc_code_name(12345), "INTERNAL") == 0);

    /* Opening: NULL path, a store already open, a foreign file (other paths:
     * test_paths). */
    CHECK(bc_open(NULL, NULL, &err) == NULL && bc_error_code(err) == BC_INVALID_ARGUMENT);
    bc_error_free(err);
    err = NULL;
    CHECK(bc_open(path, NULL, &err) == NULL && bc_error_code(err) == BC_LOCKED);
    bc_error_free(err);
    err = NULL;
    char foreign[300];
    snprintf(foreign, sizeof foreign, "%s.foreign", path);
    FILE *f = fopen(foreign, "w");
    for (int i = 0; i < (2 << 20) / 8; i++) fputs("garbage!", f);
    fclose(f);
    CHECK(bc_open(foreign, NULL, &err) == NULL && bc_error_code(err) == BC_CORRUPT);
    bc_error_free(err);
    err = NULL;
    unlink(foreign);
    bc_options bad = BC_OPTIONS_INIT;
    bad.index = 42;
    CHECK(bc_open(foreign, &bad, NULL) == NULL);
    bc_options missing = BC_OPTIONS_INIT;
    missing.create = 0;
    CHECK(bc_open(foreign, &missing, &err) == NULL && bc_error_code(err) == BC_NOT_FOUND);
    bc_error_free(err);
}

/* Guards invariant 7 (core/INVARIANTS.md): a user's file is never
 * formatted, create_new never overwrites, read_only never writes. */
static void test_create_new_and_read_only(void) {
    char user[300], ro[300];
    snprintf(user, sizeof user, "%s.user", path);
    snprintf(ro, sizeof ro, "%s.ro", path);
    FILE *f = fopen(user, "w");
    for (int i = 0; i < 8192; i++) fputc(0, f);
    for (int i = 0; i < 100000; i++) fputc('u', f);
    fclose(f);
    bc_error *err = NULL;
    CHECK(bc_open(user, NULL, &err) == NULL && bc_error_code(err) == BC_CORRUPT);
    bc_error_free(err);
    err = NULL;
    bc_options o = BC_OPTIONS_INIT;
    o.create_new = 1;
    CHECK(bc_open(user, &o, &err) == NULL && bc_error_code(err) == BC_INVALID_ARGUMENT);
    bc_error_free(err);
    err = NULL;
    f = fopen(user, "r");
    fseek(f, 0, SEEK_END);
    CHECK(ftell(f) == 8192 + 100000);
    fclose(f);
    unlink(user);

    unlink(ro);
    o.capacity = 8u << 20;
    bc_store *w = bc_open(ro, &o, NULL);
    CHECK(w != NULL);
    if (!w) return;
    CHECK(bc_put(w, K("k"), (const uint8_t *)"value", 5, NULL, NULL) == BC_OK);
    CHECK(bc_close(w, NULL) == BC_OK);
    bc_store_free(w);
    CHECK(bc_open(ro, &o, &err) == NULL && bc_error_code(err) == BC_INVALID_ARGUMENT);
    bc_error_free(err);
    err = NULL;
    bc_options r = BC_OPTIONS_INIT;
    r.read_only = 1;
    bc_store *r1 = bc_open(ro, &r, NULL), *r2 = bc_open(ro, &r, NULL);
    CHECK(r1 != NULL && r2 != NULL);
    if (r1 && r2) {
        bc_buf buf = {0};
        CHECK(bc_get(r2, K("k"), &buf, NULL) == BC_OK && buf.len == 5);
        bc_buf_free(&buf);
        CHECK(bc_put(r1, K("x"), (const uint8_t *)"y", 1, NULL, NULL) == BC_UNSUPPORTED);
        CHECK(bc_open(ro, NULL, &err) == NULL && bc_error_code(err) == BC_LOCKED);
        bc_error_free(err);
        err = NULL;
    }
    bc_store_free(r1);
    bc_store_free(r2);
    unlink(ro);
    CHECK(bc_open(ro, &r, &err) == NULL && bc_error_code(err) == BC_NOT_FOUND);
    bc_error_free(err);
    CHECK(access(ro, F_OK) != 0);
}

/* The read cache is on by default: the second whole read keeps the object,
 * the third is a hit. */
static void test_read_cache(bc_store *s) {
    static uint8_t val[50000];
    fill(val, sizeof val, 9);
    CHECK(bc_put(s, K("hot"), val, sizeof val, NULL, NULL) == BC_OK);
    bc_stats before = BC_STATS_INIT, after = BC_STATS_INIT;
    CHECK(bc_store_stats(s, &before, NULL) == BC_OK);
    for (int i = 0; i < 3; i++) {
        bc_buf buf = {0};
        CHECK(bc_get(s, K("hot"), &buf, NULL) == BC_OK);
        CHECK(buf.len == sizeof val && memcmp(buf.data, val, sizeof val) == 0);
        bc_buf_free(&buf);
    }
    CHECK(bc_store_stats(s, &after, NULL) == BC_OK);
    CHECK(after.cache_misses == before.cache_misses + 2);
    CHECK(after.cache_hits == before.cache_hits + 1);
    CHECK(after.cache_bytes >= sizeof val);
    CHECK(after.cache_capacity == 64u << 20);
    CHECK(bc_delete(s, K("hot"), NULL) == BC_OK);

    bc_options o = BC_OPTIONS_INIT;
    CHECK(o.cache_bytes == -1);
    o.cache_bytes = -2;
    bc_error *err = NULL;
    CHECK(bc_open(path, &o, &err) == NULL && bc_error_code(err) == BC_INVALID_ARGUMENT);
    bc_error_free(err);
}

static void test_conditional_put(bc_store *s) {
    bc_info first = BC_INFO_INIT, second = BC_INFO_INIT;
    CHECK(bc_put_if(s, K("cond"), (const uint8_t *)"one", 3, BC_PUT_CREATE, 0, &first, NULL) == BC_OK);
    bc_error *err = NULL;
    CHECK(bc_put_if(s, K("cond"), (const uint8_t *)"two", 3, BC_PUT_CREATE, 0, NULL, &err) ==
          BC_ALREADY_EXISTS);
    CHECK(bc_error_code(err) == BC_ALREADY_EXISTS);
    bc_error_free(err);
    CHECK(bc_put_if(s, K("cond"), (const uint8_t *)"two", 3, BC_PUT_UPDATE, first.version + 1, NULL,
                    NULL) == BC_VERSION_MISMATCH);
    CHECK(bc_put_if(s, K("cond"), (const uint8_t *)"two", 3, BC_PUT_UPDATE, first.version, &second,
                    NULL) == BC_OK);
    CHECK(second.version > first.version);
    CHECK(bc_put_if(s, K("cond"), (const uint8_t *)"x", 1, 7, 0, NULL, NULL) == BC_INVALID_ARGUMENT);
    bc_buf buf = {0};
    CHECK(bc_get(s, K("cond"), &buf, NULL) == BC_OK && buf.len == 3 && memcmp(buf.data, "two", 3) == 0);
    bc_buf_free(&buf);
    CHECK(bc_put_if(s, K("cond-missing"), (const uint8_t *)"x", 1, BC_PUT_UPDATE, 1, NULL, NULL) ==
          BC_VERSION_MISMATCH);
    CHECK(bc_delete(s, K("cond"), NULL) == BC_OK);

    /* Flags are 0 or 1: anything else is refused, not taken as true. */
    bc_options o = BC_OPTIONS_INIT;
    o.direct_io = 5;
    CHECK(bc_open(path, &o, &err) == NULL && bc_error_code(err) == BC_INVALID_ARGUMENT);
    bc_error_free(err);
    err = NULL;
    o = (bc_options)BC_OPTIONS_INIT;
    o.create = 7;
    CHECK(bc_open(path, &o, &err) == NULL && bc_error_code(err) == BC_INVALID_ARGUMENT);
    bc_error_free(err);
}

static void test_upload(bc_store *s) {
    enum { SIZE = 3 * 4096 + 100 };
    static uint8_t val[SIZE];
    fill(val, SIZE, 9);
    bc_upload *up = NULL;
    CHECK(bc_upload_begin(s, K("up"), SIZE, &up, NULL) == BC_OK && up);
    CHECK(bc_upload_write(up, 8192, val + 8192, 4096, NULL) == BC_OK);
    CHECK(bc_upload_write(up, 12288, val + 12288, 100, NULL) == BC_OK);
    CHECK(bc_upload_write(up, 1, val, 10, NULL) == BC_INVALID_ARGUMENT);
    CHECK(bc_upload_write(up, 0, val, 8192, NULL) == BC_OK);
    bc_info info = BC_INFO_INIT;
    CHECK(bc_upload_commit(up, &info, NULL) == BC_OK && info.size == SIZE);
    CHECK(info.expires_unix_micros == 0); /* no ttl */
    bc_buf buf = {0};
    CHECK(bc_get(s, K("up"), &buf, NULL) == BC_OK && buf.len == SIZE && memcmp(buf.data, val, SIZE) == 0);
    bc_buf_free(&buf);

    /* An incomplete upload fails to commit and is freed anyway. */
    up = NULL;
    CHECK(bc_upload_begin(s, K("partial"), SIZE, &up, NULL) == BC_OK);
    CHECK(bc_upload_write(up, 0, val, 4096, NULL) == BC_OK);
    bc_error *err = NULL;
    CHECK(bc_upload_commit(up, NULL, &err) == BC_INVALID_ARGUMENT);
    bc_error_free(err);
    /* Abort releases the reserved space. */
    bc_stats before = BC_STATS_INIT, after = BC_STATS_INIT;
    CHECK(bc_store_stats(s, &before, NULL) == BC_OK);
    CHECK(bc_upload_begin(s, K("aborted"), 8u << 20, &up, NULL) == BC_OK);
    CHECK(bc_upload_abort(up) == BC_OK);
    CHECK(bc_store_stats(s, &after, NULL) == BC_OK && after.free_bytes == before.free_bytes);
    CHECK(bc_upload_begin(s, K("huge"), 1ull << 40, &up, NULL) == BC_TOO_LARGE);
}

/* bc_store_free closes the store even with an upload outstanding: the
 * upload's later calls fail with BC_CLOSED and nothing lands; a new open of
 * the same file works. */
static void test_free_with_an_upload_outstanding(void) {
    char other[300];
    snprintf(other, sizeof other, "%s.free", path);
    unlink(other);
    bc_options o = BC_OPTIONS_INIT;
    o.capacity = 8u << 20;
    bc_store *s = bc_open(other, &o, NULL);
    CHECK(s != NULL);
    if (!s) return;
    static uint8_t val[8192];
    fill(val, sizeof val, 4);
    bc_upload *up = NULL;
    CHECK(bc_upload_begin(s, K("late"), sizeof val, &up, NULL) == BC_OK);
    CHECK(bc_upload_write(up, 0, val, 4096, NULL) == BC_OK);
    bc_store_free(s);
    CHECK(bc_upload_write(up, 4096, val + 4096, 4096, NULL) == BC_CLOSED);
    CHECK(bc_upload_commit(up, NULL, NULL) == BC_CLOSED);
    bc_error *err = NULL;
    s = bc_open(other, &o, &err);
    CHECK(s != NULL);
    if (!s) {
        fprintf(stderr, "reopen: %s\n", bc_error_message(err));
        bc_error_free(err);
        return;
    }
    bool has = true;
    CHECK(bc_contains(s, K("late"), &has, NULL) == BC_OK && !has);
    bc_store_free(s);
    unlink(other);
}

static bc_store *open_with(const char *p, const bc_options *o);

/* What bc_list_uploads showed: copies made during the visits (the info and
 * its key are valid only then). */
struct listing {
    int n;
    int stop_after; /* 0: never stop */
    bc_store *abort_in; /* when set, each visit aborts the upload it sees */
    bc_code abort_rc;
    struct {
        bc_upload_info info;
        char key[64];
    } seen[16];
};

static int collect(const bc_upload_info *info, void *ctx) {
    struct listing *l = ctx;
    if (l->n < 16) {
        l->seen[l->n].info = *info;
        size_t len = info->key_len < 63 ? info->key_len : 63;
        memcpy(l->seen[l->n].key, info->key, len);
        l->seen[l->n].key[len] = '\0';
        l->seen[l->n].info.key = NULL; /* not valid after this call */
    }
    l->n++;
    if (l->abort_in) l->abort_rc = bc_abort_upload(l->abort_in, info->id, NULL);
    return l->stop_after && l->n >= l->stop_after;
}

static struct listing list_of(bc_store *s) {
    struct listing l;
    memset(&l, 0, sizeof l);
    CHECK(bc_list_uploads(s, collect, &l, NULL) == BC_OK);
    return l;
}

static int64_t now_micros(void) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static uint64_t free_bytes(bc_store *s) {
    bc_stats st = BC_STATS_INIT;
    CHECK(bc_store_stats(s, &st, NULL) == BC_OK);
    return st.free_bytes;
}

/* Free bytes plus metadata bytes: what a reopen keeps equal (the index
 * image a clean close writes counts as metadata until the first change). */
static uint64_t free_and_metadata(bc_store *s) {
    bc_stats st = BC_STATS_INIT;
    CHECK(bc_store_stats(s, &st, NULL) == BC_OK);
    return st.free_bytes + st.metadata_bytes;
}

struct part_writer {
    bc_upload *up;
    uint64_t first, size, step;
    int ok, closed, other;
};

static void *write_parts(void *arg) {
    struct part_writer *w = arg;
    static uint8_t part[1 << 20]; /* only read */
    for (uint64_t off = w->first; off < w->size; off += w->step) {
        bc_code rc = bc_upload_write(w->up, off, part, sizeof part, NULL);
        if (rc == BC_OK) w->ok++;
        else if (rc == BC_CLOSED) w->closed++;
        else w->other++;
    }
    return NULL;
}

/* bc_list_uploads, bc_abort_upload and bc_upload_id: the listing shows key,
 * size and progress, oldest first, and can be stopped; an upload aborted by
 * id fails its later calls with BC_CLOSED and gives its space back (also
 * with parts in flight, and from inside a visit); ended uploads leave the
 * listing; uploads are gone at reopen with their space. */
static void test_upload_listing(void) {
    char p[300];
    snprintf(p, sizeof p, "%s.uploads", path);
    unlink(p);
    bc_options o = BC_OPTIONS_INIT;
    o.capacity = 64u << 20;
    bc_store *s = open_with(p, &o);
    if (!s) return;
    uint64_t free0 = free_bytes(s);
    uint64_t fm0 = free_and_metadata(s);
    struct listing l = list_of(s);
    CHECK(l.n == 0);

    enum { SIZE = 3 * 4096 + 100 };
    static uint8_t val[SIZE];
    fill(val, SIZE, 5);
    int64_t before = now_micros();
    bc_upload *a = NULL, *b = NULL, *c = NULL;
    CHECK(bc_upload_begin(s, K("videos/a.mp4"), SIZE, &a, NULL) == BC_OK);
    CHECK(bc_upload_begin(s, K("b"), 8u << 20, &b, NULL) == BC_OK);
    CHECK(bc_upload_begin(s, K("c"), 4096, &c, NULL) == BC_OK);
    int64_t after = now_micros();
    uint64_t ida = bc_upload_id(a), idb = bc_upload_id(b), idc = bc_upload_id(c);
    CHECK(ida != 0 && idb != 0 && idc != 0 && ida != idb && idb != idc && ida != idc);
    CHECK(bc_upload_id(NULL) == 0);

    l = list_of(s);
    CHECK(l.n == 3);
    CHECK(l.seen[0].info.id == ida && l.seen[1].info.id == idb && l.seen[2].info.id == idc);
    CHECK(strcmp(l.seen[0].key, "videos/a.mp4") == 0 && l.seen[0].info.key_len == 12);
    CHECK(strcmp(l.seen[1].key, "b") == 0 && strcmp(l.seen[2].key, "c") == 0);
    CHECK(l.seen[0].info.size == SIZE && l.seen[1].info.size == (8u << 20));
    CHECK(l.seen[0].info.written == 0);
    CHECK(l.seen[0].info.started_micros >= before - 1000000 &&
          l.seen[0].info.started_micros <= after + 1000000);

    /* Progress: parts in any order; the short last part ends it. */
    CHECK(bc_upload_write(a, 8192, val + 8192, 4096, NULL) == BC_OK);
    CHECK(list_of(s).seen[0].info.written == 4096);
    CHECK(bc_upload_write(a, 0, val, 8192, NULL) == BC_OK);
    CHECK(list_of(s).seen[0].info.written == 12288);
    CHECK(bc_upload_write(a, 12288, val + 12288, 100, NULL) == BC_OK);
    CHECK(list_of(s).seen[0].info.written == SIZE);

    /* A non-zero return from visit stops the listing (still BC_OK). */
    memset(&l, 0, sizeof l);
    l.stop_after = 1;
    CHECK(bc_list_uploads(s, collect, &l, NULL) == BC_OK && l.n == 1 && l.seen[0].info.id == ida);

    /* Abort by id: the handle then fails with BC_CLOSED, the space is back. */
    CHECK(bc_upload_write(b, 0, val, 4096, NULL) == BC_OK);
    CHECK(free_bytes(s) < free0);
    bc_error *err = NULL;
    CHECK(bc_abort_upload(s, idb, &err) == BC_OK && err == NULL);
    l = list_of(s);
    CHECK(l.n == 2 && l.seen[0].info.id == ida && l.seen[1].info.id == idc);
    CHECK(bc_upload_write(b, 4096, val, 4096, &err) == BC_CLOSED);
    CHECK(err && bc_error_code(err) == BC_CLOSED && strstr(bc_error_message(err), "aborted") != NULL);
    bc_error_free(err);
    err = NULL;
    CHECK(bc_upload_commit(b, NULL, NULL) == BC_CLOSED); /* and frees the handle */
    bool has = true;
    CHECK(bc_contains(s, K("b"), &has, NULL) == BC_OK && !has);
    CHECK(bc_abort_upload(s, idb, &err) == BC_NOT_FOUND);
    CHECK(err && bc_error_code(err) == BC_NOT_FOUND);
    bc_error_free(err);
    err = NULL;
    CHECK(bc_abort_upload(s, 987654321, NULL) == BC_NOT_FOUND);
    CHECK(bc_abort_upload(s, 0, NULL) == BC_NOT_FOUND);

    /* Committed and handle-aborted uploads leave the listing. */
    bc_info info = BC_INFO_INIT;
    CHECK(bc_upload_commit(a, &info, NULL) == BC_OK && info.size == SIZE);
    CHECK(bc_upload_abort(c) == BC_OK);
    CHECK(list_of(s).n == 0);
    CHECK(bc_abort_upload(s, ida, NULL) == BC_NOT_FOUND);
    CHECK(bc_abort_upload(s, idc, NULL) == BC_NOT_FOUND);
    CHECK(bc_delete(s, K("videos/a.mp4"), NULL) == BC_OK);
    CHECK(free_bytes(s) == free0);

    /* Aborting from inside visit (the listing was taken before). */
    bc_upload *d = NULL, *e = NULL;
    CHECK(bc_upload_begin(s, K("d"), 1u << 20, &d, NULL) == BC_OK);
    CHECK(bc_upload_begin(s, K("e"), 1u << 20, &e, NULL) == BC_OK);
    memset(&l, 0, sizeof l);
    l.abort_in = s;
    CHECK(bc_list_uploads(s, collect, &l, NULL) == BC_OK && l.n == 2 && l.abort_rc == BC_OK);
    CHECK(list_of(s).n == 0 && free_bytes(s) == free0);
    CHECK(bc_upload_write(d, 0, val, 4096, NULL) == BC_CLOSED);
    CHECK(bc_upload_abort(d) == BC_OK); /* frees the handle; a no-op otherwise */
    CHECK(bc_upload_abort(e) == BC_OK);

    /* Abort while parts are being written from several threads: each part
     * lands or fails with BC_CLOSED, and all the space comes back once the
     * parts in flight are done. */
    bc_upload *r = NULL;
    CHECK(bc_upload_begin(s, K("racing"), 16u << 20, &r, NULL) == BC_OK);
    pthread_t t[4];
    struct part_writer w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct part_writer){r, (uint64_t)i << 20, 16u << 20, 4u << 20, 0, 0, 0};
        pthread_create(&t[i], NULL, write_parts, &w[i]);
    }
    /* Abort once some parts have landed, while others are in flight. */
    for (int64_t deadline = now_micros() + 30000000; now_micros() < deadline;) {
        l = list_of(s);
        if (l.n == 1 && l.seen[0].info.written >= (2u << 20)) break;
        sched_yield();
    }
    CHECK(bc_abort_upload(s, bc_upload_id(r), NULL) == BC_OK);
    int landed = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        CHECK(w[i].other == 0 && w[i].ok + w[i].closed == 4);
        landed += w[i].ok;
    }
    CHECK(landed >= 2);
    CHECK(bc_upload_commit(r, NULL, NULL) == BC_CLOSED);
    CHECK(free_bytes(s) == free0);

    /* NULL arguments. */
    CHECK(bc_list_uploads(NULL, collect, &l, NULL) == BC_INVALID_ARGUMENT);
    CHECK(bc_list_uploads(s, NULL, NULL, &err) == BC_INVALID_ARGUMENT);
    CHECK(err && bc_error_code(err) == BC_INVALID_ARGUMENT);
    bc_error_free(err);
    err = NULL;
    CHECK(bc_abort_upload(NULL, 1, NULL) == BC_INVALID_ARGUMENT);

    /* Uploads are memory only: an upload left open at close is gone at the
     * next open, with its space. */
    bc_upload *left = NULL;
    CHECK(bc_upload_begin(s, K("left"), 4u << 20, &left, NULL) == BC_OK);
    CHECK(bc_upload_write(left, 0, val, 4096, NULL) == BC_OK);
    uint64_t id_left = bc_upload_id(left);
    CHECK(bc_close(s, NULL) == BC_OK);
    CHECK(bc_list_uploads(s, collect, &l, NULL) == BC_CLOSED);
    CHECK(bc_abort_upload(s, id_left, NULL) == BC_CLOSED);
    bc_store_free(s);
    CHECK(bc_upload_id(left) == id_left);
    CHECK(bc_upload_abort(left) == BC_OK);
    s = open_with(p, &o);
    if (!s) return;
    CHECK(list_of(s).n == 0);
    CHECK(bc_contains(s, K("left"), &has, NULL) == BC_OK && !has);
    CHECK(free_and_metadata(s) == fm0);
    bc_store_free(s);
    unlink(p);
}

/* bc_backup: a copy that bc_open opens, with every object's bytes; an
 * existing destination is refused and left untouched; bad arguments and a
 * closed store return their codes. */
static void test_backup(void) {
    char src[300], dest[300], taken[300], nodir[320];
    snprintf(src, sizeof src, "%s.bsrc", path);
    snprintf(dest, sizeof dest, "%s.backup", path);
    snprintf(taken, sizeof taken, "%s.taken", path);
    snprintf(nodir, sizeof nodir, "%s.missing-dir/copy", path);
    unlink(src);
    unlink(dest);
    unlink(taken);
    bc_options o = BC_OPTIONS_INIT;
    o.capacity = 16u << 20;
    bc_store *s = bc_open(src, &o, NULL);
    CHECK(s != NULL);
    if (!s) return;
    /* Inline, one-block, multi-block and empty values; one deleted. */
    enum { N = 40 };
    static uint8_t vals[N][70000];
    size_t sizes[N];
    uint64_t total = 0;
    char key[32];
    for (int i = 0; i < N; i++) {
        sizes[i] = i == 0 ? 0 : i % 5 == 1 ? (size_t)(i * 3) : (size_t)((i * 7919) % 70000);
        fill(vals[i], sizes[i], (unsigned)(i + 50));
        snprintf(key, sizeof key, "b/%d", i);
        CHECK(bc_put(s, K(key), vals[i], sizes[i], NULL, NULL) == BC_OK);
        if (i != 3) total += sizes[i];
    }
    CHECK(bc_delete(s, K("b/3"), NULL) == BC_OK);

    bc_backup_report r = BC_BACKUP_REPORT_INIT;
    bc_error *err = NULL;
    CHECK(bc_backup(s, dest, &r, &err) == BC_OK);
    if (err) {
        fprintf(stderr, "backup: %s\n", bc_error_message(err));
        bc_error_free(err);
        err = NULL;
    }
    CHECK(r.objects == N - 1 && r.bytes == total && r.elapsed_nanos > 0);
    /* The source goes on working after the backup. */
    CHECK(bc_put(s, K("after"), (const uint8_t *)"x", 1, NULL, NULL) == BC_OK);

    /* An existing destination (the copy itself, or any file) is refused
     * and left as it was. */
    CHECK(bc_backup(s, dest, NULL, &err) == BC_ALREADY_EXISTS);
    CHECK(err && bc_error_code(err) == BC_ALREADY_EXISTS);
    bc_error_free(err);
    err = NULL;
    FILE *f = fopen(taken, "w");
    fputs("precious", f);
    fclose(f);
    CHECK(bc_backup(s, taken, NULL, NULL) == BC_ALREADY_EXISTS);
    char back[16] = {0};
    f = fopen(taken, "r");
    CHECK(fread(back, 1, sizeof back, f) == 8 && memcmp(back, "precious", 8) == 0);
    fclose(f);
    unlink(taken);
    CHECK(bc_backup(s, nodir, NULL, NULL) == BC_NOT_FOUND);
    CHECK(bc_backup(s, "/", NULL, NULL) == BC_INVALID_ARGUMENT);
    CHECK(bc_backup(s, NULL, NULL, &err) == BC_INVALID_ARGUMENT);
    CHECK(strstr(bc_error_message(err), "dest") != NULL);
    bc_error_free(err);
    err = NULL;
    CHECK(bc_backup(NULL, dest, NULL, NULL) == BC_INVALID_ARGUMENT);
    /* A destination that is not UTF-8 is the file system's to take. */
    char raw[300];
    snprintf(raw, sizeof raw, "%s.\xff\xfe-copy", path);
    unlink(raw);
    CHECK(bc_backup(s, raw, NULL, NULL) == BC_OK);
    CHECK(access(raw, F_OK) == 0);
    unlink(raw);
    CHECK(bc_close(s, NULL) == BC_OK);
    CHECK(bc_backup(s, taken, NULL, NULL) == BC_CLOSED);
    CHECK(access(taken, F_OK) != 0);
    bc_store_free(s);

    /* The copy opens and holds every object, byte for byte, and nothing
     * written after the backup. */
    bc_store *c = bc_open(dest, &o, &err);
    CHECK(c != NULL);
    if (!c) {
        fprintf(stderr, "open the copy: %s\n", bc_error_message(err));
        bc_error_free(err);
        return;
    }
    bc_stats st = BC_STATS_INIT;
    CHECK(bc_store_stats(c, &st, NULL) == BC_OK && st.objects == N - 1 && st.logical_bytes == total);
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof key, "b/%d", i);
        bc_buf buf = {0};
        if (i == 3) {
            CHECK(bc_get(c, K(key), &buf, NULL) == BC_NOT_FOUND);
            continue;
        }
        CHECK(bc_get(c, K(key), &buf, NULL) == BC_OK);
        CHECK(buf.len == sizes[i] && (sizes[i] == 0 || memcmp(buf.data, vals[i], sizes[i]) == 0));
        bc_buf_free(&buf);
    }
    bool has = true;
    CHECK(bc_contains(c, K("after"), &has, NULL) == BC_OK && !has);
    bc_store_free(c);
    unlink(src);
    unlink(dest);
}

static void test_full_store(bc_store *s) {
    static uint8_t chunk[4 << 20];
    fill(chunk, sizeof chunk, 3);
    char key[32];
    int stored = 0;
    bc_code rc = BC_OK;
    while (rc == BC_OK && stored < 100) {
        snprintf(key, sizeof key, "fill/%d", stored);
        rc = bc_put(s, K(key), chunk, sizeof chunk, NULL, NULL);
        if (rc == BC_OK) stored++;
    }
    CHECK(rc == BC_NO_SPACE);
    for (int i = 0; i < stored; i++) {
        snprintf(key, sizeof key, "fill/%d", i);
        CHECK(bc_delete(s, K(key), NULL) == BC_OK);
    }
    CHECK(bc_put(s, K("after-full"), chunk, sizeof chunk, NULL, NULL) == BC_OK);
}

static uint64_t capacity_of(bc_store *s) {
    bc_stats st = BC_STATS_INIT;
    CHECK(bc_store_stats(s, &st, NULL) == BC_OK);
    return st.capacity;
}

static bc_store *open_with(const char *p, const bc_options *o) {
    bc_error *err = NULL;
    bc_store *s = bc_open(p, o, &err);
    if (!s) {
        fprintf(stderr, "open %s failed: %s\n", p, bc_error_message(err));
        bc_error_free(err);
        failures++;
    }
    return s;
}

/* Puts 1 MiB values until BC_NO_SPACE (required within `limit`); returns
 * how many were stored. */
static int fill_until_no_space(bc_store *s, const char *prefix, int limit) {
    static uint8_t chunk[1 << 20];
    char key[64];
    for (int i = 0; i < limit; i++) {
        fill(chunk, sizeof chunk, (unsigned)i);
        snprintf(key, sizeof key, "%s/%d", prefix, i);
        bc_code rc = bc_put(s, K(key), chunk, sizeof chunk, NULL, NULL);
        if (rc != BC_OK) {
            CHECK(rc == BC_NO_SPACE);
            return i;
        }
    }
    CHECK(!"no BC_NO_SPACE within the limit");
    return limit;
}

/* A new store starts at 16 MiB and grows as it fills, up to max_capacity
 * (stored); bc_grow grows it at once and never shrinks it; unset options
 * (BC_INDEX_STORED, inline_threshold -1, max_capacity 0) keep what the
 * store has stored. */
static void test_growth(void) {
    char g[300];
    snprintf(g, sizeof g, "%s.grow", path);
    unlink(g);
    const uint64_t MiB = 1u << 20;
    bc_options d = BC_OPTIONS_INIT;
    CHECK(d.index == BC_INDEX_STORED && d.max_capacity == 0 && d.capacity == 0);

    /* Starts at 16 MiB; 40 MiB of puts grow it; reopened, it keeps its size. */
    bc_store *s = open_with(g, NULL);
    if (!s) return;
    CHECK(capacity_of(s) == 16 * MiB);
    static uint8_t chunk[1 << 20];
    char key[64];
    for (int i = 0; i < 40; i++) {
        fill(chunk, sizeof chunk, (unsigned)i);
        snprintf(key, sizeof key, "big/%d", i);
        CHECK(bc_put(s, K(key), chunk, sizeof chunk, NULL, NULL) == BC_OK);
    }
    uint64_t grown = capacity_of(s);
    CHECK(grown >= 40 * MiB);
    bc_store_free(s);
    s = open_with(g, &d);
    if (!s) return;
    bc_stats st = BC_STATS_INIT;
    CHECK(bc_store_stats(s, &st, NULL) == BC_OK && st.capacity == grown && st.objects == 40);
    bc_buf buf = {0};
    fill(chunk, sizeof chunk, 39);
    CHECK(bc_get(s, K("big/39"), &buf, NULL) == BC_OK && buf.len == sizeof chunk &&
          memcmp(buf.data, chunk, sizeof chunk) == 0);
    bc_buf_free(&buf);

    /* bc_grow: larger works at once, the same size is a no-op, smaller is
     * refused with a message that says why. */
    CHECK(bc_grow(s, grown + 16 * MiB, NULL) == BC_OK);
    CHECK(capacity_of(s) == grown + 16 * MiB);
    CHECK(bc_grow(s, grown + 16 * MiB, NULL) == BC_OK);
    CHECK(bc_grow(s, grown + 16 * MiB + 4095, NULL) == BC_OK); /* rounded down */
    CHECK(capacity_of(s) == grown + 16 * MiB);
    bc_error *err = NULL;
    CHECK(bc_grow(s, 32 * MiB, &err) == BC_INVALID_ARGUMENT);
    CHECK(err && strstr(bc_error_message(err), "never shrinks") != NULL);
    bc_error_free(err);
    err = NULL;
    CHECK(capacity_of(s) == grown + 16 * MiB);
    CHECK(bc_grow(NULL, 128 * MiB, &err) == BC_INVALID_ARGUMENT);
    CHECK(err && strstr(bc_error_message(err), "NULL") != NULL);
    bc_error_free(err);
    err = NULL;
    CHECK(bc_close(s, NULL) == BC_OK);
    CHECK(bc_grow(s, 128 * MiB, NULL) == BC_CLOSED);
    bc_store_free(s);

    /* A read-only store never grows; a larger capacity at reopen grows the
     * store, a smaller one is refused. */
    bc_options r = BC_OPTIONS_INIT;
    r.read_only = 1;
    s = open_with(g, &r);
    if (!s) return;
    CHECK(bc_grow(s, 128 * MiB, NULL) == BC_UNSUPPORTED);
    bc_store_free(s);
    bc_options c = BC_OPTIONS_INIT;
    c.capacity = grown + 32 * MiB;
    s = open_with(g, &c);
    if (!s) return;
    CHECK(capacity_of(s) == grown + 32 * MiB);
    bc_store_free(s);
    c.capacity = 32 * MiB;
    CHECK(bc_open(g, &c, &err) == NULL && bc_error_code(err) == BC_INVALID_ARGUMENT);
    bc_error_free(err);
    err = NULL;
    unlink(g);

    /* max_capacity stops growth with BC_NO_SPACE and is stored. */
    bc_options m = BC_OPTIONS_INIT;
    m.max_capacity = 32 * MiB;
    s = open_with(g, &m);
    if (!s) return;
    int stored = fill_until_no_space(s, "a", 100);
    CHECK(stored > 16 && stored < 32);
    CHECK(capacity_of(s) <= 32 * MiB);
    bc_store_free(s);
    s = open_with(g, NULL); /* no options: the stored limit */
    if (!s) return;
    CHECK(bc_put(s, K("one-more"), chunk, sizeof chunk, NULL, NULL) == BC_NO_SPACE);
    CHECK(bc_grow(s, 64 * MiB, &err) == BC_INVALID_ARGUMENT);
    CHECK(err && strstr(bc_error_message(err), "max_capacity") != NULL);
    bc_error_free(err);
    err = NULL;
    CHECK(bc_store_stats(s, &st, NULL) == BC_OK && st.objects == (uint64_t)stored);
    bc_store_free(s);
    /* UINT64_MAX lifts the limit, and is stored in its place. */
    m.max_capacity = UINT64_MAX;
    s = open_with(g, &m);
    if (!s) return;
    CHECK(bc_grow(s, 48 * MiB, NULL) == BC_OK);
    bc_store_free(s);
    s = open_with(g, NULL);
    if (!s) return;
    CHECK(bc_grow(s, 64 * MiB, NULL) == BC_OK && capacity_of(s) == 64 * MiB);
    bc_store_free(s);
    /* Below the smallest store, or below the capacity asked: refused. */
    m.max_capacity = 4096;
    CHECK(bc_open(g, &m, NULL) == NULL);
    unlink(g);
    m.max_capacity = 16 * MiB;
    m.capacity = 32 * MiB;
    CHECK(bc_open(g, &m, &err) == NULL && bc_error_code(err) == BC_INVALID_ARGUMENT);
    bc_error_free(err);
    err = NULL;
    CHECK(access(g, F_OK) != 0);

    /* The inline threshold set at creation is used at reopen (inline_threshold
     * -1); an explicit one at a read-write open replaces it. */
    bc_options t = BC_OPTIONS_INIT;
    t.inline_threshold = 0;
    t.index = BC_INDEX_BTREE;
    s = open_with(g, &t);
    if (!s) return;
    bc_info info = BC_INFO_INIT;
    CHECK(bc_put(s, K("a"), (const uint8_t *)"abc", 3, &info, NULL) == BC_OK && !info.is_inline);
    bc_store_free(s);
    s = open_with(g, NULL);
    if (!s) return;
    CHECK(bc_put(s, K("b"), (const uint8_t *)"abc", 3, &info, NULL) == BC_OK && !info.is_inline);
    bc_store_free(s);
    t = (bc_options)BC_OPTIONS_INIT;
    t.inline_threshold = 100;
    s = open_with(g, &t);
    if (!s) return;
    CHECK(bc_put(s, K("c"), (const uint8_t *)"abc", 3, &info, NULL) == BC_OK && info.is_inline);
    bc_store_free(s);
    s = open_with(g, &d);
    if (!s) return;
    CHECK(bc_put(s, K("d"), (const uint8_t *)"abc", 3, &info, NULL) == BC_OK && info.is_inline);
    CHECK(bc_stat(s, K("a"), &info, NULL) == BC_OK && !info.is_inline); /* objects stay put */
    bc_store_free(s);
    t = (bc_options)BC_OPTIONS_INIT;
    t.index = 4;
    CHECK(bc_open(g, &t, &err) == NULL && bc_error_code(err) == BC_INVALID_ARGUMENT);
    bc_error_free(err);
    unlink(g);
}

struct worker { bc_store *s; int id; int ok; };

static void *worker_main(void *arg) {
    struct worker *w = arg;
    uint8_t val[5000];
    char key[32];
    w->ok = 1;
    for (int i = 0; i < 50; i++) {
        fill(val, sizeof val, (unsigned)(w->id * 100 + i));
        snprintf(key, sizeof key, "t%d/%d", w->id, i);
        if (bc_put(w->s, K(key), val, sizeof val, NULL, NULL) != BC_OK) w->ok = 0;
        bc_buf buf = {0};
        if (bc_get(w->s, K(key), &buf, NULL) != BC_OK || buf.len != sizeof val ||
            memcmp(buf.data, val, sizeof val) != 0)
            w->ok = 0;
        bc_buf_free(&buf);
    }
    return NULL;
}

static void test_threads(bc_store *s) {
    pthread_t t[8];
    struct worker w[8];
    for (int i = 0; i < 8; i++) {
        w[i] = (struct worker){s, i, 0};
        pthread_create(&t[i], NULL, worker_main, &w[i]);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        CHECK(w[i].ok);
    }
}

static void sleep_micros(int64_t micros) {
    if (micros <= 0) return;
    struct timespec d = {(time_t)(micros / 1000000), (long)(micros % 1000000) * 1000};
    while (thrd_sleep(&d, &d) == -1) {
    }
}

/* bc_put_ttl / bc_put_if_ttl: the object reads back until its ttl has
 * passed, then is gone to every call (also from the read cache); the
 * expiry is in bc_info and survives a reopen; a put without a ttl makes it
 * permanent; a ttl of 0 or above the maximum is refused and stores
 * nothing. */
static void test_ttl(void) {
    char p[300];
    snprintf(p, sizeof p, "%s.ttl", path);
    unlink(p);
    bc_options o = BC_OPTIONS_INIT;
    o.capacity = 8u << 20;
    bc_store *s = open_with(p, &o);
    if (!s) return;
    const uint64_t TTL = 300000; /* 300 ms */
    static uint8_t val[20000];
    fill(val, sizeof val, 21);

    /* Heap and inline values, with a ttl, read back at once (a slow run,
     * e.g. under valgrind, must not reach the expiry first): the heap one
     * three times, so that the read cache keeps it. */
    bc_info info = BC_INFO_INIT, st = BC_INFO_INIT;
    CHECK(bc_put_ttl(s, K("ttl/heap"), val, sizeof val, TTL, &info, NULL) == BC_OK);
    CHECK(info.size == sizeof val && !info.is_inline);
    CHECK(info.expires_unix_micros == info.created_unix_micros + TTL);
    uint64_t last_expiry = info.expires_unix_micros;
    for (int i = 0; i < 3; i++) {
        bc_buf buf = {0};
        CHECK(bc_get(s, K("ttl/heap"), &buf, NULL) == BC_OK);
        CHECK(buf.len == sizeof val && memcmp(buf.data, val, sizeof val) == 0);
        bc_buf_free(&buf);
    }
    CHECK(bc_stat(s, K("ttl/heap"), &st, NULL) == BC_OK);
    CHECK(st.version == info.version && st.expires_unix_micros == info.expires_unix_micros);
    CHECK(bc_put_ttl(s, K("ttl/inline"), (const uint8_t *)"short-lived", 11, TTL, &info, NULL) == BC_OK);
    CHECK(info.is_inline && info.expires_unix_micros == info.created_unix_micros + TTL);
    bool has = false;
    CHECK(bc_contains(s, K("ttl/inline"), &has, NULL) == BC_OK && has);
    /* One made permanent again by a put without a ttl. */
    CHECK(bc_put_ttl(s, K("ttl/kept"), (const uint8_t *)"v1", 2, TTL, NULL, NULL) == BC_OK);
    CHECK(bc_put(s, K("ttl/kept"), (const uint8_t *)"v2", 2, &info, NULL) == BC_OK);
    CHECK(info.expires_unix_micros == 0);
    CHECK(bc_put(s, K("ttl/plain"), val, 100, &info, NULL) == BC_OK && info.expires_unix_micros == 0);
    CHECK(bc_stat(s, K("ttl/plain"), &st, NULL) == BC_OK && st.expires_unix_micros == 0);
    /* A create-only put with a ttl; the key is taken until it expires. */
    CHECK(bc_put_if_ttl(s, K("ttl/create"), (const uint8_t *)"c1", 2, BC_PUT_CREATE, 0, TTL, &info,
                        NULL) == BC_OK);
    CHECK(info.expires_unix_micros == info.created_unix_micros + TTL);
    CHECK(bc_put_if_ttl(s, K("ttl/create"), (const uint8_t *)"c2", 2, BC_PUT_CREATE, 0, TTL, NULL,
                        NULL) == BC_ALREADY_EXISTS);
    /* Update keeps the condition: the version given, and a new ttl. */
    bc_info upd = BC_INFO_INIT;
    CHECK(bc_put_if_ttl(s, K("ttl/create"), (const uint8_t *)"c3", 2, BC_PUT_UPDATE, info.version,
                        TTL, &upd, NULL) == BC_OK);
    CHECK(upd.version > info.version && upd.expires_unix_micros == upd.created_unix_micros + TTL);
    last_expiry = upd.expires_unix_micros;
    /* A long ttl, to see it kept across the reopen below. */
    bc_info hour = BC_INFO_INIT;
    CHECK(bc_put_ttl(s, K("ttl/hour"), val, 5000, 3600ull * 1000000, &hour, NULL) == BC_OK);

    /* Past the last expiry (by the clock the engine uses): all gone. */
    sleep_micros((int64_t)last_expiry - now_micros() + 100000);
    const char *gone[] = {"ttl/heap", "ttl/inline", "ttl/create"};
    for (int i = 0; i < 3; i++) {
        bc_buf buf = {0};
        bc_error *err = NULL;
        CHECK(bc_get(s, K(gone[i]), &buf, &err) == BC_NOT_FOUND);
        CHECK(err && bc_error_code(err) == BC_NOT_FOUND);
        bc_error_free(err);
        CHECK(buf.data == NULL);
        CHECK(bc_read(s, K(gone[i]), 0, 1, &buf, NULL) == BC_NOT_FOUND);
        uint8_t dst[8];
        size_t n = 0;
        CHECK(bc_read_into(s, K(gone[i]), 0, dst, sizeof dst, &n, NULL) == BC_NOT_FOUND);
        CHECK(bc_stat(s, K(gone[i]), &st, NULL) == BC_NOT_FOUND);
        has = true;
        CHECK(bc_contains(s, K(gone[i]), &has, NULL) == BC_OK && !has);
    }
    CHECK(bc_delete(s, K("ttl/heap"), NULL) == BC_NOT_FOUND);
    /* An expired key is free for a create-only put. */
    CHECK(bc_put_if(s, K("ttl/create"), (const uint8_t *)"c4", 2, BC_PUT_CREATE, 0, &info, NULL) ==
          BC_OK);
    bc_buf buf = {0};
    CHECK(bc_get(s, K("ttl/kept"), &buf, NULL) == BC_OK && buf.len == 2 && memcmp(buf.data, "v2", 2) == 0);
    bc_buf_free(&buf);
    CHECK(bc_stat(s, K("ttl/hour"), &st, NULL) == BC_OK);

    /* Refused ttls: the engine's BC_INVALID_ARGUMENT, nothing stored, an
     * object already there unchanged. */
    const uint64_t max_ttl = BC_MAX_TTL_MICROS;
    CHECK(max_ttl == 100ull * 365 * 24 * 3600 * 1000000);
    const uint64_t bad[] = {0, max_ttl + 1, UINT64_MAX};
    for (int i = 0; i < 3; i++) {
        bc_error *err = NULL;
        CHECK(bc_put_ttl(s, K("ttl/bad"), (const uint8_t *)"x", 1, bad[i], &info, &err) ==
              BC_INVALID_ARGUMENT);
        CHECK(err && bc_error_code(err) == BC_INVALID_ARGUMENT);
        CHECK(err && strstr(bc_error_message(err), "ttl") != NULL);
        bc_error_free(err);
        CHECK(bc_put_if_ttl(s, K("ttl/bad"), (const uint8_t *)"x", 1, BC_PUT_CREATE, 0, bad[i], NULL,
                            NULL) == BC_INVALID_ARGUMENT);
        CHECK(bc_put_ttl(s, K("ttl/kept"), (const uint8_t *)"v3", 2, bad[i], NULL, NULL) ==
              BC_INVALID_ARGUMENT);
        has = true;
        CHECK(bc_contains(s, K("ttl/bad"), &has, NULL) == BC_OK && !has);
    }
    CHECK(bc_stat(s, K("ttl/kept"), &st, NULL) == BC_OK && st.expires_unix_micros == 0);
    CHECK(bc_get(s, K("ttl/kept"), &buf, NULL) == BC_OK && buf.len == 2 && memcmp(buf.data, "v2", 2) == 0);
    bc_buf_free(&buf);
    /* The maximum itself is accepted. */
    CHECK(bc_put_ttl(s, K("ttl/max"), (const uint8_t *)"m", 1, max_ttl, &info, NULL) == BC_OK);
    CHECK(info.expires_unix_micros == info.created_unix_micros + max_ttl);

    /* NULL pointers and bad modes never crash. */
    CHECK(bc_put_ttl(NULL, K("k"), (const uint8_t *)"x", 1, TTL, NULL, NULL) == BC_INVALID_ARGUMENT);
    CHECK(bc_put_ttl(s, NULL, 3, (const uint8_t *)"x", 1, TTL, NULL, NULL) == BC_INVALID_ARGUMENT);
    CHECK(bc_put_ttl(s, K("ttl/null"), NULL, 5, TTL, NULL, NULL) == BC_INVALID_ARGUMENT);
    CHECK(bc_put_if_ttl(NULL, K("k"), (const uint8_t *)"x", 1, BC_PUT_CREATE, 0, TTL, NULL, NULL) ==
          BC_INVALID_ARGUMENT);
    CHECK(bc_put_if_ttl(s, K("ttl/null"), (const uint8_t *)"x", 1, 7, 0, TTL, NULL, NULL) ==
          BC_INVALID_ARGUMENT);
    CHECK(bc_put_ttl(s, K("ttl/empty"), NULL, 0, TTL, NULL, NULL) == BC_OK); /* empty value */
    has = true;
    CHECK(bc_contains(s, K("ttl/null"), &has, NULL) == BC_OK && !has);

    /* The expiry is stored: after a reopen it is the same. */
    CHECK(bc_close(s, NULL) == BC_OK);
    CHECK(bc_put_ttl(s, K("k"), (const uint8_t *)"x", 1, TTL, NULL, NULL) == BC_CLOSED);
    bc_store_free(s);
    s = open_with(p, &o);
    if (!s) return;
    CHECK(bc_stat(s, K("ttl/hour"), &st, NULL) == BC_OK);
    CHECK(st.version == hour.version && st.expires_unix_micros == hour.expires_unix_micros);
    CHECK(bc_stat(s, K("ttl/heap"), &st, NULL) == BC_NOT_FOUND);
    CHECK(bc_stat(s, K("ttl/kept"), &st, NULL) == BC_OK && st.expires_unix_micros == 0);
    bc_store_free(s);
    unlink(p);
}

/* bc_compact on a store of a fixed size filled with 4 KiB values, every
 * other one deleted: objects move, the largest free piece grows, every
 * value reads back with its version and expiry. */
static void test_compact(void) {
    char p[300];
    snprintf(p, sizeof p, "%s.compact", path);
    unlink(p);
    bc_options o = BC_OPTIONS_INIT;
    o.capacity = 8u << 20;
    o.max_capacity = 8u << 20;
    bc_store *s = open_with(p, &o);
    if (!s) return;
    enum { LIMIT = 4000 };
    static uint8_t val[4096];
    static bc_info infos[LIMIT];
    char key[32];
    int stored = 0;
    bc_code rc = BC_OK;
    while (stored < LIMIT) {
        fill(val, sizeof val, (unsigned)stored);
        snprintf(key, sizeof key, "c/%05d", stored);
        infos[stored] = (bc_info)BC_INFO_INIT;
        /* Some with an expiry, which a move must keep. */
        rc = stored % 3 == 0
                 ? bc_put_ttl(s, K(key), val, sizeof val, 3600ull * 1000000, &infos[stored], NULL)
                 : bc_put(s, K(key), val, sizeof val, &infos[stored], NULL);
        if (rc != BC_OK) break;
        stored++;
    }
    CHECK(rc == BC_NO_SPACE || stored == LIMIT);
    CHECK(stored > 100);
    for (int i = 1; i < stored; i += 2) {
        snprintf(key, sizeof key, "c/%05d", i);
        CHECK(bc_delete(s, K(key), NULL) == BC_OK);
    }
    bc_compact_report r;
    memset(&r, 0xab, sizeof r); /* every field is written */
    r.struct_size = sizeof r;
    bc_error *err = NULL;
    CHECK(bc_compact(s, &r, &err) == BC_OK);
    if (err) {
        fprintf(stderr, "compact: %s\n", bc_error_message(err));
        bc_error_free(err);
        err = NULL;
    }
    CHECK(r.moved > 0 && r.moved <= (uint64_t)(stored + 1) / 2);
    CHECK(r.bytes_moved >= r.moved * 4096);
    CHECK(r.largest_free_after > r.largest_free_before);
    CHECK(r.largest_free_after >= 1u << 20);
    CHECK(r.elapsed_micros > 0 && r.elapsed_micros < 600ull * 1000000);
    for (int i = 0; i < stored; i++) {
        snprintf(key, sizeof key, "c/%05d", i);
        bc_info st = BC_INFO_INIT;
        if (i % 2) {
            CHECK(bc_stat(s, K(key), &st, NULL) == BC_NOT_FOUND);
            continue;
        }
        CHECK(bc_stat(s, K(key), &st, NULL) == BC_OK);
        CHECK(st.version == infos[i].version && st.created_unix_micros == infos[i].created_unix_micros);
        CHECK(st.expires_unix_micros == infos[i].expires_unix_micros);
        CHECK((st.expires_unix_micros != 0) == (i % 3 == 0));
        fill(val, sizeof val, (unsigned)i);
        bc_buf buf = {0};
        CHECK(bc_get(s, K(key), &buf, NULL) == BC_OK && buf.len == sizeof val &&
              memcmp(buf.data, val, sizeof val) == 0);
        bc_buf_free(&buf);
    }
    /* The joined space takes an object larger than any hole was. */
    static uint8_t big[512 << 10];
    fill(big, sizeof big, 77);
    CHECK(bc_put(s, K("c/big"), big, sizeof big, NULL, NULL) == BC_OK);
    /* Again, with nothing to gain: fine, and `out` may be NULL. */
    CHECK(bc_compact(s, NULL, NULL) == BC_OK);
    CHECK(bc_compact(NULL, &r, &err) == BC_INVALID_ARGUMENT);
    CHECK(err && strstr(bc_error_message(err), "NULL") != NULL);
    bc_error_free(err);
    err = NULL;
    CHECK(bc_close(s, NULL) == BC_OK);
    CHECK(bc_compact(s, &r, NULL) == BC_CLOSED);
    bc_store_free(s);

    /* The moves are durable; a read-only store is not compacted. */
    bc_options ro = BC_OPTIONS_INIT;
    ro.read_only = 1;
    s = open_with(p, &ro);
    if (!s) return;
    CHECK(bc_compact(s, &r, &err) == BC_UNSUPPORTED);
    CHECK(err && bc_error_code(err) == BC_UNSUPPORTED);
    bc_error_free(err);
    for (int i = 0; i < stored; i += 2) {
        snprintf(key, sizeof key, "c/%05d", i);
        fill(val, sizeof val, (unsigned)i);
        bc_buf buf = {0};
        CHECK(bc_get(s, K(key), &buf, NULL) == BC_OK && buf.len == sizeof val &&
              memcmp(buf.data, val, sizeof val) == 0);
        bc_buf_free(&buf);
    }
    bc_buf buf = {0};
    CHECK(bc_get(s, K("c/big"), &buf, NULL) == BC_OK && buf.len == sizeof big &&
          memcmp(buf.data, big, sizeof big) == 0);
    bc_buf_free(&buf);
    bc_store_free(s);
    unlink(p);
}

/* Every enum-valued and flag field of bc_options takes only its named
 * values: anything else is BC_INVALID_ARGUMENT, and nothing is created. */
static void test_options_are_checked(void) {
    char p[300];
    snprintf(p, sizeof p, "%s.opts", path);
    unlink(p);
    bc_options bad[16];
    for (int i = 0; i < 16; i++) {
        bad[i] = (bc_options)BC_OPTIONS_INIT;
        bad[i].capacity = 8u << 20;
    }
    bad[0].direct_io = 5;
    bad[1].create = 7;
    bad[2].create_new = 2;
    bad[3].read_only = -1;
    bad[4].io_engine = 9;
    bad[5].index = BC_INDEX_STORED + 1;
    bad[6].durability = 2;
    bad[7].durability = BC_DURABILITY_BUFFERED; /* without a delay */
    bad[8].max_delay_micros = 1000;             /* a delay without BUFFERED */
    bad[9].inline_threshold = -2;
    bad[10].cache_bytes = -2;
    bad[11].direct_io = -1;
    bad[12].durability = 0xffffffffu;
    bad[12].max_delay_micros = 1000;
    bad[13].create = 1 << 16;
    bad[14].salvage = 2;
    bad[15].salvage = 1; /* without read_only */
    for (int i = 0; i < 16; i++) {
        bc_error *err = NULL;
        bc_store *s = bc_open(p, &bad[i], &err);
        CHECK(s == NULL);
        CHECK(bc_error_code(err) == BC_INVALID_ARGUMENT);
        if (bc_error_code(err) != BC_INVALID_ARGUMENT)
            fprintf(stderr, "bad options #%d: %s\n", i, bc_error_message(err));
        bc_error_free(err);
        bc_store_free(s);
        CHECK(access(p, F_OK) != 0); /* nothing created */
    }
    bc_options d = BC_OPTIONS_INIT;
    CHECK(d.durability == BC_DURABILITY_SYNC && d.max_delay_micros == 0);
    CHECK(d.index == BC_INDEX_STORED && d.io_engine == BC_IO_AUTO);
    CHECK(d.salvage == 0);
}

/* One flipped byte in a tuple block: a plain open refuses the store, a
 * salvage open serves every other object exactly, counts the skipped
 * block, and writes nothing. */
static void test_salvage(void) {
    char p[300];
    snprintf(p, sizeof p, "%s.salvage", path);
    unlink(p);
    bc_options o = BC_OPTIONS_INIT;
    o.capacity = 16u << 20;
    o.durability = BC_DURABILITY_BUFFERED; /* one sync at the close */
    o.max_delay_micros = 10u * 1000 * 1000;
    bc_store *s = bc_open(p, &o, NULL);
    CHECK(s != NULL);
    o.durability = BC_DURABILITY_SYNC;
    o.max_delay_micros = 0;
    uint8_t val[100];
    char key[16];
    for (int i = 0; i < 3000; i++) {
        snprintf(key, sizeof key, "k%05d", i);
        memset(val, i % 251, sizeof val);
        CHECK(bc_put(s, K(key), val, sizeof val, NULL, NULL) == BC_OK);
    }
    CHECK(bc_close(s, NULL) == BC_OK);
    bc_store_free(s);

    FILE *f = fopen(p, "r+b");
    CHECK(f != NULL);
    if (!f) return;
    size_t size = 16u << 20;
    uint8_t *image = malloc(size);
    CHECK(fread(image, 1, size, f) == size);
    int flipped = 0;
    for (size_t at = 0; at + 9 < size; at++) {
        if (memcmp(image + at, "k01500", 6) == 0) {
            image[at + 8] ^= 0x40;
            flipped++;
        }
    }
    CHECK(flipped > 0);
    rewind(f);
    CHECK(fwrite(image, 1, size, f) == size);
    fclose(f);

    /* The clean close wrote an index image, which holds no keys (the hash
       index records fingerprints): it is whole, so the open loads it and
       reads no tuple block; the damaged block is found by the read of an
       object it holds. */
    bc_error *err = NULL;
    s = bc_open(p, NULL, &err);
    CHECK(s != NULL);
    if (s) {
        bc_buf got = {0};
        CHECK(bc_get(s, K("k01500"), &got, &err) == BC_CORRUPT &&
              bc_error_code(err) == BC_CORRUPT);
        bc_error_free(err);
        err = NULL;
        CHECK(bc_close(s, NULL) == BC_OK);
        bc_store_free(s);
    }
    o.read_only = 1;
    o.salvage = 1;
    s = bc_open(p, &o, NULL);
    CHECK(s != NULL);
    if (s) {
        bc_stats st = BC_STATS_INIT;
        CHECK(bc_store_stats(s, &st, NULL) == BC_OK && st.skipped == 1 && st.clean);
        int served = 0;
        for (int i = 0; i < 3000; i++) {
            snprintf(key, sizeof key, "k%05d", i);
            bc_buf buf = {0};
            bc_code c = bc_get(s, K(key), &buf, NULL);
            CHECK(c == BC_OK || c == BC_NOT_FOUND);
            if (c == BC_OK) {
                served++;
                memset(val, i % 251, sizeof val);
                CHECK(buf.len == sizeof val && memcmp(buf.data, val, sizeof val) == 0);
            }
            CHECK(i != 1500 || c == BC_NOT_FOUND);
            bc_buf_free(&buf);
        }
        CHECK(served > 0 && served < 3000);
        bc_store_free(s);
    }
    /* Nothing written to the damaged store. */
    f = fopen(p, "rb");
    uint8_t *after = malloc(size);
    CHECK(f && fread(after, 1, size, f) == size && memcmp(after, image, size) == 0);
    if (f) fclose(f);
    free(after);
    free(image);
    unlink(p);
}

/* Buffered durability: changes are acknowledged at once and all there
 * after a close and reopen; a sync makes them durable on demand. */
static void test_buffered_durability(void) {
    char p[300];
    snprintf(p, sizeof p, "%s.buffered", path);
    unlink(p);
    bc_options o = BC_OPTIONS_INIT;
    o.capacity = 8u << 20;
    o.durability = BC_DURABILITY_BUFFERED;
    o.max_delay_micros = 20000;
    bc_store *s = open_with(p, &o);
    if (!s) return;
    static uint8_t val[20000];
    fill(val, sizeof val, 9);
    char key[32];
    for (int i = 0; i < 50; i++) {
        snprintf(key, sizeof key, "b/%02d", i);
        CHECK(bc_put(s, K(key), val, (size_t)(i * 400), NULL, NULL) == BC_OK);
    }
    CHECK(bc_delete(s, K("b/07"), NULL) == BC_OK);
    CHECK(bc_sync(s, NULL) == BC_OK);
    CHECK(bc_put(s, K("after-sync"), val, 100, NULL, NULL) == BC_OK);
    CHECK(bc_close(s, NULL) == BC_OK);
    bc_store_free(s);
    bc_options r = BC_OPTIONS_INIT;
    r.read_only = 1;
    s = open_with(p, &r);
    if (!s) return;
    bc_stats st = BC_STATS_INIT;
    CHECK(bc_store_stats(s, &st, NULL) == BC_OK && st.objects == 50);
    bc_buf buf = {0};
    CHECK(bc_get(s, K("b/49"), &buf, NULL) == BC_OK && buf.len == 49 * 400 &&
          memcmp(buf.data, val, buf.len) == 0);
    bc_buf_free(&buf);
    CHECK(bc_get(s, K("b/07"), &buf, NULL) == BC_NOT_FOUND);
    CHECK(bc_get(s, K("after-sync"), &buf, NULL) == BC_OK && buf.len == 100);
    bc_buf_free(&buf);
    bc_store_free(s);
    unlink(p);
}

/* A cache store (BC_EVICTION_S3FIFO): puts of ten times its size all
 * succeed, it keeps its size, and bc_stats counts hits, misses and
 * evictions; an unknown eviction is BC_INVALID_ARGUMENT. */
static void test_eviction(void) {
    char p[300];
    snprintf(p, sizeof p, "%s.cache", path);
    unlink(p);
    bc_options o = BC_OPTIONS_INIT;
    o.capacity = 2u << 20;
    o.eviction = 7;
    bc_error *err = NULL;
    CHECK(bc_open(p, &o, &err) == NULL && bc_error_code(err) == BC_INVALID_ARGUMENT);
    bc_error_free(err);
    o.eviction = BC_EVICTION_S3FIFO;
    bc_store *s = open_with(p, &o);
    if (!s) return;
    static uint8_t val[50000];
    fill(val, sizeof val, 3);
    char key[32];
    for (int i = 0; i < 400; i++) {
        snprintf(key, sizeof key, "c/%03d", i);
        CHECK(bc_put(s, K(key), val, sizeof val, NULL, NULL) == BC_OK);
    }
    bc_buf buf = {0};
    CHECK(bc_get(s, K("c/399"), &buf, NULL) == BC_OK && buf.len == sizeof val);
    bc_buf_free(&buf);
    CHECK(bc_get(s, K("nope"), &buf, NULL) == BC_NOT_FOUND);
    bc_stats st = BC_STATS_INIT;
    CHECK(bc_store_stats(s, &st, NULL) == BC_OK);
    CHECK(st.capacity == (2u << 20) && st.evictions > 0 && st.objects + st.evictions == 400);
    CHECK(st.evicted_bytes == st.evictions * sizeof val);
    CHECK(st.hits == 1 && st.misses == 1);
    bc_store_free(s);
    unlink(p);
}

/* bc_close with an upload outstanding: the upload's later calls fail with
 * BC_CLOSED, nothing lands, its space is free at the next open. */
static void test_close_with_an_upload_outstanding(void) {
    char p[300];
    snprintf(p, sizeof p, "%s.closeup", path);
    unlink(p);
    bc_options o = BC_OPTIONS_INIT;
    o.capacity = 8u << 20;
    bc_store *s = open_with(p, &o);
    if (!s) return;
    uint64_t free0 = free_bytes(s);
    static uint8_t val[3 * 4096 + 10];
    fill(val, sizeof val, 6);
    bc_upload *up = NULL, *small = NULL;
    CHECK(bc_upload_begin(s, K("late"), sizeof val, &up, NULL) == BC_OK);
    CHECK(bc_upload_begin(s, K("late-inline"), 10, &small, NULL) == BC_OK);
    CHECK(bc_upload_write(up, 0, val, 4096, NULL) == BC_OK);
    CHECK(bc_upload_write(up, 4096, val + 4096, 4096, NULL) == BC_OK);
    CHECK(bc_close(s, NULL) == BC_OK);
    bc_error *err = NULL;
    CHECK(bc_upload_write(up, 8192, val + 8192, sizeof val - 8192, &err) == BC_CLOSED);
    CHECK(bc_error_code(err) == BC_CLOSED);
    bc_error_free(err);
    CHECK(bc_upload_write(small, 0, val, 10, NULL) == BC_CLOSED);
    CHECK(bc_upload_commit(up, NULL, NULL) == BC_CLOSED); /* and frees it */
    CHECK(bc_upload_commit(small, NULL, NULL) == BC_CLOSED);
    bc_upload *after = NULL;
    CHECK(bc_upload_begin(s, K("after"), 10, &after, NULL) == BC_CLOSED && after == NULL);
    CHECK(bc_put(s, K("after"), val, 10, NULL, NULL) == BC_CLOSED);
    bc_store_free(s);
    s = open_with(p, &o);
    if (!s) return;
    bool has = true;
    CHECK(bc_contains(s, K("late"), &has, NULL) == BC_OK && !has);
    CHECK(bc_contains(s, K("late-inline"), &has, NULL) == BC_OK && !has);
    CHECK(bc_contains(s, K("after"), &has, NULL) == BC_OK && !has);
    bc_stats st = BC_STATS_INIT;
    CHECK(bc_store_stats(s, &st, NULL) == BC_OK && st.objects == 0);
    CHECK(free_bytes(s) == free0);
    bc_store_free(s);
    unlink(p);
}

/* The items a bulk-load callback yields: `count` of them, `key_prefix` and
 * a number, values of size `value_size(i)`; `cancel_at`/`null_at` make the
 * callback stop or hand out a NULL key at that item. */
struct items {
    int count, next;
    const char *key_prefix;
    int cancel_at, null_at, empty_at; /* -1: never */
    char key[64];
    uint8_t *value;
    pthread_t thread;
    int other_thread;
};

static size_t value_size(int i) { return (size_t)(i % 7 == 0 ? 70000 + i : i * 13 % 900); }

static int next_item(bc_bulk_item *item, void *ctx) {
    struct items *it = ctx;
    if (!pthread_equal(pthread_self(), it->thread)) it->other_thread++;
    if (it->next == it->count) return 0;
    int i = it->next++;
    if (i == it->cancel_at) return -1;
    snprintf(it->key, sizeof it->key, "%s%05d", it->key_prefix, i);
    fill(it->value, value_size(i), (unsigned)i);
    item->key = (const uint8_t *)it->key;
    item->key_len = i == it->empty_at ? 0 : strlen(it->key);
    item->value = it->value;
    item->value_len = value_size(i);
    if (i == it->null_at) item->key = NULL;
    return 1;
}

static struct items items_of(const char *prefix, int count) {
    static uint8_t value[80000];
    struct items it = {count, 0, prefix, -1, -1, -1, {0}, value, pthread_self(), 0};
    return it;
}

static bool holds_item(bc_store *s, const char *prefix, int i) {
    char key[64];
    snprintf(key, sizeof key, "%s%05d", prefix, i);
    static uint8_t want[80000];
    fill(want, value_size(i), (unsigned)i);
    bc_buf buf = {0};
    bool ok = bc_get(s, K(key), &buf, NULL) == BC_OK && buf.len == value_size(i) &&
              memcmp(buf.data, want, buf.len) == 0;
    bc_buf_free(&buf);
    return ok;
}

/* bc_bulk_load: every item lands with its bytes, the callback runs on the
 * caller's thread; a cancel keeps the items before it and says so; a bad
 * item stops the load with BC_INVALID_ARGUMENT, the ones before it kept. */
static void test_bulk_load(void) {
    char p[300];
    snprintf(p, sizeof p, "%s.bulk", path);
    unlink(p);
    bc_options o = BC_OPTIONS_INIT;
    o.capacity = 16u << 20;
    o.index = BC_INDEX_BTREE;
    bc_store *s = open_with(p, &o);
    if (!s) return;
    struct items it = items_of("load/", 3000);
    bc_load_report r = BC_LOAD_REPORT_INIT;
    bc_error *err = NULL;
    CHECK(bc_bulk_load(s, next_item, &it, &r, &err) == BC_OK);
    if (err) fprintf(stderr, "bulk load: %s\n", bc_error_message(err));
    bc_error_free(err);
    err = NULL;
    uint64_t bytes = 0;
    for (int i = 0; i < 3000; i++) bytes += value_size(i);
    CHECK(r.objects == 3000 && r.bytes == bytes && r.groups >= 1 && r.elapsed_nanos > 0);
    CHECK(it.other_thread == 0);
    int bad = 0;
    for (int i = 0; i < 3000; i++) bad += !holds_item(s, "load/", i);
    CHECK(bad == 0);
    /* A load that replaces keys, NULL report, no items at all. */
    it = items_of("load/", 10);
    CHECK(bc_bulk_load(s, next_item, &it, NULL, NULL) == BC_OK);
    it = items_of("none/", 0);
    CHECK(bc_bulk_load(s, next_item, &it, &r, NULL) == BC_OK && r.objects == 0);

    /* Cancelled at item 40: items 0..39 are loaded, and the report says so. */
    it = items_of("cancel/", 100);
    it.cancel_at = 40;
    r = (bc_load_report)BC_LOAD_REPORT_INIT;
    CHECK(bc_bulk_load(s, next_item, &it, &r, &err) == BC_CANCELLED);
    CHECK(bc_error_code(err) == BC_CANCELLED && strstr(bc_error_message(err), "returned -1"));
    bc_error_free(err);
    err = NULL;
    CHECK(r.objects == 40);
    CHECK(holds_item(s, "cancel/", 39) && !holds_item(s, "cancel/", 40));
    CHECK(it.next == 41); /* not called again after the cancel */

    /* A NULL key with a length at item 5: the five before it are loaded. */
    it = items_of("null/", 20);
    it.null_at = 5;
    CHECK(bc_bulk_load(s, next_item, &it, &r, &err) == BC_INVALID_ARGUMENT);
    CHECK(err && strstr(bc_error_message(err), "key is NULL"));
    bc_error_free(err);
    err = NULL;
    CHECK(holds_item(s, "null/", 4) && !holds_item(s, "null/", 5) && !holds_item(s, "null/", 6));
    /* An empty key is the engine's INVALID_ARGUMENT. */
    it = items_of("empty/", 20);
    it.empty_at = 3;
    CHECK(bc_bulk_load(s, next_item, &it, NULL, NULL) == BC_INVALID_ARGUMENT);

    CHECK(bc_bulk_load(NULL, next_item, &it, NULL, NULL) == BC_INVALID_ARGUMENT);
    CHECK(bc_bulk_load(s, NULL, NULL, NULL, &err) == BC_INVALID_ARGUMENT);
    bc_error_free(err);
    err = NULL;
    CHECK(bc_close(s, NULL) == BC_OK);
    it = items_of("closed/", 5);
    CHECK(bc_bulk_load(s, next_item, &it, NULL, NULL) == BC_CLOSED);
    bc_store_free(s);

    bc_options ro = BC_OPTIONS_INIT;
    ro.read_only = 1;
    s = open_with(p, &ro);
    if (!s) return;
    it = items_of("ro/", 5);
    CHECK(bc_bulk_load(s, next_item, &it, NULL, NULL) == BC_UNSUPPORTED);
    CHECK(holds_item(s, "load/", 2999));
    bc_store_free(s);
    unlink(p);
}

/* What a cursor listed: copies of the keys (valid only until the next
 * call) and the entries. */
struct listed {
    int n;
    char keys[3100][16];
    size_t lens[3100];
    bc_list_entry entries[3100];
};

static bc_code drain(bc_list_cursor *c, struct listed *l) {
    l->n = 0;
    for (;;) {
        bc_list_entry e = BC_LIST_ENTRY_INIT;
        bool has = false;
        bc_code rc = bc_list_next(c, &e, &has, NULL);
        if (rc != BC_OK || !has) return rc;
        if (l->n < 3100 && e.key_len <= sizeof l->keys[0]) {
            memset(l->keys[l->n], 0, sizeof l->keys[0]);
            memcpy(l->keys[l->n], e.key, e.key_len);
            l->lens[l->n] = e.key_len;
            l->entries[l->n] = e;
        }
        l->n++;
    }
}

static int key_cmp(const void *a, const void *b) {
    return memcmp(a, b, 16);
}

/* bc_list_open / bc_keys_open / bc_list_next / bc_list_free: keys in byte
 * order (binary keys too), over several pages, with their size, version,
 * times; expired keys are not listed; the hash index (the default) lists
 * by prefix in byte order too, and every key. A cursor that outlives its
 * store's close or free says BC_CLOSED and touches nothing freed
 * (valgrind, ASan). */
static void test_listing(void) {
    static struct listed l;
    char p[300];
    snprintf(p, sizeof p, "%s.list", path);
    unlink(p);
    bc_options o = BC_OPTIONS_INIT;
    o.capacity = 16u << 20;
    o.index = BC_INDEX_BTREE;
    bc_store *s = open_with(p, &o);
    if (!s) return;
    struct items it = items_of("k/", 2500); /* more than one page (1024) */
    CHECK(bc_bulk_load(s, next_item, &it, NULL, NULL) == BC_OK);
    const uint8_t bin1[] = {'b', 0, 0xff, '\n'}, bin2[] = {'b', 0, 1};
    bc_info i1 = BC_INFO_INIT;
    CHECK(bc_put(s, bin1, sizeof bin1, (const uint8_t *)"one", 3, &i1, NULL) == BC_OK);
    CHECK(bc_put(s, bin2, sizeof bin2, (const uint8_t *)"twotwo", 6, NULL, NULL) == BC_OK);
    CHECK(bc_put_ttl(s, K("k/zz-expiring"), (const uint8_t *)"x", 1, 1000, NULL, NULL) == BC_OK);
    CHECK(bc_put_ttl(s, K("k/zz-lasting"), (const uint8_t *)"y", 1, 3600000000ull, NULL, NULL) == BC_OK);
    sleep_micros(5000);

    bc_list_cursor *c = NULL;
    CHECK(bc_list_open(s, K("k/"), &c, NULL) == BC_OK && c != NULL);
    CHECK(drain(c, &l) == BC_OK);
    CHECK(l.n == 2501);
    int in_order = 1;
    for (int i = 1; i < l.n && i < 3100; i++)
        in_order &= memcmp(l.keys[i - 1], l.keys[i], 16) < 0;
    CHECK(in_order);
    CHECK(l.lens[0] == 7 && memcmp(l.keys[0], "k/00000", 7) == 0);
    CHECK(l.entries[7].size == value_size(7) && l.entries[7].version > 0);
    CHECK(l.entries[7].created_unix_micros > 0 && l.entries[7].expires_unix_micros == 0);
    CHECK(l.lens[2500] == 12 && memcmp(l.keys[2500], "k/zz-lasting", 12) == 0);
    CHECK(l.entries[2500].expires_unix_micros > l.entries[2500].created_unix_micros);
    /* The end is sticky. */
    bc_list_entry e = BC_LIST_ENTRY_INIT;
    bool has = true;
    CHECK(bc_list_next(c, &e, &has, NULL) == BC_OK && !has);
    CHECK(bc_list_next(c, &e, &has, NULL) == BC_OK && !has);
    bc_list_free(c);

    /* Binary keys, a prefix with a NUL in it. */
    c = NULL;
    CHECK(bc_list_open(s, (const uint8_t *)"b\0", 2, &c, NULL) == BC_OK);
    CHECK(drain(c, &l) == BC_OK && l.n == 2);
    CHECK(l.lens[0] == sizeof bin2 && memcmp(l.keys[0], bin2, sizeof bin2) == 0);
    CHECK(l.lens[1] == sizeof bin1 && memcmp(l.keys[1], bin1, sizeof bin1) == 0);
    CHECK(l.entries[1].size == 3 && l.entries[1].version == i1.version &&
          l.entries[1].created_unix_micros == i1.created_unix_micros);
    bc_list_free(c);
    /* No match; every key; bc_keys_open on an ordered index is ordered. */
    CHECK(bc_list_open(s, K("nothing/"), &c, NULL) == BC_OK);
    CHECK(drain(c, &l) == BC_OK && l.n == 0);
    bc_list_free(c);
    CHECK(bc_list_open(s, NULL, 0, &c, NULL) == BC_OK);
    CHECK(drain(c, &l) == BC_OK && l.n == 2503);
    bc_list_free(c);
    CHECK(bc_keys_open(s, &c, NULL) == BC_OK);
    CHECK(drain(c, &l) == BC_OK && l.n == 2503);
    CHECK(l.lens[0] == sizeof bin2 && memcmp(l.keys[0], bin2, sizeof bin2) == 0);
    bc_list_free(c);

    /* Bad arguments. */
    c = NULL;
    bc_error *err = NULL;
    CHECK(bc_list_open(NULL, K("k/"), &c, NULL) == BC_INVALID_ARGUMENT && c == NULL);
    CHECK(bc_list_open(s, NULL, 3, &c, &err) == BC_INVALID_ARGUMENT && c == NULL);
    CHECK(strstr(bc_error_message(err), "prefix") != NULL);
    bc_error_free(err);
    err = NULL;
    CHECK(bc_list_open(s, K("k/"), NULL, NULL) == BC_INVALID_ARGUMENT);
    CHECK(bc_keys_open(s, NULL, NULL) == BC_INVALID_ARGUMENT);
    CHECK(bc_keys_open(NULL, &c, NULL) == BC_INVALID_ARGUMENT);
    CHECK(bc_list_next(NULL, &e, &has, NULL) == BC_INVALID_ARGUMENT);
    CHECK(bc_list_open(s, K("k/"), &c, NULL) == BC_OK);
    CHECK(bc_list_next(c, NULL, &has, NULL) == BC_INVALID_ARGUMENT);
    CHECK(bc_list_next(c, &e, NULL, NULL) == BC_INVALID_ARGUMENT);
    CHECK(bc_list_next(c, &e, &has, NULL) == BC_OK && has); /* still usable */
    bc_list_free(c);
    bc_list_free(NULL);

    /* A cursor across bc_close: BC_CLOSED, then the end; freed after. One
     * across bc_store_free too, mid-listing and before its first key. */
    bc_list_cursor *mid = NULL, *fresh = NULL, *after_free = NULL;
    CHECK(bc_list_open(s, K("k/"), &mid, NULL) == BC_OK);
    CHECK(bc_list_next(mid, &e, &has, NULL) == BC_OK && has);
    CHECK(bc_keys_open(s, &fresh, NULL) == BC_OK);
    CHECK(bc_close(s, NULL) == BC_OK);
    CHECK(bc_list_next(mid, &e, &has, &err) == BC_CLOSED);
    CHECK(bc_error_code(err) == BC_CLOSED);
    bc_error_free(err);
    err = NULL;
    CHECK(bc_list_next(mid, &e, &has, NULL) == BC_OK && !has);
    CHECK(bc_list_open(s, K("k/"), &c, NULL) == BC_CLOSED);
    CHECK(bc_keys_open(s, &c, NULL) == BC_CLOSED);
    bc_store_free(s);
    CHECK(bc_list_next(fresh, &e, &has, NULL) == BC_CLOSED);
    bc_list_free(mid);
    bc_list_free(fresh);

    s = open_with(p, &o);
    if (!s) return;
    CHECK(bc_list_open(s, K("k/"), &after_free, NULL) == BC_OK);
    CHECK(bc_list_next(after_free, &e, &has, NULL) == BC_OK && has);
    bc_store_free(s); /* without bc_close */
    CHECK(bc_list_next(after_free, &e, &has, NULL) == BC_CLOSED);
    bc_list_free(after_free);
    unlink(p);

    /* The hash index: by prefix in byte order, from a snapshot of the
     * matching keys; every key, unordered; a key deleted before its turn
     * is skipped, one added meanwhile may or may not come (after the
     * others: byte order). */
    o.index = BC_INDEX_HASH;
    s = open_with(p, &o);
    if (!s) return;
    it = items_of("h/", 1500);
    CHECK(bc_bulk_load(s, next_item, &it, NULL, NULL) == BC_OK);
    CHECK(bc_put(s, K("g/0"), (const uint8_t *)"g", 1, NULL, NULL) == BC_OK);
    CHECK(bc_list_open(s, K("h/"), &c, NULL) == BC_OK);
    CHECK(bc_list_next(c, &e, &has, NULL) == BC_OK && has);
    CHECK(e.key_len == 7 && memcmp(e.key, "h/00000", 7) == 0);
    CHECK(e.size == value_size(0) && e.version > 0);
    CHECK(bc_delete(s, K("h/01498"), NULL) == BC_OK);
    CHECK(bc_put(s, K("h/new"), (const uint8_t *)"n", 1, NULL, NULL) == BC_OK);
    CHECK(drain(c, &l) == BC_OK);
    CHECK(l.n == 1498 || (l.n == 1499 && l.lens[1498] == 5 && memcmp(l.keys[1498], "h/new", 5) == 0));
    int ordered = 1;
    for (int i = 0; i < 1497; i++) {
        char want[16] = {0};
        snprintf(want, sizeof want, "h/%05d", i + 1);
        ordered &= memcmp(l.keys[i], want, 16) == 0;
    }
    CHECK(ordered);
    CHECK(l.lens[1497] == 7 && memcmp(l.keys[1497], "h/01499", 7) == 0);
    bc_list_free(c);
    CHECK(bc_put(s, K("h/01498"), (const uint8_t *)"x", 1, NULL, NULL) == BC_OK);
    CHECK(bc_delete(s, K("h/new"), NULL) == BC_OK);
    CHECK(bc_delete(s, K("g/0"), NULL) == BC_OK);
    CHECK(bc_keys_open(s, &c, NULL) == BC_OK);
    CHECK(bc_delete(s, K("h/01499"), NULL) == BC_OK);
    CHECK(bc_put(s, K("h/new"), (const uint8_t *)"n", 1, NULL, NULL) == BC_OK);
    CHECK(drain(c, &l) == BC_OK);
    CHECK(l.n == 1499);
    qsort(l.keys, (size_t)l.n, sizeof l.keys[0], key_cmp);
    int all = 1;
    for (int i = 0; i < 1499; i++) {
        char want[16] = {0};
        snprintf(want, sizeof want, "h/%05d", i);
        all &= memcmp(l.keys[i], want, 16) == 0;
    }
    CHECK(all);
    bc_list_free(c);
    CHECK(bc_keys_open(s, &c, NULL) == BC_OK);
    CHECK(bc_list_next(c, &e, &has, NULL) == BC_OK && has);
    bc_store_free(s);
    CHECK(bc_list_next(c, &e, &has, NULL) == BC_CLOSED);
    bc_list_free(c);
    unlink(p);
}

/* The structs that grow (the header's "Structs that grow"): each carries
 * struct_size; BC_OPTIONS_INIT is what bc_options_init fills; a size no
 * header gave the struct (0, garbage, one from a newer header than the
 * library) is BC_INVALID_ARGUMENT before anything is done, and the
 * library never touches a byte past the struct (the options and infos
 * here are heap blocks of exactly their size: ASan and valgrind see any
 * access beyond). Structs the library hands to callbacks carry its size. */
static void check_refused(bc_code rc, bc_error *err, const char *name, const char *why) {
    CHECK(rc == BC_INVALID_ARGUMENT);
    const char *m = bc_error_message(err);
    CHECK(strstr(m, name) != NULL && strstr(m, "struct_size") != NULL && strstr(m, why) != NULL);
    if (strstr(m, why) == NULL) fprintf(stderr, "refused size: %s\n", m);
}

static int item_sizes_ok;
static int sized_item(bc_bulk_item *item, void *ctx) {
    int *left = ctx;
    if (*left == 0) return 0;
    item_sizes_ok &= item->struct_size == sizeof(bc_bulk_item) &&
                     BC_HAS_FIELD(item, bc_bulk_item, value_len);
    static char key[16];
    snprintf(key, sizeof key, "bulk-%d", (*left)--);
    item->key = (const uint8_t *)key;
    item->key_len = strlen(key);
    item->value = (const uint8_t *)"v";
    item->value_len = 1;
    return 1;
}

static int sized_upload_info(const bc_upload_info *info, void *ctx) {
    *(int *)ctx = info->struct_size == sizeof(bc_upload_info) &&
                  BC_HAS_FIELD(info, bc_upload_info, started_micros);
    return 0;
}

static void test_structs_carry_their_size(void) {
    char p[300];
    snprintf(p, sizeof p, "%s.sized", path);
    unlink(p);
    bc_error *err = NULL;

    /* The macro and the function agree, field by field. */
    bc_options m = BC_OPTIONS_INIT, f;
    memset(&f, 0x5a, sizeof f);
    CHECK(bc_options_init(&f, sizeof f, NULL) == BC_OK);
    CHECK(m.struct_size == sizeof(bc_options) && f.struct_size == sizeof(bc_options));
    CHECK(m.capacity == f.capacity && m.index == f.index && m.io_engine == f.io_engine &&
          m.inline_threshold == f.inline_threshold && m.direct_io == f.direct_io &&
          m.create == f.create && m.create_new == f.create_new && m.read_only == f.read_only &&
          m.salvage == f.salvage && m.cache_bytes == f.cache_bytes &&
          m.max_capacity == f.max_capacity && m.durability == f.durability &&
          m.max_delay_micros == f.max_delay_micros && m.eviction == f.eviction &&
          m.eviction == BC_EVICTION_NONE);

    /* bc_options_init refuses sizes no header gave, and writes nothing. */
    const size_t bad_sizes[] = {0, 8, sizeof(bc_options) - 4, sizeof(bc_options) + 8,
                                (size_t)0xdeadbeefdeadbeefull};
    for (size_t i = 0; i < sizeof bad_sizes / sizeof bad_sizes[0]; i++) {
        bc_options untouched;
        memset(&untouched, 0x5a, sizeof untouched);
        unsigned char copy[sizeof untouched];
        memcpy(copy, &untouched, sizeof copy);
        bc_code rc = bc_options_init(&untouched, bad_sizes[i], &err);
        check_refused(rc, err, "bc_options", "struct_size is");
        CHECK(memcmp(copy, &untouched, sizeof copy) == 0);
        bc_error_free(err);
        err = NULL;
    }
    CHECK(bc_options_init(NULL, sizeof(bc_options), NULL) == BC_INVALID_ARGUMENT);
    /* The size before `eviction` was added (88 bytes) is an older header's:
     * filled up to there, the field beyond left as it was. */
    bc_options older;
    memset(&older, 0x5a, sizeof older);
    CHECK(bc_options_init(&older, offsetof(bc_options, eviction), NULL) == BC_OK);
    CHECK(older.struct_size == offsetof(bc_options, eviction) && older.capacity == 0);
    CHECK(older.eviction == 0x5a5a5a5a5a5a5a5aull);

    /* bc_open: exactly sizeof(bc_options) bytes on the heap open a store. */
    bc_options *heap = malloc(sizeof *heap);
    CHECK(heap != NULL);
    if (!heap) return;
    *heap = (bc_options)BC_OPTIONS_INIT;
    heap->capacity = 8u << 20;
    bc_store *s = bc_open(p, heap, &err);
    CHECK(s != NULL);
    bc_store_free(s);
    unlink(p);

    /* A struct_size that was never set, or garbage: refused, nothing made. */
    heap->struct_size = 0;
    CHECK(bc_open(p, heap, &err) == NULL);
    check_refused(bc_error_code(err), err, "bc_options", "BC_OPTIONS_INIT");
    bc_error_free(err);
    err = NULL;
    heap->struct_size = (size_t)0x7ffd5a5a12345678ull;
    CHECK(bc_open(p, heap, &err) == NULL);
    check_refused(bc_error_code(err), err, "bc_options", "newer blobcask.h");
    bc_error_free(err);
    err = NULL;
    CHECK(access(p, F_OK) != 0);
    free(heap);

    /* A program built against a newer header (one more field) on this
     * library: refused, not half-understood. */
    struct {
        bc_options known;
        uint64_t newer_field;
    } next = {BC_OPTIONS_INIT, 7};
    next.known.struct_size = sizeof next;
    CHECK(bc_open(p, &next.known, &err) == NULL);
    check_refused(bc_error_code(err), err, "bc_options", "newer blobcask.h");
    bc_error_free(err);
    err = NULL;
    CHECK(access(p, F_OK) != 0);

    s = bc_open(p, NULL, NULL);
    CHECK(s != NULL);
    if (!s) return;

    /* Reports and infos the library fills: a bad size is refused before the
     * call does anything (the put stores nothing). */
    bc_info *info = malloc(sizeof *info);
    CHECK(info != NULL);
    if (!info) return;
    *info = (bc_info)BC_INFO_INIT;
    CHECK(bc_put(s, K("k"), (const uint8_t *)"value", 5, info, NULL) == BC_OK);
    CHECK(info->struct_size == sizeof(bc_info) && info->size == 5 && info->version > 0);
    info->struct_size = 0;
    bc_code rc = bc_put(s, K("refused"), (const uint8_t *)"v", 1, info, &err);
    check_refused(rc, err, "bc_info", "BC_INFO_INIT");
    bc_error_free(err);
    err = NULL;
    bool has = true;
    CHECK(bc_contains(s, K("refused"), &has, NULL) == BC_OK && !has);
    info->struct_size = 3;
    CHECK(bc_stat(s, K("k"), info, NULL) == BC_INVALID_ARGUMENT);
    CHECK(info->struct_size == 3 && info->size == 5); /* untouched */
    free(info);

    bc_stats st = BC_STATS_INIT;
    st.struct_size = sizeof st + 8;
    CHECK(bc_store_stats(s, &st, NULL) == BC_INVALID_ARGUMENT);
    st.struct_size = sizeof st;
    CHECK(bc_store_stats(s, &st, NULL) == BC_OK && st.objects == 1);
    bc_compact_report cr = BC_COMPACT_REPORT_INIT;
    cr.struct_size = 1;
    CHECK(bc_compact(s, &cr, NULL) == BC_INVALID_ARGUMENT);
    char dest[320];
    snprintf(dest, sizeof dest, "%s.backup", p);
    unlink(dest);
    bc_backup_report br = BC_BACKUP_REPORT_INIT;
    br.struct_size = 0;
    CHECK(bc_backup(s, dest, &br, NULL) == BC_INVALID_ARGUMENT);
    CHECK(access(dest, F_OK) != 0); /* no copy made */

    /* An upload whose commit is refused for its info is freed, uncommitted. */
    bc_upload *up = NULL;
    CHECK(bc_upload_begin(s, K("upload"), 3, &up, NULL) == BC_OK);
    CHECK(bc_upload_write(up, 0, (const uint8_t *)"abc", 3, NULL) == BC_OK);
    int upload_info_ok = 0;
    CHECK(bc_list_uploads(s, sized_upload_info, &upload_info_ok, NULL) == BC_OK && upload_info_ok);
    bc_info bad_info = BC_INFO_INIT;
    bad_info.struct_size = 12345;
    CHECK(bc_upload_commit(up, &bad_info, NULL) == BC_INVALID_ARGUMENT);
    CHECK(bc_contains(s, K("upload"), &has, NULL) == BC_OK && !has);

    /* A listing entry with a bad size does not consume the entry. */
    bc_list_cursor *c = NULL;
    CHECK(bc_keys_open(s, &c, NULL) == BC_OK);
    bc_list_entry e = BC_LIST_ENTRY_INIT;
    e.struct_size = 0;
    has = false;
    CHECK(bc_list_next(c, &e, &has, NULL) == BC_INVALID_ARGUMENT);
    e.struct_size = sizeof e;
    CHECK(bc_list_next(c, &e, &has, NULL) == BC_OK && has && e.key_len == 1 && e.key[0] == 'k');
    bc_list_free(c);

    /* The bulk load's items carry the library's size; a bad report size is
     * refused before any item is asked for. */
    int left = 3;
    bc_load_report lr = BC_LOAD_REPORT_INIT;
    lr.struct_size = 7;
    CHECK(bc_bulk_load(s, sized_item, &left, &lr, NULL) == BC_INVALID_ARGUMENT && left == 3);
    lr.struct_size = sizeof lr;
    item_sizes_ok = 1;
    CHECK(bc_bulk_load(s, sized_item, &left, &lr, NULL) == BC_OK && lr.objects == 3);
    CHECK(item_sizes_ok);
    bc_store_free(s);
    unlink(p);
}

/* A message says what failed without the code's name (C callers print
 * bc_code_name beside it, and it read "NOT_FOUND: NOT_FOUND: ..."), for
 * errors of the engine and of the binding alike; an error the OS reported
 * carries its errno (bc_error_errno), others 0. */
static int starts_with(const char *s, const char *prefix) {
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static void check_message(bc_code got, bc_code want, bc_error *err) {
    CHECK(got == want && err != NULL);
    if (!err) return;
    const char *m = bc_error_message(err);
    CHECK(m[0] != '\0');
    for (int code = 0; code <= 99; code++) {
        if (strcmp(bc_code_name(code), "INTERNAL") == 0 && code != BC_INTERNAL) continue;
        char named[64];
        snprintf(named, sizeof named, "%s:", bc_code_name(code));
        if (strstr(m, named) != NULL) {
            fprintf(stderr, "message of %s names a code: %s\n", bc_code_name(want), m);
            failures++;
        }
    }
    CHECK(!starts_with(m, bc_code_name(want)));
    CHECK(bc_error_errno(err) == 0 || want == BC_IO);
}

static void test_error_messages_and_errno(void) {
    char p[300], file[300], inside[320];
    snprintf(p, sizeof p, "%s.messages", path);
    snprintf(file, sizeof file, "%s.a-file", path);
    snprintf(inside, sizeof inside, "%s/store", file);
    unlink(p);
    bc_error *err = NULL;
    bc_store *s = bc_open(p, NULL, &err);
    CHECK(s != NULL);
    if (!s) {
        bc_error_free(err);
        return;
    }
    bc_buf buf = {0};
    bc_code rc = bc_get(s, K("absent"), &buf, &err);
    check_message(rc, BC_NOT_FOUND, err);
    CHECK(strstr(bc_error_message(err), "absent") != NULL && bc_error_errno(err) == 0);
    bc_error_free(err);
    err = NULL;
    rc = bc_put(s, NULL, 3, NULL, 0, NULL, &err);
    check_message(rc, BC_INVALID_ARGUMENT, err);
    CHECK(strcmp(bc_error_message(err), "key is NULL with length 3") == 0);
    bc_error_free(err);
    err = NULL;
    static uint8_t big_key[5000];
    memset(big_key, 'k', sizeof big_key);
    rc = bc_put(s, big_key, sizeof big_key, NULL, 0, NULL, &err);
    check_message(rc, BC_TOO_LARGE, err);
    bc_error_free(err);
    err = NULL;
    CHECK(bc_put(s, K("k"), (const uint8_t *)"v", 1, NULL, NULL) == BC_OK);
    rc = bc_put_if(s, K("k"), (const uint8_t *)"v", 1, BC_PUT_CREATE, 0, NULL, &err);
    check_message(rc, BC_ALREADY_EXISTS, err);
    bc_error_free(err);
    err = NULL;
    CHECK(bc_close(s, NULL) == BC_OK);
    rc = bc_close(s, &err);
    check_message(rc, BC_CLOSED, err);
    bc_error_free(err);
    err = NULL;
    rc = bc_get(s, K("k"), &buf, &err);
    check_message(rc, BC_CLOSED, err);
    bc_error_free(err);
    err = NULL;
    bc_store_free(s);
    unlink(p);

    /* The OS's errno: a store path below a regular file is ENOTDIR. */
    FILE *f = fopen(file, "w");
    CHECK(f != NULL);
    if (f) fclose(f);
    CHECK(bc_open(inside, NULL, &err) == NULL);
    check_message(bc_error_code(err), BC_IO, err);
    CHECK(bc_error_errno(err) == ENOTDIR);
    CHECK(strstr(bc_error_message(err), strerror(ENOTDIR)) != NULL);
    bc_error_free(err);
    err = NULL;
    unlink(file);
    CHECK(bc_error_errno(NULL) == 0);
}

/* A path is the file system's bytes: one that is not UTF-8 opens (the CLI
 * and Python take it; this refused it). What cannot hold a store is refused
 * by its kind at once (a FIFO blocked a read-only open forever), and a
 * dangling symbolic link is NOT_FOUND naming its target (it was "the path
 * kept changing while it was opened"). */
static void test_paths(void) {
    char raw[300], fifo[300], link[300], gone[300];
    snprintf(raw, sizeof raw, "%s.\xff\xfe-raw", path);
    snprintf(fifo, sizeof fifo, "%s.fifo", path);
    snprintf(link, sizeof link, "%s.link", path);
    snprintf(gone, sizeof gone, "%s.gone", path);
    unlink(raw);
    bc_error *err = NULL;
    bc_store *s = bc_open(raw, NULL, &err);
    CHECK(s != NULL);
    if (!s) {
        fprintf(stderr, "non-UTF-8 path: %s\n", bc_error_message(err));
        bc_error_free(err);
        err = NULL;
    } else {
        CHECK(bc_put(s, K("k"), (const uint8_t *)"v", 1, NULL, NULL) == BC_OK);
        bc_store_free(s);
        s = bc_open(raw, NULL, NULL);
        bc_buf buf = {0};
        CHECK(s && bc_get(s, K("k"), &buf, NULL) == BC_OK && buf.len == 1);
        bc_buf_free(&buf);
        bc_store_free(s);
    }
    unlink(raw);

    unlink(fifo);
    CHECK(mkfifo(fifo, 0600) == 0);
    bc_options ro = BC_OPTIONS_INIT;
    ro.read_only = 1;
    CHECK(bc_open(fifo, &ro, &err) == NULL && bc_error_code(err) == BC_INVALID_ARGUMENT &&
          strstr(bc_error_message(err), "FIFO") != NULL);
    bc_error_free(err);
    err = NULL;
    CHECK(bc_open(fifo, NULL, &err) == NULL && bc_error_code(err) == BC_INVALID_ARGUMENT &&
          strstr(bc_error_message(err), "FIFO") != NULL);
    bc_error_free(err);
    err = NULL;
    unlink(fifo);

    unlink(link);
    unlink(gone);
    CHECK(symlink(gone, link) == 0);
    CHECK(bc_open(link, NULL, &err) == NULL && bc_error_code(err) == BC_NOT_FOUND &&
          strstr(bc_error_message(err), "dangling symbolic link") != NULL &&
          strstr(bc_error_message(err), gone) != NULL);
    bc_error_free(err);
    err = NULL;
    CHECK(access(gone, F_OK) != 0);
    unlink(link);
}

/* Threads of this process now (/proc/self/task), waiting up to 50 ms for
 * it to come down to `want`: a thread just joined may still be listed for
 * a moment. */
static int threads_alive(int want) {
    int n = -1;
    for (int tries = 0; tries < 50; tries++) {
        DIR *d = opendir("/proc/self/task");
        if (!d) return -1;
        n = 0;
        for (struct dirent *e; (e = readdir(d)) != NULL;)
            if (e->d_name[0] != '.') n++;
        closedir(d);
        if (n <= want) break;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    return n;
}

/* No thread of the library outlives the last bc_store_free (nor a failed
 * bc_open): the engine's helper threads end and are joined then (the
 * `blocking` crate's pool kept them 500 ms, and valgrind with its default
 * leak kinds failed on them). Called with no store open and no thread of
 * the test running. */
static void test_no_thread_outlives_the_last_store(void) {
    CHECK(threads_alive(1) == 1);
    char p[300];
    snprintf(p, sizeof p, "%s.threads", path);
    unlink(p);
    bc_store *s = bc_open(p, NULL, NULL);
    CHECK(s != NULL);
    CHECK(bc_put(s, K("k"), (const uint8_t *)"v", 1, NULL, NULL) == BC_OK);
    bc_store *other = bc_open("/nonexistent-dir/store", NULL, NULL);
    CHECK(other == NULL);
    CHECK(bc_close(s, NULL) == BC_OK);
    CHECK(threads_alive(1) == 1); /* closed: nothing runs, though not freed */
    bc_store_free(s);
    CHECK(threads_alive(1) == 1);

    /* Freed without bc_close, with an index whose merges run on threads. */
    bc_options o = BC_OPTIONS_INIT;
    o.index = BC_INDEX_FST;
    o.durability = BC_DURABILITY_BUFFERED; /* no sync per put */
    o.max_delay_micros = 100000;
    s = bc_open(p, &o, NULL);
    CHECK(s != NULL);
    char key[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(key, sizeof key, "fst/%05d", i);
        CHECK(bc_put(s, K(key), (const uint8_t *)"v", 1, NULL, NULL) == BC_OK);
    }
    bc_store_free(s);
    CHECK(threads_alive(1) == 1);

    /* A failed open alone. */
    CHECK(bc_open("/nonexistent-dir/store", NULL, NULL) == NULL);
    CHECK(threads_alive(1) == 1);
    unlink(p);
}

int main(void) {
    snprintf(path, sizeof path, "/tmp/blobcask-c-test-%d.blobcask", (int)getpid());
    unlink(path);
    bc_store *s = open_store();
    test_put_get_read_stat_delete(s);
    test_errors(s);
    test_read_cache(s);
    test_conditional_put(s);
    test_upload(s);
    test_threads(s);
    test_full_store(s);
    test_create_new_and_read_only();
    test_paths();
    test_error_messages_and_errno();
    test_structs_carry_their_size();
    test_free_with_an_upload_outstanding();
    test_upload_listing();
    test_backup();
    test_growth();
    test_ttl();
    test_compact();
    test_options_are_checked();
    test_salvage();
    test_buffered_durability();
    test_eviction();
    test_close_with_an_upload_outstanding();
    test_bulk_load();
    test_listing();

    bc_stats st = BC_STATS_INIT;
    CHECK(bc_store_stats(s, &st, NULL) == BC_OK && st.capacity == (64u << 20) && st.objects > 0);
    CHECK(bc_sync(s, NULL) == BC_OK);
    uint64_t objects = st.objects;
    CHECK(bc_close(s, NULL) == BC_OK);
    bc_error *err = NULL;
    CHECK(bc_close(s, &err) == BC_CLOSED); /* double close */
    bc_error_free(err);
    CHECK(bc_put(s, K("k"), (const uint8_t *)"x", 1, NULL, NULL) == BC_CLOSED);
    bc_store_free(s);

    /* Reopen: everything acknowledged is there. */
    s = open_store();
    CHECK(bc_store_stats(s, &st, NULL) == BC_OK && st.objects == objects);
    bc_buf buf = {0};
    CHECK(bc_get(s, K("tiny"), &buf, NULL) == BC_OK && buf.len == 3 && memcmp(buf.data, "abc", 3) == 0);
    bc_buf_free(&buf);
    bc_store_free(s); /* free without close also closes */
    unlink(path);
    test_no_thread_outlives_the_last_store();

    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("blobcask C tests: all passed\n");
    return 0;
}
