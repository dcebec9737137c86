/* floor_server.c: the floor of usched_netbench, the least an HTTP/1.1 server
 * can do per request. One thread, one epoll set, non-blocking sockets on
 * 127.0.0.1. Requests are not parsed: each connection counts the ends of
 * requests ("\r\n\r\n") as the bytes arrive, and answers each with the same
 * fixed reply, in order, so pipelined requests get their replies in order
 * too. Connections stay open (keep-alive) until the client closes them.
 *
 *   floor_server --port N
 *
 * SIGINT or SIGTERM stops it with exit status 0 (the signals arrive through
 * a signalfd in the same epoll set, so no handler runs in the middle of a
 * request). A bad command line is one line on stderr and exit status 2; a
 * failure to listen, exit status 1.
 *
 * Level-triggered, one read() per readable event: a request-reply client
 * sends one request and waits, so a read usually drains the socket, and an
 * edge-triggered loop would spend a second read() per request only to be
 * told EAGAIN. */
#define _GNU_SOURCE /* accept4() */
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>

static const char reply[] =
    "HTTP/1.1 200 OK\r\n"
    "Content-Type: text/plain\r\n"
    "Content-Length: 13\r\n"
    "\r\n"
    "Hello, world!";
#define REPLY_LEN (sizeof reply - 1)

/* Bytes taken from a socket per read(). A request is about 40 bytes (wrk's
 * GET); this holds a deep pipeline in one read. */
#define READ_CHUNK 16384
/* Events taken from epoll_wait() at once. */
#define MAX_EVENTS 256
/* The listen backlog: wrk opens all its connections at once. */
#define BACKLOG 4096

/* conn is one client connection: where it stands in matching "\r\n\r\n",
 * and the replies it could not write yet. While out holds bytes the socket
 * waits for EPOLLOUT instead of EPOLLIN, so a client that does not read
 * cannot make the server buffer without bound. */
struct conn {
  int fd;
  unsigned matched; /* characters of "\r\n\r\n" seen at the end of the input */
  char* out;
  size_t out_len;
  size_t out_sent;
  size_t out_cap;
};

/* The connections by descriptor, so that a stop closes every one. */
static struct conn** conns;
static size_t conns_cap;

static int usage(const char* why) {
  fprintf(stderr, "floor_server: %s; usage: floor_server --port N (N: 1..65535)\n", why);
  return 2;
}

static int parse_port(const char* v) {
  char* end = NULL;
  errno = 0;
  const long n = strtol(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || n < 1 || n > 65535) return -1;
  return (int)n;
}

static struct conn* conn_new(int fd) {
  if ((size_t)fd >= conns_cap) {
    size_t cap = conns_cap ? conns_cap : 1024;
    while (cap <= (size_t)fd) cap *= 2;
    struct conn** grown = realloc(conns, cap * sizeof *grown);
    if (!grown) return NULL;
    memset(grown + conns_cap, 0, (cap - conns_cap) * sizeof *grown);
    conns = grown;
    conns_cap = cap;
  }
  struct conn* c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->fd = fd;
  conns[fd] = c;
  return c;
}

static void conn_close(struct conn* c) {
  conns[c->fd] = NULL;
  close(c->fd); /* also takes it out of the epoll set */
  free(c->out);
  free(c);
}

/* count_requests() advances c's match of "\r\n\r\n" over buf and returns
 * how many requests ended in it. */
static size_t count_requests(struct conn* c, const char* buf, size_t len) {
  static const char end[4] = {'\r', '\n', '\r', '\n'};
  size_t n = 0;
  unsigned m = c->matched;
  for (size_t i = 0; i < len; ++i) {
    if (buf[i] == end[m]) {
      if (++m == 4) {
        ++n;
        m = 0;
      }
    } else {
      m = buf[i] == '\r' ? 1 : 0;
    }
  }
  c->matched = m;
  return n;
}

/* flush() writes what c has pending; 0 when all of it went, 1 when the
 * socket is full, -1 when the connection failed. */
static int flush(struct conn* c) {
  while (c->out_sent < c->out_len) {
    const ssize_t w = write(c->fd, c->out + c->out_sent, c->out_len - c->out_sent);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK ? 1 : -1;
    }
    c->out_sent += (size_t)w;
  }
  c->out_len = c->out_sent = 0;
  return 0;
}

/* answer() queues n replies on c and writes them; as flush(). The common
 * case, one reply and nothing pending, is one write() from the constant. */
static int answer(struct conn* c, size_t n) {
  if (n == 1 && c->out_len == 0) {
    const ssize_t w = write(c->fd, reply, REPLY_LEN);
    if (w == (ssize_t)REPLY_LEN) return 0;
    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
    /* Partly written: the rest goes to the buffer below. */
    const size_t done = w > 0 ? (size_t)w : 0;
    if (c->out_cap < REPLY_LEN) {
      char* grown = realloc(c->out, REPLY_LEN);
      if (!grown) return -1;
      c->out = grown;
      c->out_cap = REPLY_LEN;
    }
    memcpy(c->out, reply + done, REPLY_LEN - done);
    c->out_len = REPLY_LEN - done;
    c->out_sent = 0;
    return 1;
  }
  const size_t need = c->out_len + n * REPLY_LEN;
  if (need > c->out_cap) {
    char* grown = realloc(c->out, need);
    if (!grown) return -1;
    c->out = grown;
    c->out_cap = need;
  }
  for (size_t i = 0; i < n; ++i) memcpy(c->out + c->out_len + i * REPLY_LEN, reply, REPLY_LEN);
  c->out_len = need;
  return flush(c);
}

