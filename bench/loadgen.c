/*
 * loadgen: the load generator and origin server of the Sluice benchmark (bench/run.mjs builds it with
 * `cc -O2`). One epoll thread per process, Linux only, no dependencies.
 *
 *   loadgen server [--bind IP] [--max-seconds S]
 *       Origin: an echo port, a bulk port (reads "<bytes>\n", sends that many bytes, closes; or reads
 *       "U<bytes>\n" and then that many bytes, answers "ok\n" and closes) and an
 *       HTTP/1.1 port (every request gets a 64-byte 200, keep-alive unless the request says close).
 *       Prints {"echo":P,"bulk":P,"http":P} on stdout, then serves until stdin closes, SIGTERM, or
 *       --max-seconds.
 *
 *   loadgen latency --target IP:PORT [--connect HOST:PORT] [--auth B64] [--size 32] [--duration S] [--max N]
 *       Sequential: connect, [CONNECT HOST:PORT, read 200], send SIZE bytes, read them back, close.
 *   loadgen rate    ... --concurrency C --duration S          the same cycle, C at a time
 *   loadgen bulk    --target IP:PORT [--connect HOST:PORT] [--auth B64] --bytes N [--up]
 *       One stream: [CONNECT], send "<N>\n" to the bulk port, read N bytes; with --up, send "U<N>\n"
 *       and N bytes, and read the origin's "ok\n" (the upload is timed to that answer).
 *   loadgen http    --target IP:PORT --host HOST:PORT [--absolute] [--auth B64] --concurrency C --duration S
 *       Keep-alive GETs, one outstanding per connection; --absolute sends absolute-form (through a proxy).
 *   loadgen idle    --target IP:PORT --connect HOST:PORT [--auth B64] --count N [--parallel P] [--hold-max S]
 *       Opens N tunnels (each proven by one echo), prints a READY line, holds them until a line or EOF on
 *       stdin (or --hold-max), then reports how many were still open and closes them.
 *
 * Every client mode prints one JSON object on stdout, with its own CPU time (getrusage).
 * Every loop is bounded by a deadline; every socket operation by a timeout.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define IO_TIMEOUT_MS 5000
#define MAX_ERRORS 20000

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}
static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void raise_nofile(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  struct rlimit want = {65536, 65536};
  if (setrlimit(RLIMIT_NOFILE, &want) == 0) return;
  rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);
}

static void cpu_times(double *user, double *sys) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  *user = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
  *sys = ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static void die(const char *msg) {
  fprintf(stderr, "loadgen: %s: %s\n", msg, strerror(errno));
  exit(2);
}

/* ---------- options ---------- */
struct opts {
  const char *mode;
  const char *target;   /* IP:PORT the TCP connection goes to */
  const char *connect;  /* HOST:PORT for CONNECT, or NULL for a direct exchange */
  const char *host;     /* http: HOST:PORT of the origin */
  const char *auth;     /* base64 user:token, or NULL */
  const char *bind;
  int absolute;
  int up;
  int size, concurrency, parallel, max;
  long long bytes, count;
  double duration, hold_max, max_seconds;
};
static struct opts O = {.size = 32, .concurrency = 32, .parallel = 64, .max = 2000000, .bytes = 256LL << 20,
                        .count = 2000, .duration = 2, .hold_max = 120, .max_seconds = 3600, .bind = "127.0.0.1"};

static struct sockaddr_storage target_addr;
static socklen_t target_len;

static void parse_target(const char *s) {
  char host[256];
  const char *colon = strrchr(s, ':');
  if (!colon || colon - s >= (int)sizeof host) { fprintf(stderr, "loadgen: bad --target %s\n", s); exit(2); }
  memcpy(host, s, colon - s);
  host[colon - s] = 0;
  char *h = host;
  if (h[0] == '[') { h++; h[strlen(h) - 1] = 0; }
  struct addrinfo hints = {0}, *res;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(h, colon + 1, &hints, &res) != 0) { fprintf(stderr, "loadgen: bad --target %s\n", s); exit(2); }
  memcpy(&target_addr, res->ai_addr, res->ai_addrlen);
  target_len = res->ai_addrlen;
  freeaddrinfo(res);
}

/* ---------- error accounting ---------- */
enum { E_CONNECT, E_STATUS, E_EOF, E_TIMEOUT, E_RESET, E_IO, E_BADRESP, E_N };
static const char *E_NAMES[E_N] = {"connect", "status", "eof", "timeout", "reset", "io", "bad_response"};
static long errors[E_N];
static long status_counts[600];
static long total_errors(void) {
  long n = 0;
  for (int i = 0; i < E_N; i++) n += errors[i];
  return n;
}
static void errno_error(void) {
  if (errno == ECONNRESET || errno == EPIPE) errors[E_RESET]++;
  else if (errno == EAGAIN || errno == ETIMEDOUT) errors[E_TIMEOUT]++;
  else if (errno == ECONNREFUSED || errno == EADDRNOTAVAIL) errors[E_CONNECT]++;
  else errors[E_IO]++;
}

