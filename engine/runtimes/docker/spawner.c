/* crucible's spawner: the container's own process (under docker-init), which starts the
 * workspace's commands for the engine, so that a command costs a fork here instead of a
 * `docker exec` (dockerd, containerd, the shim, runc and runc's init with its seccomp
 * filter: ~50 ms of the machine's CPU each, engine/runtimes/docker/spawner.py).
 *
 * It reads requests on stdin and writes events on stdout, the container's own streams, which
 * only the engine reaches (`docker attach`). Every frame: type (1 byte), command id (4, big
 * endian), payload length (4), payload.
 *
 *   engine -> spawner
 *     S  spawn: uid, gid, argc, envc, flags (4 bytes each), then NUL-terminated: cwd, argv...,
 *        env...; flags 1: stdin is /dev/null (no I frames follow)
 *     I  bytes for the command's stdin; an empty one closes it
 *     K  a signal (4 bytes) to the command's process group
 *     A  credit (4 bytes): that much of the command's output was taken
 *     F  forget it: nothing more is said of it; its output is read on and dropped (a background
 *        child that still writes must not die of a closed pipe, as it would not under docker exec)
 *     Q  quit (id 0): exit at once, so the container stops by itself before it is removed (the
 *        kernel kills everything left in it as docker-init ends): removing a running container
 *        costs the machine ~15 ms of CPU more (dockerd's kill path, `runc kill`)
 *   spawner -> engine
 *     P  started (its exec succeeded): its pid (4 bytes)        E  not started: why (text)
 *     W  that many bytes (4) of its stdin went into its pipe    C  its stdin is closed: the rest dropped
 *     O  stdout bytes, R  stderr bytes: an empty one is that stream's end
 *     X  exited: its wait status (4 bytes)
 *
 * A command starts as `docker exec` starts one: a session of its own (its pid is its group),
 * its directory entered as root, then the uid and gid asked for and no other group, HOME from
 * /etc/passwd when the env has none, the env exactly as sent, argv[0] looked up in its PATH.
 * Nothing here ever waits on one command: its start is reported from the poll loop (a child the
 * tested uid stops between its setuid and its exec holds up nothing else, and can be killed),
 * its output is read only while less than CREDIT bytes of it are untaken, and the engine sends
 * no more stdin than a window the W frames open again, so a slow reader or writer waits as it
 * would on a full pipe, and the others go on.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define HEADER 9
#define CREDIT (1L << 20)
#define CHUNK 65536

struct command {
    uint32_t id;
    pid_t pid;
    int in, out, err; /* -1 once closed */
    int report;       /* the exec report's pipe until the start is settled, then -1 */
    char *pending;    /* stdin bytes not written yet */
    size_t pending_len, pending_cap;
    int close_in;     /* close stdin once pending is written */
    long untaken;
    int reaped, discard;
    struct command *next;
};

static struct command *commands;
static int wake[2]; /* SIGCHLD's self-pipe */
extern char **environ;

static void put32(unsigned char *p, uint32_t v) {
    p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v;
}

static uint32_t get32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void write_all(int fd, const void *data, size_t len) {
    const char *p = data;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) _exit(3); /* the engine's stream is gone: nothing can be reported any more */
        p += n; len -= (size_t)n;
    }
}

static void send_frame(char type, uint32_t id, const void *payload, uint32_t len) {
    unsigned char header[HEADER];
    header[0] = (unsigned char)type;
    put32(header + 1, id);
    put32(header + 5, len);
    write_all(1, header, HEADER);
    if (len) write_all(1, payload, len);
}

static void send_u32(char type, uint32_t id, uint32_t value) {
    unsigned char payload[4];
    put32(payload, value);
    send_frame(type, id, payload, 4);
}

static struct command *find(uint32_t id) {
    for (struct command *c = commands; c; c = c->next)
        if (c->id == id) return c;
    return NULL;
}

