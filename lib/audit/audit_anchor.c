/* lib/audit: the chain's anchor (audit_anchor.h). */
#define _GNU_SOURCE
#include "audit_anchor.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w, n -= (size_t)w;
    }
    return 0;
}

/* The folder holding path, synced, so a rename in it is on disk. */
static void sync_folder_of(const char *path) {
    char copy[PATH_MAX];
    snprintf(copy, sizeof copy, "%s", path);
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

int audit_anchor_write(const char *path, const audit_chain_head *head) {
    char hex[2 * AUDIT_HASH_LEN + 1], text[160], tmp[PATH_MAX];
    audit_hash_hex(head->hash, hex);
    int n = snprintf(text, sizeof text, "{\"line\":%" PRIu64 ",\"sha256\":\"%s\"}\n", head->line, hex);
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    if (write_all(fd, text, (size_t)n) != 0 || fsync(fd) != 0) {
        int err = errno;
        close(fd);
        unlink(tmp);
        errno = err;
        return -1;
    }
    close(fd);
    if (rename(tmp, path) != 0) {
        int err = errno;
        unlink(tmp);
        errno = err;
        return -1;
    }
    sync_folder_of(path);
    return 0;
}

static int hex_nibble(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int audit_anchor_read(const char *path, audit_chain_head *out) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    char text[256];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    uint64_t line = 0;
    char hex[2 * AUDIT_HASH_LEN + 1];
    if (sscanf(text, "{\"line\":%" SCNu64 ",\"sha256\":\"%64[0-9a-f]\"}", &line, hex) != 2 ||
        strlen(hex) != 2 * AUDIT_HASH_LEN) {
        errno = EINVAL;
        return -1;
    }
    out->line = line;
    for (size_t i = 0; i < AUDIT_HASH_LEN; i++)
        out->hash[i] = (uint8_t)(hex_nibble(hex[2 * i]) << 4 | hex_nibble(hex[2 * i + 1]));
    return 0;
}