static void print_errors(void) {
  printf("\"errors\":{");
  for (int i = 0; i < E_N; i++) printf("%s\"%s\":%ld", i ? "," : "", E_NAMES[i], errors[i]);
  printf("},\"statuses\":{");
  int first = 1;
  for (int i = 0; i < 600; i++)
    if (status_counts[i]) { printf("%s\"%d\":%ld", first ? "" : ",", i, status_counts[i]); first = 0; }
  printf("}");
}

/* ---------- latency samples ---------- */
static int64_t *samples;
static long nsamples, cap_samples;
static void sample(int64_t ns) {
  if (nsamples < cap_samples) samples[nsamples++] = ns;
}
static int cmp64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}
static double pct(double p) {
  if (nsamples == 0) return 0;
  long i = (long)(p * (nsamples - 1) + 0.5);
  return samples[i] / 1000.0;
}
static void print_latency(void) {
  qsort(samples, nsamples, sizeof *samples, cmp64);
  double sum = 0;
  for (long i = 0; i < nsamples; i++) sum += samples[i];
  printf("\"latency_us\":{\"n\":%ld,\"mean\":%.1f,\"p50\":%.1f,\"p90\":%.1f,\"p99\":%.1f,\"p999\":%.1f,\"max\":%.1f}",
         nsamples, nsamples ? sum / nsamples / 1000.0 : 0, pct(0.5), pct(0.9), pct(0.99), pct(0.999),
         nsamples ? samples[nsamples - 1] / 1000.0 : 0);
}

/* ---------- request text ---------- */
static char connect_req[1024];
static int connect_req_len;
static char payload[4096];

static void build_connect(void) {
  for (int i = 0; i < (int)sizeof payload; i++) payload[i] = 'a' + i % 26;
  if (!O.connect) return;
  connect_req_len = snprintf(connect_req, sizeof connect_req, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n%s%s%s\r\n", O.connect,
                             O.connect, O.auth ? "Proxy-Authorization: Basic " : "", O.auth ? O.auth : "", O.auth ? "\r\n" : "");
}

/* The status of an HTTP response head in buf[0..len), and the head's length; 0 while incomplete, -1 if bad. */
static int parse_head(const char *buf, int len, int *status) {
  const char *end = memmem(buf, len, "\r\n\r\n", 4);
  if (!end) return len > 8000 ? -1 : 0;
  if (len < 12 || memcmp(buf, "HTTP/1.", 7) != 0) return -1;
  *status = atoi(buf + 9);
  return (int)(end - buf) + 4;
}

