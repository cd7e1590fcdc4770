#!/usr/bin/env python3
"""Generates preload/io_wrappers.inc, the open, read, stat and descriptor-wait wrappers, from the
table below.

Every ABI alias of a call (open64, __open_2, __read_chk, the __xstat family ...) is one row: what
differs between wrappers is data, so it lives here; what is recorded lives in preload/io.c's
rec_* functions. close, dup2 and the descriptor creators are written by hand in io.c: each does
something of its own. Run `make gen` after editing; `make test` checks the checked-in output is
current.
"""
import re
import sys

OPEN, READ, STAT, FSTAT, WAIT = "open", "read", "stat", "fstat", "wait"

# return type, name, parameters ("..." last: a varargs open whose mode is read as open(2) does),
# family, then by family:
#   READ: the event kind, the bytes requested, the extra argument (None: none)
#   WAIT: the condition under which the call cannot block (then it is not recorded: event loops
#         poll state thousands of times a second), a statement run before the call, the event
#         kind and its arguments, then the descriptor it is in flight on (-1 none) and its
#         arguments as known on entry
TABLE = [
    ("int", "open", "const char *path, int flags, ...", OPEN),
    ("int", "open64", "const char *path, int flags, ...", OPEN),
    ("int", "__open_2", "const char *path, int flags", OPEN),
    ("int", "__open64_2", "const char *path, int flags", OPEN),
    ("int", "openat", "int dirfd, const char *path, int flags, ...", OPEN),
    ("int", "openat64", "int dirfd, const char *path, int flags, ...", OPEN),
    ("int", "__openat_2", "int dirfd, const char *path, int flags", OPEN),
    ("int", "__openat64_2", "int dirfd, const char *path, int flags", OPEN),
    ("ssize_t", "read", "int fd, void *buf, size_t n", READ, "READ", "(int64_t)n", None),
    ("ssize_t", "__read_chk", "int fd, void *buf, size_t n, size_t buflen", READ, "READ", "(int64_t)n", None),
    ("ssize_t", "pread", "int fd, void *buf, size_t n, off_t off", READ, "PREAD", "(int64_t)n", "off"),
    ("ssize_t", "pread64", "int fd, void *buf, size_t n, off_t off", READ, "PREAD", "(int64_t)n", "off"),
    ("ssize_t", "__pread_chk", "int fd, void *buf, size_t n, off_t off, size_t buflen", READ, "PREAD",
     "(int64_t)n", "off"),
    ("ssize_t", "__pread64_chk", "int fd, void *buf, size_t n, off_t off, size_t buflen", READ, "PREAD",
     "(int64_t)n", "off"),
    ("ssize_t", "readv", "int fd, const struct iovec *iov, int n", READ, "READV", "iov_bytes(iov, n)", "n"),
    ("ssize_t", "preadv", "int fd, const struct iovec *iov, int n, off_t off", READ, "READV",
     "iov_bytes(iov, n)", "n"),
    ("ssize_t", "preadv64", "int fd, const struct iovec *iov, int n, off_t off", READ, "READV",
     "iov_bytes(iov, n)", "n"),
    ("int", "stat", "const char *path, struct stat *st", STAT),
    ("int", "stat64", "const char *path, struct stat64 *st", STAT),
    ("int", "lstat", "const char *path, struct stat *st", STAT),
    ("int", "lstat64", "const char *path, struct stat64 *st", STAT),
    ("int", "fstatat", "int dirfd, const char *path, struct stat *st, int flags", STAT),
    ("int", "fstatat64", "int dirfd, const char *path, struct stat64 *st, int flags", STAT),
    ("int", "statx", "int dirfd, const char *path, int flags, unsigned mask, struct statx *st", STAT),
    ("int", "__xstat", "int ver, const char *path, struct stat *st", STAT),
    ("int", "__xstat64", "int ver, const char *path, struct stat *st", STAT),
    ("int", "__lxstat", "int ver, const char *path, struct stat *st", STAT),
    ("int", "__lxstat64", "int ver, const char *path, struct stat *st", STAT),
    ("int", "__fxstatat", "int ver, int dirfd, const char *path, struct stat *st, int flags", STAT),
    ("int", "__fxstatat64", "int ver, int dirfd, const char *path, struct stat *st, int flags", STAT),
    ("int", "fstat", "int fd, struct stat *st", FSTAT),
    ("int", "fstat64", "int fd, struct stat64 *st", FSTAT),
    ("int", "__fxstat", "int ver, int fd, struct stat *st", FSTAT),
    ("int", "__fxstat64", "int ver, int fd, struct stat *st", FSTAT),
    ("int", "poll", "struct pollfd *fds, nfds_t n, int timeout", WAIT, "timeout == 0", None,
     "POLL", "3, (int64_t)n, timeout, rc, 0", "fds && n ? fds[0].fd : -1", "3, (int64_t)n, timeout, -1"),
    ("int", "select", "int n, fd_set *r, fd_set *w, fd_set *x, struct timeval *tv", WAIT,
     "(tv && tv->tv_sec == 0 && tv->tv_usec == 0)",
     "int64_t us = tv ? (int64_t)tv->tv_sec * 1000000 + tv->tv_usec : -1;",  # select changes *tv
     "SELECT", "3, n, us, rc, 0", "-1", "3, n, us, -1"),
    ("int", "epoll_wait", "int epfd, struct epoll_event *ev, int max, int timeout", WAIT, "timeout == 0", None,
     "EPOLL_WAIT", "4, epfd, max, timeout, rc", "epfd", "4, epfd, max, timeout, -1"),
    ("int", "epoll_pwait", "int epfd, struct epoll_event *ev, int max, int timeout, const sigset_t *ss", WAIT,
     "timeout == 0", None, "EPOLL_WAIT", "4, epfd, max, timeout, rc", "epfd", "4, epfd, max, timeout, -1"),
]

