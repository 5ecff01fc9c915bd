/* Minimal blobcask C example: open, put, ranged read, stat, close.
 * Build: make -C examples/c        (links the shared and the static library) */
#include "blobcask.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "/tmp/blobcask-example.blobcask";
    bc_options opts = BC_OPTIONS_INIT; /* struct_size and every default */
    opts.capacity = 64u << 20;
    bc_error *err = NULL;
    bc_store *store = bc_open(path, &opts, &err);
    if (!store) {
        fprintf(stderr, "open: %s\n", bc_error_message(err));
        bc_error_free(err);
        return 1;
    }
    const char *key = "greetings/hello.txt";
    const char *text = "hello from C, stored durably in one blob file\n";
    bc_info info = BC_INFO_INIT;
    if (bc_put(store, (const uint8_t *)key, strlen(key), (const uint8_t *)text, strlen(text), &info, &err) != BC_OK) {
        fprintf(stderr, "put: %s\n", bc_error_message(err));
        bc_error_free(err);
        bc_store_free(store);
        return 1;
    }
    bc_buf part = {0};
    if (bc_read(store, (const uint8_t *)key, strlen(key), 6, 9, &part, NULL) == BC_OK) {
        printf("bytes 6..15: %.*s\n", (int)part.len, (const char *)part.data);
        bc_buf_free(&part);
    }
    printf("version %llu, %llu bytes\n", (unsigned long long)info.version, (unsigned long long)info.size);
    bc_close(store, NULL);
    bc_store_free(store);
    return 0;
}