/* ---------- blocking helpers (latency, bulk) ---------- */
static int blocking_socket(void) {
  int fd = socket(target_addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket");
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct timeval tv = {IO_TIMEOUT_MS / 1000, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
}
static int write_all(int fd, const char *p, int n) {
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return -1;
    p += w;
    n -= w;
  }
  return 0;
}
/* Connects and, through a proxy, completes CONNECT. Leftover bytes after the 200 head go to *extra. */
static int open_tunnel_blocking(int *extra) {
  *extra = 0;
  int fd = blocking_socket();
  if (connect(fd, (struct sockaddr *)&target_addr, target_len) != 0) { errno_error(); close(fd); return -1; }
  if (!O.connect) return fd;
  if (write_all(fd, connect_req, connect_req_len) != 0) { errno_error(); close(fd); return -1; }
  char buf[8192];
  int have = 0, status = 0, hl = 0;
  while ((hl = parse_head(buf, have, &status)) == 0) {
    ssize_t r = recv(fd, buf + have, sizeof buf - have, 0);
    if (r == 0) { errors[E_EOF]++; close(fd); return -1; }
    if (r < 0) { errno_error(); close(fd); return -1; }
    have += r;
  }
  if (hl < 0) { errors[E_BADRESP]++; close(fd); return -1; }
  if (status != 200) {
    errors[E_STATUS]++;
    if (status > 0 && status < 600) status_counts[status]++;
    close(fd);
    return -1;
  }
  *extra = have - hl;
  return fd;
}

static int run_latency(void) {
  cap_samples = O.max;
  samples = malloc(sizeof *samples * cap_samples);
  double t_end = now_s() + O.duration, t0 = now_s();
  long done = 0;
  char buf[4096];
  while (now_s() < t_end && done < O.max && total_errors() < MAX_ERRORS) {
    int64_t s = now_ns();
    int extra;
    int fd = open_tunnel_blocking(&extra);
    if (fd < 0) continue;
    if (write_all(fd, payload, O.size) != 0) { errno_error(); close(fd); continue; }
    int got = extra, ok = 1;
    while (got < O.size) {
      ssize_t r = recv(fd, buf, sizeof buf, 0);
      if (r == 0) { errors[E_EOF]++; ok = 0; break; }
      if (r < 0) { errno_error(); ok = 0; break; }
      got += r;
    }
    close(fd);
    if (!ok) continue;
    sample(now_ns() - s);
    done++;
  }
  double wall = now_s() - t0, u, sy;
  cpu_times(&u, &sy);
  printf("{\"mode\":\"latency\",\"done\":%ld,\"wall_s\":%.3f,\"rate\":%.1f,\"cpu_user_s\":%.3f,\"cpu_sys_s\":%.3f,", done, wall,
         done / wall, u, sy);
  print_errors();
  printf(",");
  print_latency();
  printf("}\n");
  return 0;
}

/* Upload: N bytes to the bulk port's sink, timed from the first byte sent to the origin's "ok\n". */
static int run_bulk_up(int fd, double t0) {
  char req[64];
  int n = snprintf(req, sizeof req, "U%lld\n", O.bytes);
  double ts = now_s();
  static char big[1 << 18];
  memset(big, 'u', sizeof big);
  int ok = write_all(fd, req, n) == 0;
  if (!ok) errno_error();
  long long sent = 0;
  while (ok && sent < O.bytes) {
    int chunk = O.bytes - sent < (long long)sizeof big ? (int)(O.bytes - sent) : (int)sizeof big;
    if (write_all(fd, big, chunk) != 0) { errno_error(); ok = 0; break; }
    sent += chunk;
  }
  char ans[8];
  int got = 0;
  while (ok && got < 3) {
    ssize_t r = recv(fd, ans + got, sizeof ans - got, 0);
    if (r == 0) { errors[E_EOF]++; ok = 0; break; }
    if (r < 0) { errno_error(); ok = 0; break; }
    got += r;
  }
  if (ok && memcmp(ans, "ok\n", 3) != 0) { errors[E_BADRESP]++; ok = 0; }
  double te = now_s();
  close(fd);
  double u, sy;
  cpu_times(&u, &sy);
  printf("{\"mode\":\"bulk\",\"dir\":\"up\",\"ok\":%s,\"bytes\":%lld,\"wall_s\":%.4f,\"setup_s\":%.6f,\"mibps\":%.1f,"
         "\"cpu_user_s\":%.3f,\"cpu_sys_s\":%.3f,",
         ok ? "true" : "false", sent, te - ts, ts - t0, sent / (te - ts) / 1048576.0, u, sy);
  print_errors();
  printf("}\n");
  return ok ? 0 : 1;
}

static int run_bulk(void) {
  int extra;
  double t0 = now_s();
  int fd = open_tunnel_blocking(&extra);
  if (fd < 0) {
    printf("{\"mode\":\"bulk\",\"ok\":false,");
    print_errors();
    printf("}\n");
    return 1;
  }
  if (O.up) return run_bulk_up(fd, t0);
  int rcv = 0;
  socklen_t sl = sizeof rcv;
  char req[64];
  int n = snprintf(req, sizeof req, "%lld\n", O.bytes);
  double ts = now_s(), tfirst = 0;
  if (write_all(fd, req, n) != 0) { errno_error(); close(fd); printf("{\"mode\":\"bulk\",\"ok\":false,"); print_errors(); printf("}\n"); return 1; }
  static char big[1 << 18];
  long long got = extra;
  int ok = 1;
  while (got < O.bytes) {
    ssize_t r = recv(fd, big, sizeof big, 0);
    if (r == 0) { errors[E_EOF]++; ok = 0; break; }
    if (r < 0) { errno_error(); ok = 0; break; }
    if (tfirst == 0) tfirst = now_s();
    got += r;
  }
  double te = now_s();
  getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, &sl);
  close(fd);
  double u, sy;
  cpu_times(&u, &sy);
  printf("{\"mode\":\"bulk\",\"ok\":%s,\"bytes\":%lld,\"wall_s\":%.4f,\"setup_s\":%.6f,\"ttfb_s\":%.6f,\"mibps\":%.1f,"
         "\"cpu_user_s\":%.3f,\"cpu_sys_s\":%.3f,",
         ok ? "true" : "false", got, te - ts, ts - t0, tfirst ? tfirst - ts : 0, got / (te - ts) / 1048576.0, u, sy);
  print_errors();
  printf("}\n");
  return ok ? 0 : 1;
}

/* ---------- nonblocking client state machine (rate, idle, http) ---------- */
enum { S_FREE, S_CONNECTING, S_HEAD, S_ECHO, S_IDLE, S_HTTP };
struct conn {
  int fd, state, have, got, close_after;
  int64_t started, req_started;
  double deadline;
  char buf[8192];
};
static struct conn *conns;
static int ep;
static char http_req[1024];
static int http_req_len;

static void conn_close(struct conn *c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  c->state = S_FREE;
}

static int conn_open(struct conn *c, long idx) {
  int fd = socket(target_addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) { errno_error(); return -1; }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  c->fd = fd;
  c->have = c->got = c->close_after = 0;
  c->started = now_ns();
  c->deadline = now_s() + IO_TIMEOUT_MS / 1000.0;
  c->state = S_CONNECTING;
  struct epoll_event ev = {.events = EPOLLOUT | EPOLLIN | EPOLLRDHUP, .data.u64 = (uint64_t)idx};
  int r = connect(fd, (struct sockaddr *)&target_addr, target_len);
  if (r != 0 && errno != EINPROGRESS) { errno_error(); conn_close(c); return -1; }
  if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) die("epoll_ctl");
  return 0;
}

