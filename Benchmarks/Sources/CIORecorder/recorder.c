// LD_PRELOAD recorder for the crash-state explorer (docs/reliability.md, "Power loss").
//
// Environment:
//   LEDGER_IO_LOG    file the records are appended to (one write(2) per record, O_APPEND, so
//                    records of several processes interleave whole and in the order they happened)
//   LEDGER_IO_DATA   path of the data.mdb to watch (as the workload opens it)
//   LEDGER_IO_MARKS  path prefix of acknowledgement files: each write(2) to such a file is
//                    recorded as a mark, in order with the data writes and syncs
//
// Records: a 32-byte header (magic "LIOR", op, flags, pid, length, offset) then `length`
// bytes. ops: 1 write (flags bit 0: the descriptor is O_DSYNC), 2 sync (fsync/fdatasync of
// data.mdb), 3 mark (the bytes written to an acknowledgement file), 4 truncate (offset = size).
//
// What LMDB 0.9 uses on Linux (checked with strace): pwrite64 for single pages and meta
// pages (meta pages through a second O_DSYNC descriptor), writev at the current offset for
// runs of pages, fdatasync. Every variant below is interposed anyway.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

enum { KIND_NONE = 0, KIND_DATA = 1, KIND_DATA_DSYNC = 2, KIND_MARK = 3, MAX_FD = 65536 };
static volatile unsigned char kinds[MAX_FD];
static int log_fd = -1;

struct header {
    uint32_t magic;
    uint8_t op;
    uint8_t flags;
    uint16_t pad;
    int32_t pid;
    uint32_t length;
    uint64_t offset;
    uint64_t reserved;
};

#define REAL(name, type) static type real_##name = NULL; if (!real_##name) real_##name = (type)dlsym(RTLD_NEXT, #name)

typedef int (*open_fn)(const char *, int, ...);
typedef int (*openat_fn)(int, const char *, int, ...);
typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);
typedef ssize_t (*writev_fn)(int, const struct iovec *, int);
typedef ssize_t (*pwritev_fn)(int, const struct iovec *, int, off_t);
typedef int (*sync_fn)(int);
typedef int (*close_fn)(int);
typedef int (*ftruncate_fn)(int, off_t);

static const char *env_or_null(const char *name) {
    const char *v = getenv(name);
    return (v && *v) ? v : NULL;
}

static void emit(uint8_t op, uint8_t flags, uint64_t offset, const struct iovec *iov, int count) {
    REAL(write, write_fn);
    REAL(open, open_fn);
    if (log_fd < 0) {
        const char *path = env_or_null("LEDGER_IO_LOG");
        if (!path) return;
        log_fd = real_open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (log_fd < 0) return;
    }
    size_t total = 0;
    for (int i = 0; i < count; i++) total += iov[i].iov_len;
    size_t size = sizeof(struct header) + total;
    char *buffer = malloc(size);
    if (!buffer) abort();  // a record lost silently would make the exploration lie
    struct header h = { 0x524F494C, op, flags, 0, (int32_t)getpid(), (uint32_t)total, offset, 0 };
    memcpy(buffer, &h, sizeof h);
    size_t at = sizeof h;
    for (int i = 0; i < count; i++) { memcpy(buffer + at, iov[i].iov_base, iov[i].iov_len); at += iov[i].iov_len; }
    if (real_write(log_fd, buffer, size) != (ssize_t)size) abort();
    free(buffer);
}

static void track(int fd, const char *path, int flags) {
    if (fd < 0 || fd >= MAX_FD || !path) return;
    const char *data = env_or_null("LEDGER_IO_DATA");
    const char *marks = env_or_null("LEDGER_IO_MARKS");
    unsigned char kind = KIND_NONE;
    if (data && strcmp(path, data) == 0) {
        kind = (flags & O_DSYNC) ? KIND_DATA_DSYNC : KIND_DATA;
        if (flags & O_TRUNC) { struct iovec none = { NULL, 0 }; emit(4, 0, 0, &none, 0); }
    } else if (marks && strncmp(path, marks, strlen(marks)) == 0) {
        kind = KIND_MARK;
    }
    kinds[fd] = kind;
}