static void close_fd(int *fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

static void drop(struct command *gone) {
    for (struct command **at = &commands; *at; at = &(*at)->next)
        if (*at == gone) {
            *at = gone->next;
            close_fd(&gone->in); close_fd(&gone->out); close_fd(&gone->err);
            free(gone->pending);
            free(gone);
            return;
        }
}

static void drop_if_done(struct command *c) {
    if (c->reaped && c->out < 0 && c->err < 0 && c->report < 0) drop(c);
}

/* The home directory /etc/passwd gives `uid` into `home` (empty when none), as runc reads it. */
static void home_of(uid_t uid, char *home, size_t home_size) {
    home[0] = 0;
    FILE *f = fopen("/etc/passwd", "re");
    if (!f) return;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        char *fields[7], *p = line;
        int n = 0;
        /* strsep keeps empty fields, which a passwd line may have */
        while (n < 7 && (fields[n] = strsep(&p, ":\n")) != NULL) n++;
        if (n < 6 || strtoul(fields[2], NULL, 10) != uid || fields[2][0] == 0) continue;
        snprintf(home, home_size, "%s", fields[5]);
        break;
    }
    fclose(f);
}

static void fail_child(int report, const char *what) {
    char message[512];
    int n = snprintf(message, sizeof message, "%s: %s", what, strerror(errno));
    if (n > 0) write_all(report, message, (size_t)n < sizeof message ? (size_t)n : sizeof message - 1);
    _exit(127);
}

static void spawn(uint32_t id, const unsigned char *payload, uint32_t len) {
    if (len < 21 || payload[len - 1] != 0 || find(id)) {
        send_frame('E', id, "malformed spawn request", 23);
        return;
    }
    uid_t uid = get32(payload);
    gid_t gid = get32(payload + 4);
    uint64_t argc = get32(payload + 8), envc = get32(payload + 12);
    uint32_t flags = get32(payload + 16);
    /* every string takes a byte at least: counts past the payload are malformed, not an overflow */
    char **strings = argc + envc + 1 <= len ? calloc(argc + envc + 3, sizeof *strings) : NULL;
    uint64_t found = 0;
    if (!strings) {
        send_frame('E', id, "malformed spawn request", 23);
        return;
    }
    for (const unsigned char *p = payload + 20; p < payload + len && found < argc + envc + 1; found++) {
        strings[found] = (char *)p;
        p += strlen((const char *)p) + 1;
    }
    if (found != argc + envc + 1 || argc == 0) {
        free(strings);
        send_frame('E', id, "malformed spawn request", 23);
        return;
    }
    char *cwd = strings[0], **argv = strings + 1, **envp = strings + 2 + argc;
    memmove(envp, argv + argc, envc * sizeof *envp);
    argv[argc] = NULL;
    envp[envc] = NULL;

    int in[2] = {-1, -1}, out[2], err[2], report[2];
    if ((flags & 1 ? (in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0 : pipe2(in, O_CLOEXEC) != 0) ||
        pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC) || pipe2(report, O_CLOEXEC)) {
        free(strings);
        send_frame('E', id, "no pipes", 8);
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        signal(SIGPIPE, SIG_DFL);
        signal(SIGCHLD, SIG_DFL);
        sigprocmask(SIG_SETMASK, &none, NULL);
        setsid();
        if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0) fail_child(report[1], "dup2");
        char home[1024];
        home_of(uid, home, sizeof home);
        if (cwd[0] && chdir(cwd)) fail_child(report[1], cwd); /* as root, as runc enters it */
        if (setgroups(1, &gid)) fail_child(report[1], "setgroups"); /* docker exec's "uid:gid": that group alone */
        if (setgid(gid)) fail_child(report[1], "setgid");
        if (setuid(uid)) fail_child(report[1], "setuid");
        environ = envp;
        if (!getenv("HOME")) setenv("HOME", home[0] ? home : "/", 1);
        execvp(argv[0], argv);
        fail_child(report[1], argv[0]);
    }
    free(strings);
    close(in[0]); close(out[1]); close(err[1]); close(report[1]);
    if (pid < 0) {
        if (in[1] >= 0) close(in[1]);
        close(out[0]); close(err[0]); close(report[0]);
        send_frame('E', id, "fork failed", 11);
        return;
    }
    struct command *c = calloc(1, sizeof *c);
    c->id = id; c->pid = pid; c->in = in[1]; c->out = out[0]; c->err = err[0]; c->report = report[0];
    if (c->in >= 0) fcntl(c->in, F_SETFL, O_NONBLOCK);
    c->next = commands;
    commands = c;
}