static void set_events(struct conn *c, long idx, uint32_t events) {
  struct epoll_event ev = {.events = events, .data.u64 = (uint64_t)idx};
  epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static int send_small(struct conn *c, const char *p, int n) {
  ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
  if (w == n) return 0;
  if (w < 0) errno_error();
  else errors[E_IO]++; /* a short write of a few hundred bytes on a fresh socket: treat as failure */
  return -1;
}

/* Start the exchange once connected: CONNECT (through a proxy), the echo payload (direct), or an HTTP request. */
static int after_connect(struct conn *c, long idx, int http) {
  int err = 0;
  socklen_t l = sizeof err;
  getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &l);
  if (err) { errno = err; errno_error(); return -1; }
  set_events(c, idx, EPOLLIN | EPOLLRDHUP);
  if (http) {
    c->state = S_HTTP;
    c->req_started = now_ns();
    return send_small(c, http_req, http_req_len);
  }
  if (O.connect) {
    c->state = S_HEAD;
    return send_small(c, connect_req, connect_req_len);
  }
  c->state = S_ECHO;
  return send_small(c, payload, O.size);
}

/* Tunnel cycle on readable: read the CONNECT head, send the payload, read the echo. 1 = echo complete. */
static int tunnel_readable(struct conn *c) {
  for (;;) {
    ssize_t r = recv(c->fd, c->buf + c->have, sizeof c->buf - c->have, 0);
    if (r == 0) { errors[E_EOF]++; return -1; }
    if (r < 0) {
      if (errno == EAGAIN) return 0;
      errno_error();
      return -1;
    }
    if (c->state == S_HEAD) {
      c->have += r;
      int status = 0, hl = parse_head(c->buf, c->have, &status);
      if (hl == 0) continue;
      if (hl < 0) { errors[E_BADRESP]++; return -1; }
      if (status != 200) {
        errors[E_STATUS]++;
        if (status > 0 && status < 600) status_counts[status]++;
        return -1;
      }
      c->got = c->have - hl;
      c->have = 0;
      c->state = S_ECHO;
      if (send_small(c, payload, O.size) != 0) return -1;
    } else if (c->state == S_ECHO) {
      c->got += r;
    } else if (c->state == S_IDLE) {
      return 0; /* unexpected bytes on an idle tunnel: ignore */
    }
    if (c->state == S_ECHO && c->got >= O.size) return 1;
  }
}

static void check_deadlines(long n) {
  double t = now_s();
  for (long i = 0; i < n; i++) {
    struct conn *c = &conns[i];
    if (c->state != S_FREE && c->state != S_IDLE && t > c->deadline) {
      errors[E_TIMEOUT]++;
      conn_close(c);
    }
  }
}

static int run_rate(void) {
  ep = epoll_create1(EPOLL_CLOEXEC);
  int n = O.concurrency;
  conns = calloc(n, sizeof *conns);
  cap_samples = O.max;
  samples = malloc(sizeof *samples * cap_samples);
  for (int i = 0; i < n; i++) conns[i].fd = -1;
  double t0 = now_s(), t_end = t0 + O.duration, last_check = t0;
  long done = 0;
  struct epoll_event evs[256];
  for (int i = 0; i < n; i++) conn_open(&conns[i], i);
  while (now_s() < t_end && total_errors() < MAX_ERRORS) {
    int k = epoll_wait(ep, evs, 256, 50);
    for (int j = 0; j < k; j++) {
      long i = (long)evs[j].data.u64;
      struct conn *c = &conns[i];
      if (c->state == S_FREE) continue;
      int r;
      if (c->state == S_CONNECTING) r = after_connect(c, i, 0) == 0 ? 0 : -1;
      else r = tunnel_readable(c);
      if (r == 1) {
        sample(now_ns() - c->started);
        done++;
        conn_close(c);
      } else if (r < 0) conn_close(c);
    }
    if (now_s() - last_check > 0.1) { check_deadlines(n); last_check = now_s(); }
    for (int i = 0; i < n; i++)
      if (conns[i].state == S_FREE && now_s() < t_end) conn_open(&conns[i], i);
  }
  double wall = now_s() - t0, u, sy;
  for (int i = 0; i < n; i++) conn_close(&conns[i]);
  cpu_times(&u, &sy);
  printf("{\"mode\":\"rate\",\"concurrency\":%d,\"done\":%ld,\"wall_s\":%.3f,\"rate\":%.1f,\"cpu_user_s\":%.3f,\"cpu_sys_s\":%.3f,",
         n, done, wall, done / wall, u, sy);
  print_errors();
  printf(",");
  print_latency();
  printf("}\n");
  return 0;
}

/* ---------- http client ---------- */
/* A complete response in c->buf? Returns its length (head + body), 0 if incomplete, -1 if malformed.
 * *eof_body is set when the body is delimited by the connection's end. */