NAME_RE = re.compile(r"(\w+)(\[\])?$")


def split_params(params):
    ps = [p.strip() for p in params.split(",")]
    varargs = ps[-1] == "..."
    return (ps[:-1] if varargs else ps), varargs


def argnames(ps):
    return ", ".join(NAME_RE.search(p).group(1) for p in ps)


def real_decl(e):
    ret, name, params = e[0], e[1], e[2]
    ps, varargs = split_params(params)
    types = ", ".join(re.sub(r"\s*\w+$", "", p) for p in ps) + (", ..." if varargs else "")
    return f"DSP_REAL({ret}, {name}, ({types}), NULL)"


def wrapper(e):
    ret, name, params, fam = e[0], e[1], e[2], e[3]
    ps, varargs = split_params(params)
    args = argnames(ps) + (", mode" if varargs else "")
    call = f"real_{name}({args})"
    out = [f"{ret} {name}({params})", "{"]
    if varargs:
        out += ["\tva_list ap;", "\tva_start(ap, flags);", "\tmode_t mode = mode_arg(flags, ap);", "\tva_end(ap);"]
    out += [f"\tif (!get_{name}())", "\t\treturn enosys();", "\tstruct dsp_tls *t = &dsp_tls;"]
    if fam == OPEN:
        out += ["\tif (!dsp_enter(t)) {",
                f"\t\tint fd = {call};",
                "\t\tdsp_fdclass_set(fd, class_of_path(path, flags));",
                "\t\treturn fd;",
                "\t}",
                "\tuint64_t t0 = DSP_CALL_PATH(t, DDPSPY_EV_OPEN, path, 3, -1, flags, -1);",
                f"\tint fd = {call};",
                "\trec_open(t, t0, fd, flags, path);",
                "\treturn fd;"]
    else:
        skip = f"{e[4]} || " if fam == WAIT else ""
        out += [f"\tif ({skip}!dsp_enter(t))", f"\t\treturn {call};"]
        if fam == WAIT and e[5]:
            out.append("\t" + e[5])
        if fam == READ:  # in flight as its event will be: fd, class, bytes, ret unknown (, extra)
            n = 5 if e[6] else 4
            extra = f", {e[6]}" if e[6] else ""
            out.append(f"\tuint64_t t0 = DSP_CALL(t, DDPSPY_EV_{e[4]}, fd, {n}, fd, dsp_fdclass_cached(fd), "
                       f"{e[5]}, -1{extra});")
        elif fam == WAIT:
            out.append(f"\tuint64_t t0 = DSP_CALL(t, DDPSPY_EV_{e[6]}, {e[8]}, {e[9]});")
        else:
            out.append("\tuint64_t t0 = dsp_now();")
        out.append(f"\t{ret} rc = {call};")
        if fam == READ:
            extra = f"1, {e[6]}" if e[6] else "0, 0"
            out.append(f"\trec_read(t, DDPSPY_EV_{e[4]}, t0, fd, {e[5]}, rc, {extra});")
        elif fam == STAT:
            out.append("\trec_stat(t, t0, rc, path);")
        elif fam == FSTAT:
            out.append("\trec_fstat(t, t0, fd, rc);")
        else:
            out.append(f"\trec_wait(t, DDPSPY_EV_{e[6]}, t0, {e[7]});")
        out.append("\treturn rc;")
    out += ["}", ""]
    return "\n".join(out)


def main():
    text = ["/* generated by tools/gen_io.py, do not edit: change the table there and run make gen */", ""]
    text += [real_decl(e) for e in TABLE]
    text.append("")
    text += [wrapper(e) for e in TABLE]
    sys.stdout.write("\n".join(text))


main()