/* The exec report, once it can be read: EOF is a start (P), text is why there was none (E). */
static void settle_start(struct command *c) {
    char why[512];
    ssize_t n;
    while ((n = read(c->report, why, sizeof why)) < 0 && errno == EINTR) {
    }
    close_fd(&c->report);
    if (n > 0) { /* it never ran: its pipes closed, its exit reaped and left unsaid */
        c->discard = 1;
        close_fd(&c->in); close_fd(&c->out); close_fd(&c->err);
        send_frame('E', c->id, why, (uint32_t)n);
    } else {
        send_u32('P', c->id, (uint32_t)c->pid);
    }
}

static void feed(struct command *c, const unsigned char *data, uint32_t len) {
    if (len == 0) {
        c->close_in = 1;
    } else if (c->in >= 0 && !c->close_in) {
        if (c->pending_len + len > c->pending_cap) {
            size_t cap = c->pending_cap ? c->pending_cap : CHUNK;
            while (cap < c->pending_len + len) cap *= 2;
            c->pending = realloc(c->pending, cap);
            c->pending_cap = cap;
        }
        memcpy(c->pending + c->pending_len, data, len);
        c->pending_len += len;
    }
    if (c->close_in && c->pending_len == 0) close_fd(&c->in);
}

static void stdin_gone(struct command *c) {
    if (c->in < 0) return;
    c->pending_len = 0;
    close_fd(&c->in);
    if (!c->discard) send_frame('C', c->id, NULL, 0);
}

static void write_stdin(struct command *c) {
    size_t taken = 0;
    while (c->pending_len) {
        ssize_t n = write(c->in, c->pending, c->pending_len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) break;
        if (n <= 0) { /* it closed its stdin: what is left is dropped, as a pipe would */
            stdin_gone(c);
            return;
        }
        memmove(c->pending, c->pending + n, c->pending_len - (size_t)n);
        c->pending_len -= (size_t)n;
        taken += (size_t)n;
    }
    if (taken && !c->discard) send_u32('W', c->id, (uint32_t)taken);
    if (c->close_in && c->pending_len == 0) close_fd(&c->in);
}

static void handle(char type, uint32_t id, const unsigned char *payload, uint32_t len) {
    if (type == 'S') {
        spawn(id, payload, len);
        return;
    }
    if (type == 'Q') _exit(0);
    struct command *c = find(id);
    if (!c) return; /* gone already: forgotten, or it never started */
    if (type == 'I') {
        feed(c, payload, len);
    } else if (type == 'K' && len == 4) {
        kill(-c->pid, (int)get32(payload));
        if (!c->reaped) kill(c->pid, (int)get32(payload));
    } else if (type == 'A' && len == 4) {
        c->untaken -= (long)get32(payload);
    } else if (type == 'F') {
        c->discard = 1;
        close_fd(&c->in);
    }
}

static void relay_output(struct command *c, int *fd, char type) {
    char chunk[CHUNK];
    ssize_t n;
    while ((n = read(*fd, chunk, sizeof chunk)) < 0 && errno == EINTR) {
    }
    if (n > 0) {
        if (c->discard) return;
        c->untaken += n;
        send_frame(type, c->id, chunk, (uint32_t)n);
    } else {
        close_fd(fd);
        if (!c->discard) send_frame(type, c->id, NULL, 0);
    }
}

static void reap(void) {
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
        for (struct command *c = commands; c; c = c->next)
            if (c->pid == pid && !c->reaped) {
                c->reaped = 1;
                if (c->report >= 0) settle_start(c); /* its start is said before its end */
                close_fd(&c->in);
                if (!c->discard) send_u32('X', c->id, (uint32_t)status);
                drop_if_done(c);
                break;
            }
}