static int http_response_len(struct conn *c, int *status, int *eof_body) {
  int hl = parse_head(c->buf, c->have, status);
  if (hl <= 0) return hl;
  *eof_body = 0;
  c->close_after = 0;
  long clen = -1;
  int chunked = 0;
  for (const char *p = c->buf; p < c->buf + hl;) {
    const char *e = memmem(p, c->buf + hl - p, "\r\n", 2);
    if (!e) break;
    if (strncasecmp(p, "content-length:", 15) == 0) clen = atol(p + 15);
    else if (strncasecmp(p, "transfer-encoding:", 18) == 0 && memmem(p, e - p, "chunked", 7)) chunked = 1;
    else if (strncasecmp(p, "connection:", 11) == 0 && memmem(p, e - p, "close", 5)) c->close_after = 1;
    p = e + 2;
  }
  if (memcmp(c->buf, "HTTP/1.0", 8) == 0 && !memmem(c->buf, hl, "eep-Alive", 9) && !memmem(c->buf, hl, "eep-alive", 9))
    c->close_after = 1;
  if (*status == 204 || *status == 304 || (*status >= 100 && *status < 200)) return hl;
  if (chunked) {
    int p = hl;
    for (;;) {
      char *e = memmem(c->buf + p, c->have - p, "\r\n", 2);
      if (!e) return 0;
      long sz = strtol(c->buf + p, NULL, 16);
      p = (int)(e - c->buf) + 2;
      if (sz == 0) {
        char *t = memmem(c->buf + p, c->have - p, "\r\n", 2); /* no trailers expected */
        if (!t) return 0;
        return (int)(t - c->buf) + 2;
      }
      if (c->have - p < sz + 2) return 0;
      p += sz + 2;
    }
  }
  if (clen >= 0) return c->have >= hl + clen ? hl + clen : 0;
  *eof_body = 1;
  c->close_after = 1;
  return 0;
}

static long http_done, http_conns, http_closed_idle;
static int http_readable(struct conn *c, long idx) {
  for (;;) {
    if (c->have >= (int)sizeof c->buf) { errors[E_BADRESP]++; return -1; }
    ssize_t r = recv(c->fd, c->buf + c->have, sizeof c->buf - c->have, 0);
    if (r < 0) {
      if (errno == EAGAIN) return 0;
      errno_error();
      return -1;
    }
    if (r == 0) {
      if (c->have == 0 && c->got > 0) { http_closed_idle++; return -1; } /* keep-alive ended by the far side */
      int status = 0, eof_body = 0;
      int len = http_response_len(c, &status, &eof_body);
      if (len == 0 && eof_body) { /* body ended by close: a complete response */
        if (status != 200) { errors[E_STATUS]++; if (status > 0 && status < 600) status_counts[status]++; }
        else { sample(now_ns() - c->req_started); http_done++; }
        return -1;
      }
      errors[E_EOF]++;
      return -1;
    }
    c->have += r;
    int status = 0, eof_body = 0;
    int len = http_response_len(c, &status, &eof_body);
    if (len < 0) { errors[E_BADRESP]++; return -1; }
    if (len == 0) continue;
    c->got++;
    if (status == 200) { sample(now_ns() - c->req_started); http_done++; }
    else {
      errors[E_STATUS]++;
      if (status > 0 && status < 600) status_counts[status]++;
    }
    memmove(c->buf, c->buf + len, c->have - len);
    c->have -= len;
    if (c->close_after) return -1; /* reconnect; not an error */
    c->req_started = now_ns();
    c->deadline = now_s() + IO_TIMEOUT_MS / 1000.0;
    (void)idx;
    if (send_small(c, http_req, http_req_len) != 0) return -1;
  }
}