static int watch(int ep, int op, struct conn* c, unsigned events) {
  struct epoll_event ev;
  memset(&ev, 0, sizeof ev);
  ev.events = events;
  ev.data.ptr = c;
  return epoll_ctl(ep, op, c->fd, &ev);
}

/* on_readable() reads once from c and answers the requests that ended. */
static void on_readable(int ep, struct conn* c) {
  char buf[READ_CHUNK];
  const ssize_t r = read(c->fd, buf, sizeof buf);
  if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
    conn_close(c);
    return;
  }
  if (r < 0) return;
  const size_t n = count_requests(c, buf, (size_t)r);
  if (n == 0) return;
  const int st = answer(c, n);
  if (st < 0) conn_close(c);
  else if (st > 0 && watch(ep, EPOLL_CTL_MOD, c, EPOLLOUT) != 0) conn_close(c);
}

/* on_writable() sends what c has pending and goes back to reading once it
 * has all gone. */
static void on_writable(int ep, struct conn* c) {
  const int st = flush(c);
  if (st < 0) conn_close(c);
  else if (st == 0 && watch(ep, EPOLL_CTL_MOD, c, EPOLLIN) != 0) conn_close(c);
}

static void on_acceptable(int ep, int lfd) {
  for (;;) {
    const int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return; /* EAGAIN: all taken; anything else: the next event retries */
    /* Replies are small and the client waits for each: send at once. */
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct conn* c = conn_new(fd);
    if (!c) {
      close(fd);
      continue;
    }
    if (watch(ep, EPOLL_CTL_ADD, c, EPOLLIN) != 0) conn_close(c);
  }
}

int main(int argc, char** argv) {
  int port = -1;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = NULL;
    if (strcmp(a, "--port") == 0 || strcmp(a, "-port") == 0) {
      if (i + 1 >= argc) return usage("--port needs a value");
      v = argv[++i];
    } else if (strncmp(a, "--port=", 7) == 0) {
      v = a + 7;
    } else {
      char why[256];
      snprintf(why, sizeof why, "'%s' is not a flag", a);
      return usage(why);
    }
    port = parse_port(v);
    if (port < 0) {
      char why[256];
      snprintf(why, sizeof why, "--port '%s' is not valid", v);
      return usage(why);
    }
  }
  if (port < 0) return usage("--port is required");

  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  sigprocmask(SIG_BLOCK, &stop, NULL);
  /* A client that goes away mid-write must not kill the server. */
  signal(SIGPIPE, SIG_IGN);
  const int sfd = signalfd(-1, &stop, SFD_NONBLOCK | SFD_CLOEXEC);

  const int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (sfd < 0 || lfd < 0) {
    fprintf(stderr, "floor_server: cannot make a socket: %s\n", strerror(errno));
    return 1;
  }
  const int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in addr;
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_port = htons((unsigned short)port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(lfd, (const struct sockaddr*)&addr, sizeof addr) != 0 || listen(lfd, BACKLOG) != 0) {
    fprintf(stderr, "floor_server: cannot listen on 127.0.0.1:%d: %s\n", port, strerror(errno));
    return 1;
  }

  const int ep = epoll_create1(EPOLL_CLOEXEC);
  /* The listening socket and the signalfd are told apart from connections
   * by their data: these two markers are never a conn's address. */
  static char listen_mark, signal_mark;
  struct epoll_event ev;
  memset(&ev, 0, sizeof ev);
  ev.events = EPOLLIN;
  ev.data.ptr = &listen_mark;
  const int ok_listen = ep >= 0 ? epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) : -1;
  ev.data.ptr = &signal_mark;
  const int ok_signal = ep >= 0 ? epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev) : -1;
  if (ok_listen != 0 || ok_signal != 0) {
    fprintf(stderr, "floor_server: cannot set up epoll: %s\n", strerror(errno));
    return 1;
  }

  struct epoll_event events[MAX_EVENTS];
  int running = 1;
  while (running) {
    const int n = epoll_wait(ep, events, MAX_EVENTS, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      fprintf(stderr, "floor_server: epoll_wait: %s\n", strerror(errno));
      return 1;
    }
    for (int i = 0; i < n; ++i) {
      void* p = events[i].data.ptr;
      if (p == &signal_mark) {
        running = 0;
      } else if (p == &listen_mark) {
        on_acceptable(ep, lfd);
      } else {
        /* A connection is closed only while its own event is handled,
         * and epoll reports a descriptor once per batch, so no later
         * event in this batch names a closed one. Errors and hang-ups
         * go to the reads and writes, which see them and close. */
        struct conn* c = p;
        if (events[i].events & EPOLLOUT) on_writable(ep, c);
        else on_readable(ep, c);
      }
    }
  }

  for (size_t fd = 0; fd < conns_cap; ++fd) {
    if (conns[fd]) conn_close(conns[fd]);
  }
  free(conns);
  close(lfd);
  close(sfd);
  close(ep);
  return 0;
}
