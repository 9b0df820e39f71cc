/* The module loader: copy-on-load, dlopen, ABI and mandatory-op checks.
 *
 * Each module file is copied into the private runtime folder under a name
 * made of its content hash (<name>.<hash>.so) and that copy is dlopen'd with
 * RTLD_NOW|RTLD_LOCAL: dlopen of a path already loaded would hand back the old
 * image, and a rebuilt file must never replace code that is running. */
#include "kernel.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *kind_name(uint32_t kind) { return mcpg_kind_name(kind); }

/* Copy in to out (none when out is -1) while hashing the bytes with FNV-1a
 * 64 (the copy's name) and SHA-256 (what a manifest pins): both hashes are
 * of the bytes that land in the copy, the file that is dlopen'd. */
static int copy_and_hash(int in, int out, uint64_t *fnv, char sha256_hex[65]) {
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(md);
        errno = ENOMEM;
        return -1;
    }
    uint64_t h = 1469598103934665603ull;
    char buf[65536];
    ssize_t n;
    int rc = 0;
    while ((n = read(in, buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < n; i++) h = (h ^ (unsigned char)buf[i]) * 1099511628211ull;
        EVP_DigestUpdate(md, buf, (size_t)n);
        if (out >= 0 && write(out, buf, (size_t)n) != n) {
            rc = -1;
            break;
        }
    }
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (n < 0 || EVP_DigestFinal_ex(md, digest, &len) != 1 || len != 32) rc = -1;
    EVP_MD_CTX_free(md);
    for (unsigned i = 0; i < 32 && rc == 0; i++) snprintf(sha256_hex + 2 * i, 3, "%02x", digest[i]);
    *fnv = h;
    return rc;
}