static int run_http(void) {
  if (!O.host) { fprintf(stderr, "loadgen: http needs --host\n"); return 2; }
  if (O.absolute)
    http_req_len = snprintf(http_req, sizeof http_req, "GET http://%s/ HTTP/1.1\r\nHost: %s\r\n%s%s%s\r\n", O.host, O.host,
                            O.auth ? "Proxy-Authorization: Basic " : "", O.auth ? O.auth : "", O.auth ? "\r\n" : "");
  else
    http_req_len = snprintf(http_req, sizeof http_req, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", O.host);
  ep = epoll_create1(EPOLL_CLOEXEC);
  int n = O.concurrency;
  conns = calloc(n, sizeof *conns);
  cap_samples = O.max;
  samples = malloc(sizeof *samples * cap_samples);
  for (int i = 0; i < n; i++) conns[i].fd = -1;
  double t0 = now_s(), t_end = t0 + O.duration, last_check = t0;
  struct epoll_event evs[256];
  for (int i = 0; i < n; i++) { conn_open(&conns[i], i); http_conns++; }
  while (now_s() < t_end && total_errors() < MAX_ERRORS) {
    int k = epoll_wait(ep, evs, 256, 50);
    for (int j = 0; j < k; j++) {
      long i = (long)evs[j].data.u64;
      struct conn *c = &conns[i];
      if (c->state == S_FREE) continue;
      int r = c->state == S_CONNECTING ? after_connect(c, i, 1) : http_readable(c, i);
      if (r < 0) conn_close(c);
    }
    if (now_s() - last_check > 0.1) { check_deadlines(n); last_check = now_s(); }
    for (int i = 0; i < n; i++)
      if (conns[i].state == S_FREE && now_s() < t_end) { conn_open(&conns[i], i); http_conns++; }
  }
  double wall = now_s() - t0, u, sy;
  for (int i = 0; i < n; i++) conn_close(&conns[i]);
  cpu_times(&u, &sy);
  printf("{\"mode\":\"http\",\"concurrency\":%d,\"done\":%ld,\"connections\":%ld,\"closed_by_peer\":%ld,\"wall_s\":%.3f,\"rate\":%.1f,\"cpu_user_s\":%.3f,"
         "\"cpu_sys_s\":%.3f,",
         n, http_done, http_conns, http_closed_idle, wall, http_done / wall, u, sy);
  print_errors();
  printf(",");
  print_latency();
  printf("}\n");
  return 0;
}

/* ---------- idle tunnels ---------- */
static int run_idle(void) {
  ep = epoll_create1(EPOLL_CLOEXEC);
  long n = O.count;
  conns = calloc(n, sizeof *conns);
  for (long i = 0; i < n; i++) conns[i].fd = -1;
  double t0 = now_s(), t_end = t0 + 120;
  long next = 0, inflight = 0, established = 0, failed = 0;
  struct epoll_event evs[256];
  while (established + failed < n && now_s() < t_end) {
    while (inflight < O.parallel && next < n) {
      if (conn_open(&conns[next], next) == 0) inflight++;
      else failed++;
      next++;
    }
    int k = epoll_wait(ep, evs, 256, 50);
    for (int j = 0; j < k; j++) {
      long i = (long)evs[j].data.u64;
      struct conn *c = &conns[i];
      if (c->state == S_FREE) continue;
      if (c->state == S_IDLE) { /* closed by the far side while we were still opening others */
        char b[64];
        ssize_t r = recv(c->fd, b, sizeof b, 0);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) { conn_close(c); established--; failed++; }
        continue;
      }
      int r = c->state == S_CONNECTING ? (after_connect(c, i, 0) == 0 ? 0 : -1) : tunnel_readable(c);
      if (r == 1) { c->state = S_IDLE; established++; inflight--; }
      else if (r < 0) { conn_close(c); failed++; inflight--; }
    }
    double t = now_s();
    for (long i = 0; i < next; i++) {
      struct conn *c = &conns[i];
      if (c->state != S_FREE && c->state != S_IDLE && t > c->deadline) { errors[E_TIMEOUT]++; conn_close(c); failed++; inflight--; }
    }
  }
  double open_s = now_s() - t0;
  printf("READY {\"established\":%ld,\"failed\":%ld,\"open_s\":%.3f}\n", established, failed, open_s);
  fflush(stdout);
  /* hold until stdin has a line or closes, or hold_max passes */
  double hold_end = now_s() + O.hold_max;
  struct pollfd pfd = {.fd = 0, .events = POLLIN};
  while (now_s() < hold_end) {
    int r = poll(&pfd, 1, 200);
    if (r > 0) break;
  }
  /* count tunnels the proxy closed while we held them */
  long alive = 0, dropped = 0;
  for (long i = 0; i < n; i++) {
    struct conn *c = &conns[i];
    if (c->state != S_IDLE) continue;
    char b[64];
    ssize_t r = recv(c->fd, b, sizeof b, MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno != EAGAIN)) dropped++;
    else alive++;
    conn_close(c);
  }
  double u, sy;
  cpu_times(&u, &sy);
  printf("{\"mode\":\"idle\",\"count\":%ld,\"established\":%ld,\"failed\":%ld,\"alive_at_end\":%ld,\"dropped\":%ld,\"open_s\":%.3f,"
         "\"cpu_user_s\":%.3f,\"cpu_sys_s\":%.3f,",
         n, established, failed, alive, dropped, open_s, u, sy);
  print_errors();
  printf("}\n");
  return 0;
}

/* ---------- origin server ---------- */
enum { K_LISTEN_ECHO, K_LISTEN_BULK, K_LISTEN_HTTP, K_ECHO, K_BULK, K_HTTP };
struct sconn {
  int fd, kind, in_len, out_len, out_off, close_after;
  long long bulk_left, sink_left;
  char *in, *out;
};
#define SBUF 16384
static const char HTTP_RESP[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 64\r\n\r\n"
                                "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
static const char HTTP_RESP_CLOSE[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 64\r\nConnection: close\r\n\r\n"
                                      "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
static char bulk_buf[1 << 20];
static volatile sig_atomic_t stop_flag;
static void on_term(int s) { (void)s; stop_flag = 1; }

static int listen_on(const char *ip) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
  inet_pton(AF_INET, ip, &a.sin_addr);
  if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0) die("bind");
  if (listen(fd, 4096) != 0) die("listen");
  return fd;
}
static int port_of(int fd) {
  struct sockaddr_in a;
  socklen_t l = sizeof a;
  getsockname(fd, (struct sockaddr *)&a, &l);
  return ntohs(a.sin_port);
}
static void sfree(struct sconn *c) {
  close(c->fd);
  free(c->in);
  free(c->out);
  free(c);
}
static void smod(struct sconn *c, uint32_t events) {
  struct epoll_event ev = {.events = events, .data.ptr = c};
  epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}
