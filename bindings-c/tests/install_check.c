/* Built by tests/install_check.sh against an installed libblobcask, with
 * only what `pkg-config --cflags --libs blobcask` gives: a put and a get. */
#include <blobcask.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    bc_options o = BC_OPTIONS_INIT;
    o.capacity = 8u << 20;
    bc_error *err = NULL;
    bc_store *s = bc_open(argv[1], &o, &err);
    if (!s) {
        fprintf(stderr, "open: %s: %s\n", bc_code_name(bc_error_code(err)), bc_error_message(err));
        bc_error_free(err);
        return 1;
    }
    bc_info info = BC_INFO_INIT;
    bc_buf buf = {0};
    int ok = bc_put(s, (const uint8_t *)"k", 1, (const uint8_t *)"installed", 9, &info, NULL) == BC_OK &&
             info.size == 9 && bc_get(s, (const uint8_t *)"k", 1, &buf, NULL) == BC_OK &&
             buf.len == 9 && memcmp(buf.data, "installed", 9) == 0;
    bc_buf_free(&buf);
    bc_store_free(s);
    unlink(argv[1]);
    printf("installed libblobcask (ABI %d.%d): %s\n", BC_ABI_MAJOR, BC_ABI_MINOR, ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