/* Copy src into runtime_dir as <name>.<fnv hash>.so, its SHA-256 in sha256_hex. */
static int copy_hashed(const char *src, const char *runtime_dir, const char *name,
                       char *dst, size_t dstcap, char sha256_hex[65], char *err, size_t errcap) {
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        snprintf(err, errcap, "%s: cannot open: %s", src, strerror(errno));
        return -1;
    }
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s/.%s.%d.tmp", runtime_dir, name, (int)getpid());
    int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0700);
    if (out < 0) {
        snprintf(err, errcap, "%s: cannot write %s: %s", src, tmp, strerror(errno));
        close(in);
        return -1;
    }
    uint64_t h = 0;
    int rc = copy_and_hash(in, out, &h, sha256_hex);
    close(in);
    if (close(out) != 0) rc = -1;
    if (rc) {
        snprintf(err, errcap, "%s: copy to %s failed: %s", src, runtime_dir, strerror(errno));
        unlink(tmp);
        return -1;
    }
    snprintf(dst, dstcap, "%s/%s.%016llx.so", runtime_dir, name, (unsigned long long)h);
    if (access(dst, F_OK) == 0) { /* the same content is there (maybe mapped): keep that file */
        unlink(tmp);
        return 0;
    }
    if (rename(tmp, dst) != 0) {
        snprintf(err, errcap, "%s: cannot place %s: %s", src, dst, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

int file_sha256(const char *path, char sha256_hex[65]) {
    int in = open(path, O_RDONLY | O_CLOEXEC);
    if (in < 0) return -1;
    uint64_t fnv;
    int rc = copy_and_hash(in, -1, &fnv, sha256_hex);
    close(in);
    return rc;
}

bool image_pin_matches(const char *name, const char *src_path, const char *found,
                       const char *pin, char *err, size_t errcap) {
    if (!pin || strcmp(found, pin) == 0) return true;
    char abs[PATH_MAX];
    if (!realpath(src_path, abs)) snprintf(abs, sizeof abs, "%s", src_path);
    snprintf(err, errcap, "module \"%s\" file %s has sha256 %s, the manifest pins %s", name, abs,
             found, pin);
    return false;
}

/* The descriptor checks are the SDK's (the fake host makes the same ones);
 * the loader adds what only a file can tell: its name. */
static int check_descriptor(const char *file, const char *stem, const mcpg_module *d,
                            char *err, size_t errcap) {
    char why[512];
    if (mcpg_module_check(d, why, sizeof why) != 0) {
        snprintf(err, errcap, "%s: %s", file, why);
        return -1;
    }
    if (strcmp(d->name, stem) != 0) {
        snprintf(err, errcap, "%s: declares name \"%s\", expected \"%s\" (the file name)", file,
                 d->name, stem);
        return -1;
    }
    return 0;
}

const mcpg_module *module_descriptor(void *dl, const char *file, const char *stem, char *err,
                                     size_t errcap) {
    mcpg_module_entry_fn entry;
    void *sym = dlsym(dl, MCPG_ENTRY_SYMBOL);
    memcpy(&entry, &sym, sizeof entry);
    if (!entry) {
        snprintf(err, errcap, "%s: no symbol %s (not an mcpg module)", file, MCPG_ENTRY_SYMBOL);
        return NULL;
    }
    const mcpg_module *d = entry(MCPG_ABI_MAJOR, MCPG_ABI_MINOR);
    if (!d) {
        snprintf(err, errcap, "%s: %s returned no descriptor", file, MCPG_ENTRY_SYMBOL);
        return NULL;
    }
    return check_descriptor(file, stem, d, err, errcap) == 0 ? d : NULL;
}

/* Every image loaded, so that a file whose content did not change (the
 * same copy name: the hash) is the same image in the next manifest: a
 * reload carries its instances over instead of loading the code twice.
 * Loads happen on the main thread only (start, --check, reload). */
static image *loaded;

static image *loaded_find(const char *run_path) {
    for (image *im = loaded; im; im = im->next)
        if (strcmp(im->run_path, run_path) == 0) return im;
    return NULL;
}

static void loaded_remove(image *im) {
    for (image **pp = &loaded; *pp; pp = &(*pp)->next)
        if (*pp == im) {
            *pp = im->next;
            return;
        }
}

image *image_load(const char *dir, const char *name, const char *runtime_dir, const char *pin,
                  bool *pin_refused, char *err, size_t errcap) {
    char src[4096], run[4096];
    snprintf(src, sizeof src, "%s/%s.so", dir, name);
    struct stat st;
    if (stat(src, &st) != 0) {
        snprintf(err, errcap, "no module \"%s\" in %s", name, dir);
        return NULL;
    }
    char sha256[65];
    if (copy_hashed(src, runtime_dir, name, run, sizeof run, sha256, err, errcap)) return NULL;
    image *same = loaded_find(run);
    if (!image_pin_matches(name, src, sha256, pin, err, errcap)) {
        if (!same) unlink(run); /* never dlopen'd: its constructors never ran */
        if (pin_refused) *pin_refused = true;
        return NULL;
    }
    if (same) return same; /* unchanged since it was loaded: the same code */
    void *dl = dlopen(run, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        snprintf(err, errcap, "%s: dlopen failed: %s", src, dlerror());
        unlink(run);
        return NULL;
    }
    const mcpg_module *d = module_descriptor(dl, src, name, err, errcap);
    if (d) {
        image *im = calloc(1, sizeof *im);
        if (im) {
            im->name = strdup(name);
            im->src_path = strdup(src);
            im->run_path = strdup(run);
            im->dl = dl;
            im->desc = d;
            memcpy(im->sha256, sha256, sizeof im->sha256);
            im->next = loaded;
            loaded = im;
            crash_image_loaded(im);
            return im;
        }
        snprintf(err, errcap, "%s: out of memory", src);
    }
    dlclose(dl);
    unlink(run);
    return NULL;
}

/* dlclose, then prove the image is gone (RTLD_NOLOAD) before deleting the
 * copy: a copy deleted while mapped leaves core files without symbols. */
bool image_unload(image *im) {
    if (!im) return false;
    loaded_remove(im);
    crash_image_unloaded(im);
    dlclose(im->dl);
    void *still = dlopen(im->run_path, RTLD_NOW | RTLD_NOLOAD);
    bool pinned = still != NULL;
    if (still) {
        klog(MCPG_LOG_WARN, "kernel", "module image %s is still mapped after dlclose (pinned)",
             im->run_path);
        dlclose(still);
    } else {
        unlink(im->run_path);
    }
    free(im->name);
    free(im->src_path);
    free(im->run_path);
    free(im);
    return pinned;
}