/* Flush pending output. 1 = all written, 0 = would block, -1 = error. */
static int sflush(struct sconn *c) {
  while (c->out_off < c->out_len) {
    ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
    if (w < 0) return errno == EAGAIN ? 0 : -1;
    c->out_off += w;
  }
  c->out_off = c->out_len = 0;
  return 1;
}
/* Bulk: send until done or would block. 1 = done, 0 = would block, -1 = error. */
static int sbulk(struct sconn *c) {
  while (c->bulk_left > 0) {
    size_t n = c->bulk_left < (long long)sizeof bulk_buf ? (size_t)c->bulk_left : sizeof bulk_buf;
    ssize_t w = send(c->fd, bulk_buf, n, MSG_NOSIGNAL);
    if (w < 0) return errno == EAGAIN ? 0 : -1;
    c->bulk_left -= w;
  }
  return 1;
}
/* An upload is all in: answer "ok\n", then close. 1 = close now, 0 = wait for the answer to be written. */
static int sink_done(struct sconn *c) {
  c->sink_left = 0;
  memcpy(c->out, "ok\n", 3);
  c->out_len = 3;
  c->out_off = 0;
  c->close_after = 1;
  int f = sflush(c);
  if (f != 0) return 1;
  smod(c, EPOLLOUT | EPOLLRDHUP);
  return 0;
}
/* Handle every complete request in c->in. */
static void shttp_requests(struct sconn *c) {
  for (;;) {
    char *end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
    if (!end) return;
    int hl = (int)(end - c->in) + 4;
    long body = 0;
    char *le = memmem(c->in, hl, "\r\n", 2);
    int close_it = le && le - c->in >= 8 && memcmp(le - 8, "HTTP/1.0", 8) == 0;
    for (char *p = c->in; p < c->in + hl;) {
      char *e = memmem(p, c->in + hl - p, "\r\n", 2);
      if (!e) break;
      if (strncasecmp(p, "content-length:", 15) == 0) body = atol(p + 15);
      else if (strncasecmp(p, "connection:", 11) == 0) {
        if (memmem(p, e - p, "close", 5)) close_it = 1;
        else if (memmem(p, e - p, "eep-alive", 9)) close_it = 0;
      } else if (strncasecmp(p, "proxy-connection:", 17) == 0 && memmem(p, e - p, "eep-alive", 9)) close_it = 0;
      p = e + 2;
    }
    if (c->in_len < hl + body) return;
    const char *resp = close_it ? HTTP_RESP_CLOSE : HTTP_RESP;
    int rl = close_it ? (int)sizeof HTTP_RESP_CLOSE - 1 : (int)sizeof HTTP_RESP - 1;
    if (c->out_len + rl > SBUF) { c->close_after = 1; return; }
    memcpy(c->out + c->out_len, resp, rl);
    c->out_len += rl;
    memmove(c->in, c->in + hl + body, c->in_len - hl - body);
    c->in_len -= hl + body;
    if (close_it) { c->close_after = 1; c->in_len = 0; return; }
  }
}

