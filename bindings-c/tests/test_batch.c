/* C tests for atomic batches (bc_batch_*): committed all or nothing, the
 * refused operation named, each operation's outcome. Built and run by
 * bindings-c/Makefile (plain, under valgrind, with ASan); kept apart from
 * test_blobcask.c, with default options (bc_open with NULL). */
#define _POSIX_C_SOURCE 200809L
#include "blobcask.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
#define V(s) (const uint8_t *)(s), strlen(s)

static int holds(bc_store *s, const char *key, const char *want) {
    bc_buf buf = {0};
    if (bc_get(s, K(key), &buf, NULL) != BC_OK) return 0;
    int same = buf.len == strlen(want) && memcmp(buf.data, want, buf.len) == 0;
    bc_buf_free(&buf);
    return same;
}

static int has(bc_store *s, const char *key) {
    bool h = false;
    return bc_contains(s, K(key), &h, NULL) == BC_OK && h;
}

int main(void) {
    char path[256];
    snprintf(path, sizeof path, "/tmp/blobcask-c-batch-%d.blobcask", (int)getpid());
    unlink(path);
    bc_error *err = NULL;
    bc_store *s = bc_open(path, NULL, &err);
    if (!s) {
        fprintf(stderr, "open failed: %s\n", bc_error_message(err));
        return 1;
    }
    bc_info old = BC_INFO_INIT;
    CHECK(bc_put(s, K("gone"), V("x"), NULL, NULL) == BC_OK);
    CHECK(bc_put(s, K("taken"), V("old"), &old, NULL) == BC_OK);

    /* A batch of puts (one large) and deletes, committed together. */
    static uint8_t large[300000];
    for (size_t i = 0; i < sizeof large; i++) large[i] = (uint8_t)(i * 7);
    bc_batch *b = NULL;
    CHECK(bc_batch_new(s, &b, NULL) == BC_OK && b);
    CHECK(bc_batch_put(b, K("small"), V("abc"), BC_PUT_OVERWRITE, 0, NULL) == BC_OK);
    CHECK(bc_batch_put(b, K("large"), large, sizeof large, BC_PUT_CREATE, 0, NULL) == BC_OK);
    CHECK(bc_batch_delete(b, K("gone"), NULL) == BC_OK);
    CHECK(bc_batch_delete(b, K("never-was"), NULL) == BC_OK);
    CHECK(bc_batch_len(b) == 4);
    bc_info infos[4] = {BC_INFO_INIT, BC_INFO_INIT, BC_INFO_INIT, BC_INFO_INIT};
    size_t failed = 0;
    /* An entry whose struct_size is not set is refused before anything is
     * committed (the array's stride is its entries' struct_size). */
    infos[2].struct_size = 0;
    CHECK(bc_batch_commit(b, infos, 4, &failed, &err) == BC_INVALID_ARGUMENT);
    CHECK(err && strstr(bc_error_message(err), "infos[2]") != NULL);
    bc_error_free(err);
    err = NULL;
    CHECK(bc_batch_len(b) == 4 && !has(s, "small") && has(s, "gone"));
    infos[2].struct_size = sizeof(bc_info);
    CHECK(bc_batch_commit(b, infos, 4, &failed, NULL) == BC_OK);
    CHECK(infos[0].struct_size == sizeof(bc_info) && infos[3].struct_size == sizeof(bc_info));
    CHECK(failed == SIZE_MAX);
    CHECK(bc_batch_len(b) == 0);
    CHECK(infos[0].size == 3 && infos[0].is_inline && infos[1].size == sizeof large);
    CHECK(infos[1].version > infos[0].version);
    CHECK(infos[2].size == 1 && infos[2].version == 0); /* removed an object */
    CHECK(infos[3].size == 0 && infos[3].version == 0); /* there was none */
    CHECK(holds(s, "small", "abc") && has(s, "large") && !has(s, "gone"));

    /* A failed condition refuses all of it and names the operation. */
    CHECK(bc_batch_put(b, K("fresh"), V("1"), BC_PUT_OVERWRITE, 0, NULL) == BC_OK);
    CHECK(bc_batch_put(b, K("taken"), V("new"), BC_PUT_CREATE, 0, NULL) == BC_OK);
    CHECK(bc_batch_commit(b, NULL, 0, &failed, &err) == BC_ALREADY_EXISTS);
    CHECK(failed == 1);
    CHECK(err && strstr(bc_error_message(err), "batch operation 1") != NULL);
    bc_error_free(err);
    err = NULL;
    CHECK(!has(s, "fresh") && holds(s, "taken", "old"));

    CHECK(bc_batch_delete_if(b, K("taken"), old.version + 1, NULL) == BC_OK);
    CHECK(bc_batch_commit(b, NULL, 0, &failed, NULL) == BC_VERSION_MISMATCH && failed == 0);
    CHECK(bc_batch_put(b, K("taken"), V("new"), BC_PUT_UPDATE, old.version, NULL) == BC_OK);
    CHECK(bc_batch_commit(b, NULL, 0, NULL, NULL) == BC_OK);
    CHECK(holds(s, "taken", "new"));

    /* A key twice, a bad mode, too few infos, NULLs. */
    CHECK(bc_batch_put(b, K("a"), V("1"), BC_PUT_OVERWRITE, 0, NULL) == BC_OK);
    CHECK(bc_batch_delete(b, K("a"), NULL) == BC_OK);
    CHECK(bc_batch_commit(b, NULL, 0, &failed, NULL) == BC_INVALID_ARGUMENT && failed == 1);
    CHECK(!has(s, "a"));
    CHECK(bc_batch_put(b, K("a"), V("1"), 7, 0, NULL) == BC_INVALID_ARGUMENT);
    CHECK(bc_batch_put(b, K("a"), V("1"), BC_PUT_OVERWRITE, 0, NULL) == BC_OK);
    CHECK(bc_batch_commit(b, infos, 0, &failed, NULL) == BC_INVALID_ARGUMENT && failed == SIZE_MAX);
    CHECK(!has(s, "a"));
    CHECK(bc_batch_len(b) == 1); /* refused before the commit: kept */
    bc_batch_free(b);
    CHECK(bc_batch_new(s, &b, NULL) == BC_OK);
    CHECK(bc_batch_commit(NULL, NULL, 0, NULL, NULL) == BC_INVALID_ARGUMENT);
    CHECK(bc_batch_new(NULL, &b, NULL) == BC_INVALID_ARGUMENT);
    CHECK(bc_batch_len(NULL) == 0);
    /* An empty batch commits nothing. */
    CHECK(bc_batch_len(b) == 0 && bc_batch_commit(b, NULL, 0, NULL, NULL) == BC_OK);
    bc_batch_free(b);
    bc_batch_free(NULL);

    /* A batch outliving its store's close fails with BC_CLOSED. */
    CHECK(bc_batch_new(s, &b, NULL) == BC_OK);
    CHECK(bc_batch_put(b, K("late"), V("1"), BC_PUT_OVERWRITE, 0, NULL) == BC_OK);
    CHECK(bc_close(s, NULL) == BC_OK);
    CHECK(bc_batch_commit(b, NULL, 0, NULL, NULL) == BC_CLOSED);
    bc_batch_free(b);
    bc_store_free(s);
    unlink(path);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_batch: all checks passed\n");
    return 0;
}