static void recorded(int fd, ssize_t written, const struct iovec *iov, int count, off_t offset) {
    if (fd < 0 || fd >= MAX_FD || written <= 0) return;
    unsigned char kind = kinds[fd];
    if (kind == KIND_NONE) return;
    // Only the bytes that were written: trim the vector to `written`.
    struct iovec trimmed[64];
    int n = 0;
    size_t left = (size_t)written;
    for (int i = 0; i < count && left > 0 && n < 64; i++) {
        size_t len = iov[i].iov_len < left ? iov[i].iov_len : left;
        trimmed[n].iov_base = iov[i].iov_base;
        trimmed[n].iov_len = len;
        n++;
        left -= len;
    }
    if (kind == KIND_MARK) emit(3, 0, 0, trimmed, n);
    else emit(1, kind == KIND_DATA_DSYNC ? 1 : 0, (uint64_t)offset, trimmed, n);
}

// open and openat, each under both names glibc may export.
#define INTERPOSE_OPEN(name) \
    int name(const char *path, int flags, ...) { \
        REAL(name, open_fn); \
        va_list ap; va_start(ap, flags); int mode = va_arg(ap, int); va_end(ap); \
        int fd = real_##name(path, flags, mode); \
        track(fd, path, flags); \
        return fd; \
    }
#define INTERPOSE_OPENAT(name) \
    int name(int dirfd, const char *path, int flags, ...) { \
        REAL(name, openat_fn); \
        va_list ap; va_start(ap, flags); int mode = va_arg(ap, int); va_end(ap); \
        int fd = real_##name(dirfd, path, flags, mode); \
        track(fd, path, flags); \
        return fd; \
    }
INTERPOSE_OPEN(open)
INTERPOSE_OPEN(open64)
INTERPOSE_OPENAT(openat)
INTERPOSE_OPENAT(openat64)

int close(int fd) {
    REAL(close, close_fn);
    if (fd >= 0 && fd < MAX_FD) kinds[fd] = KIND_NONE;
    return real_close(fd);
}

ssize_t write(int fd, const void *buf, size_t count) {
    REAL(write, write_fn);
    off_t offset = (fd >= 0 && fd < MAX_FD && kinds[fd] == KIND_DATA) ? lseek(fd, 0, SEEK_CUR) : 0;
    ssize_t n = real_write(fd, buf, count);
    struct iovec v = { (void *)buf, count };
    recorded(fd, n, &v, 1, offset);
    return n;
}

// pwrite and pwritev at an explicit offset, each under both names.
#define INTERPOSE_PWRITE(name) \
    ssize_t name(int fd, const void *buf, size_t count, off_t offset) { \
        REAL(name, pwrite_fn); \
        ssize_t n = real_##name(fd, buf, count, offset); \
        struct iovec v = { (void *)buf, count }; \
        recorded(fd, n, &v, 1, offset); \
        return n; \
    }
#define INTERPOSE_PWRITEV(name) \
    ssize_t name(int fd, const struct iovec *iov, int count, off_t offset) { \
        REAL(name, pwritev_fn); \
        ssize_t n = real_##name(fd, iov, count, offset); \
        recorded(fd, n, iov, count, offset); \
        return n; \
    }
INTERPOSE_PWRITE(pwrite)
INTERPOSE_PWRITE(pwrite64)
INTERPOSE_PWRITEV(pwritev)
INTERPOSE_PWRITEV(pwritev64)

ssize_t writev(int fd, const struct iovec *iov, int count) {
    REAL(writev, writev_fn);
    off_t offset = (fd >= 0 && fd < MAX_FD && kinds[fd] != KIND_NONE) ? lseek(fd, 0, SEEK_CUR) : 0;
    ssize_t n = real_writev(fd, iov, count);
    recorded(fd, n, iov, count, offset);
    return n;
}

static void synced(int fd, int result) {
    if (result != 0 || fd < 0 || fd >= MAX_FD) return;
    if (kinds[fd] == KIND_DATA || kinds[fd] == KIND_DATA_DSYNC) {
        struct iovec none = { NULL, 0 };
        emit(2, 0, 0, &none, 0);
    }
}

int fdatasync(int fd) {
    REAL(fdatasync, sync_fn);
    int r = real_fdatasync(fd);
    synced(fd, r);
    return r;
}

int fsync(int fd) {
    REAL(fsync, sync_fn);
    int r = real_fsync(fd);
    synced(fd, r);
    return r;
}

int ftruncate(int fd, off_t length) {
    REAL(ftruncate, ftruncate_fn);
    int r = real_ftruncate(fd, length);
    if (r == 0 && fd >= 0 && fd < MAX_FD && (kinds[fd] == KIND_DATA || kinds[fd] == KIND_DATA_DSYNC)) {
        struct iovec none = { NULL, 0 };
        emit(4, 0, (uint64_t)length, &none, 0);
    }
    return r;
}

int ftruncate64(int fd, off_t length) { return ftruncate(fd, length); }