static int run_server(void) {
  signal(SIGTERM, on_term);
  signal(SIGINT, on_term);
  signal(SIGPIPE, SIG_IGN);
  memset(bulk_buf, 'b', sizeof bulk_buf);
  ep = epoll_create1(EPOLL_CLOEXEC);
  int lf[3];
  for (int k = 0; k < 3; k++) {
    lf[k] = listen_on(O.bind);
    struct sconn *l = calloc(1, sizeof *l);
    l->fd = lf[k];
    l->kind = k;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = l};
    epoll_ctl(ep, EPOLL_CTL_ADD, lf[k], &ev);
  }
  struct epoll_event sev = {.events = EPOLLIN, .data.ptr = NULL}; /* stdin: EOF means stop */
  epoll_ctl(ep, EPOLL_CTL_ADD, 0, &sev);
  printf("{\"echo\":%d,\"bulk\":%d,\"http\":%d}\n", port_of(lf[0]), port_of(lf[1]), port_of(lf[2]));
  fflush(stdout);
  double t_end = now_s() + O.max_seconds;
  struct epoll_event evs[256];
  static char rbuf[1 << 16];
  while (!stop_flag && now_s() < t_end) {
    int k = epoll_wait(ep, evs, 256, 500);
    for (int j = 0; j < k; j++) {
      struct sconn *c = evs[j].data.ptr;
      if (!c) {
        ssize_t r = read(0, rbuf, sizeof rbuf);
        if (r <= 0) stop_flag = 1;
        continue;
      }
      if (c->kind <= K_LISTEN_HTTP) {
        for (int a = 0; a < 64; a++) {
          int fd = accept4(c->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (fd < 0) break;
          int one = 1;
          setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          struct sconn *n = calloc(1, sizeof *n);
          n->fd = fd;
          n->kind = c->kind + 3;
          n->in = malloc(SBUF);
          n->out = malloc(SBUF);
          struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = n};
          epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
        }
        continue;
      }
      uint32_t e = evs[j].events;
      int dead = 0;
      if (e & EPOLLOUT) {
        int r = c->kind == K_BULK && c->bulk_left > 0 ? sbulk(c) : sflush(c);
        if (r < 0) dead = 1;
        else if (r == 1) {
          if (c->kind == K_BULK) dead = 1; /* all sent: close (FIN after the queued bytes) */
          else if (c->close_after) dead = 1;
          else smod(c, EPOLLIN | EPOLLRDHUP);
        }
      }
      if (!dead && (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
        if (c->out_len > 0 || (c->kind == K_BULK && c->bulk_left > 0)) {
          /* still writing: read nothing more yet, but notice a hang-up */
          if (e & (EPOLLHUP | EPOLLERR)) dead = 1;
        } else if (c->kind == K_BULK && c->sink_left > 0) {
          /* an upload: count what arrives, answer once it is all there */
          ssize_t r = recv(c->fd, rbuf, sizeof rbuf, 0);
          if (r == 0 || (r < 0 && errno != EAGAIN)) dead = 1;
          else if (r > 0 && (c->sink_left -= r) <= 0) dead = sink_done(c);
        } else {
          ssize_t r = recv(c->fd, c->kind == K_ECHO ? c->out : c->in + c->in_len,
                           c->kind == K_ECHO ? SBUF : SBUF - c->in_len, 0);
          if (r == 0 || (r < 0 && errno != EAGAIN)) dead = 1;
          else if (r > 0) {
            if (c->kind == K_ECHO) {
              c->out_len = (int)r;
              c->out_off = 0;
              int f = sflush(c);
              if (f < 0) dead = 1;
              else if (f == 0) smod(c, EPOLLOUT | EPOLLRDHUP);
            } else if (c->kind == K_BULK) {
              c->in_len += r;
              char *nl = memchr(c->in, '\n', c->in_len);
              if (nl && c->in[0] == 'U') {
                c->sink_left = atoll(c->in + 1) - (c->in_len - (nl + 1 - c->in));
                c->in_len = 0;
                if (c->sink_left <= 0) dead = sink_done(c);
              } else if (nl) {
                c->bulk_left = atoll(c->in);
                int f = sbulk(c);
                if (f < 0 || f == 1) dead = 1;
                else smod(c, EPOLLOUT | EPOLLRDHUP);
              } else if (c->in_len >= SBUF) dead = 1;
            } else {
              c->in_len += r;
              shttp_requests(c);
              if (c->in_len >= SBUF) dead = 1;
              else {
                int f = sflush(c);
                if (f < 0) dead = 1;
                else if (f == 0) smod(c, EPOLLOUT | EPOLLRDHUP);
                else if (c->close_after) dead = 1;
              }
            }
          }
        }
      }
      if (dead) sfree(c);
    }
  }
  return 0;
}

/* ---------- main ---------- */
int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: loadgen server|latency|rate|bulk|http|idle [options]\n");
    return 2;
  }
  O.mode = argv[1];
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define OPT(name) (strcmp(a, name) == 0 && v && (i++, 1))
    if (OPT("--target")) O.target = v;
    else if (OPT("--connect")) O.connect = v;
    else if (OPT("--host")) O.host = v;
    else if (OPT("--auth")) O.auth = v;
    else if (OPT("--bind")) O.bind = v;
    else if (OPT("--size")) O.size = atoi(v);
    else if (OPT("--concurrency")) O.concurrency = atoi(v);
    else if (OPT("--parallel")) O.parallel = atoi(v);
    else if (OPT("--max")) O.max = atoi(v);
    else if (OPT("--bytes")) O.bytes = atoll(v);
    else if (OPT("--count")) O.count = atoll(v);
    else if (OPT("--duration")) O.duration = atof(v);
    else if (OPT("--hold-max")) O.hold_max = atof(v);
    else if (OPT("--max-seconds")) O.max_seconds = atof(v);
    else if (strcmp(a, "--absolute") == 0) O.absolute = 1;
    else if (strcmp(a, "--up") == 0) O.up = 1;
    else { fprintf(stderr, "loadgen: unknown option %s\n", a); return 2; }
  }
  if (O.size < 1 || O.size > (int)sizeof payload) O.size = 32;
  if (O.concurrency < 1) O.concurrency = 1;
  if (O.parallel < 1) O.parallel = 1;
  if (O.duration > 600) O.duration = 600;
  if (O.hold_max > 600) O.hold_max = 600;
  signal(SIGPIPE, SIG_IGN);
  raise_nofile();
  if (strcmp(O.mode, "server") == 0) return run_server();
  if (!O.target) { fprintf(stderr, "loadgen: --target is required\n"); return 2; }
  parse_target(O.target);
  build_connect();
  if (strcmp(O.mode, "latency") == 0) return run_latency();
  if (strcmp(O.mode, "rate") == 0) return run_rate();
  if (strcmp(O.mode, "bulk") == 0) return run_bulk();
  if (strcmp(O.mode, "http") == 0) return run_http();
  if (strcmp(O.mode, "idle") == 0) {
    if (!O.connect) { fprintf(stderr, "loadgen: idle needs --connect\n"); return 2; }
    return run_idle();
  }
  fprintf(stderr, "loadgen: unknown mode %s\n", O.mode);
  return 2;
}