static void on_child(int sig) {
    int saved = errno;
    (void)sig;
    if (write(wake[1], "x", 1) < 0) {
    } /* full: a wake-up is pending already */
    errno = saved;
}

/* Complete frames at the front of `buffer`, handled and removed; what is left is a frame's start. */
static size_t handle_frames(unsigned char *buffer, size_t have) {
    size_t at = 0;
    while (have - at >= HEADER) {
        uint32_t len = get32(buffer + at + 5);
        if (have - at - HEADER < len) break;
        handle((char)buffer[at], get32(buffer + at + 1), buffer + at + HEADER, len);
        at += HEADER + len;
    }
    memmove(buffer, buffer + at, have - at);
    return have - at;
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    if (pipe2(wake, O_CLOEXEC | O_NONBLOCK)) return 1;
    struct sigaction action = {0};
    action.sa_handler = on_child;
    action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigaction(SIGCHLD, &action, NULL);
    fcntl(0, F_SETFD, FD_CLOEXEC);
    fcntl(1, F_SETFD, FD_CLOEXEC);

    size_t have = 0, cap = CHUNK;
    unsigned char *buffer = malloc(cap);
    int requests_open = 1;
    for (;;) {
        size_t count = 2;
        for (struct command *c = commands; c; c = c->next) count += 4;
        struct pollfd *fds = calloc(count, sizeof *fds);
        uint32_t *ids = calloc(count, sizeof *ids);
        size_t n = 0;
        fds[n++] = (struct pollfd){.fd = wake[0], .events = POLLIN};
        fds[n++] = (struct pollfd){.fd = requests_open ? 0 : -1, .events = POLLIN};
        for (struct command *c = commands; c; c = c->next) {
            int room = c->untaken < CREDIT || c->discard;
            ids[n] = c->id; fds[n++] = (struct pollfd){.fd = room ? c->out : -1, .events = POLLIN};
            ids[n] = c->id; fds[n++] = (struct pollfd){.fd = room ? c->err : -1, .events = POLLIN};
            ids[n] = c->id; fds[n++] = (struct pollfd){.fd = c->pending_len ? c->in : -1, .events = POLLOUT};
            ids[n] = c->id; fds[n++] = (struct pollfd){.fd = c->report, .events = POLLIN};
        }
        if (poll(fds, n, -1) < 0) {
            free(fds); free(ids);
            if (errno == EINTR) continue;
            return 2;
        }
        /* Output before exits: what a command wrote is sent before the word that it ended. The
         * command is found again by id each time: handling one may drop another. */
        for (size_t i = 2; i < n; i++) {
            struct command *c = fds[i].revents ? find(ids[i]) : NULL;
            if (!c) continue;
            int slot = (int)((i - 2) % 4);
            if (slot == 3 && c->report >= 0 && fds[i].fd == c->report) settle_start(c);
            else if (c->report >= 0) continue; /* nothing of it is said before its start */
            else if (slot == 0 && c->out >= 0 && fds[i].fd == c->out) relay_output(c, &c->out, 'O');
            else if (slot == 1 && c->err >= 0 && fds[i].fd == c->err) relay_output(c, &c->err, 'R');
            else if (slot == 2 && c->in >= 0 && fds[i].fd == c->in) write_stdin(c);
            drop_if_done(c);
        }
        if (fds[0].revents) {
            char drain[64];
            while (read(wake[0], drain, sizeof drain) > 0) {
            }
            reap();
        }
        if (fds[1].revents) {
            if (have == cap) buffer = realloc(buffer, cap *= 2);
            ssize_t got = read(0, buffer + have, cap - have);
            if (got > 0) {
                have = handle_frames(buffer, have + (size_t)got);
            } else if (got == 0 || errno != EINTR) {
                requests_open = 0; /* the engine let go: the commands run on, as execs would */
            }
        }
        free(fds);
        free(ids);
    }
}
