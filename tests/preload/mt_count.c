// SPDX-License-Identifier: MIT
/*
 * An independent count of allocator calls, to check memtrack against on real programs:
 * LD_PRELOAD=build/tests/libmt_count.so CMD. It sees exactly what an interposer sees: calls
 * that go through symbol lookup (PLT/GOT, dlsym), not a library's direct calls to itself.
 * At the exit of each process image it appends one line to $MT_COUNT_FILE (stderr if unset):
 *
 *	pid PID malloc N calloc N realloc N aligned N free N
 *
 * counted the way memtrack types its events: only the outermost call of a thread (operator new
 * -> malloc is one Malloc); realloc(p, 0) returning NULL is a Free, a failed call nothing,
 * free(NULL) nothing; realloc(NULL, n) a Realloc; valloc, memalign, aligned_alloc,
 * posix_memalign and aligned operator new are aligned. Calls made before the wrapper's symbols
 * are resolved (dlsym's own) are served from a static buffer and not counted.
 * Written by hand with write(2): no stdio, which would allocate while counting.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { C_MALLOC, C_CALLOC, C_REALLOC, C_ALIGNED, C_FREE, C_NR };

static uint64_t counts[C_NR];
static __thread unsigned depth;

static void *(*r_malloc)(size_t);
static void *(*r_calloc)(size_t, size_t);
static void *(*r_realloc)(void *, size_t);
static void (*r_free)(void *);
static void *(*r_memalign)(size_t, size_t);
static void *(*r_aligned_alloc)(size_t, size_t);
static int (*r_posix_memalign)(void **, size_t, size_t);
static void *(*r_valloc)(size_t);
static void *(*r_pvalloc)(size_t);

/* dlsym may calloc before the real functions are known: bump-allocated, never freed */
static char boot[8192] __attribute__((aligned(16)));
static size_t boot_used;
static int resolving;

static void *boot_alloc(size_t n)
{
	void *p;

	n = (n + 15) & ~(size_t)15;
	if (boot_used + n > sizeof(boot))
		return NULL;
	p = boot + boot_used;
	boot_used += n;
	return p;
}

static int is_boot(void *p)
{
	return (char *)p >= boot && (char *)p < boot + sizeof(boot);
}

static void resolve(void)
{
	if (r_free || resolving)
		return;
	resolving = 1;
	r_malloc = dlsym(RTLD_NEXT, "malloc");
	r_calloc = dlsym(RTLD_NEXT, "calloc");
	r_realloc = dlsym(RTLD_NEXT, "realloc");
	r_memalign = dlsym(RTLD_NEXT, "memalign");
	r_aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
	r_posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
	r_valloc = dlsym(RTLD_NEXT, "valloc");
	r_pvalloc = dlsym(RTLD_NEXT, "pvalloc");
	r_free = dlsym(RTLD_NEXT, "free");
	resolving = 0;
}

static void count(int what, int ok)
{
	if (ok && depth == 1)
		__atomic_fetch_add(&counts[what], 1, __ATOMIC_RELAXED);
}

void *malloc(size_t n)
{
	void *p;

	resolve();
	if (!r_malloc)
		return boot_alloc(n);
	depth++;
	p = r_malloc(n);
	count(C_MALLOC, p != NULL);
	depth--;
	return p;
}

void *calloc(size_t m, size_t n)
{
	void *p;

	resolve();
	if (!r_calloc)
		return boot_alloc(m * n); /* static: zeroed */
	depth++;
	p = r_calloc(m, n);
	count(C_CALLOC, p != NULL);
	depth--;
	return p;
}

void *realloc(void *old, size_t n)
{
	void *p;

	resolve();
	if (is_boot(old)) {
		p = malloc(n);
		if (p)
			memcpy(p, old, n < (size_t)(boot + sizeof(boot) - (char *)old) ? n : 0);
		return p;
	}
	depth++;
	p = r_realloc(old, n);
	if (p)
		count(C_REALLOC, 1);
	else if (old && n == 0)
		count(C_FREE, 1);
	depth--;
	return p;
}

void *reallocarray(void *old, size_t m, size_t n)
{
	size_t t;

	if (__builtin_mul_overflow(m, n, &t))
		return NULL;
	return realloc(old, t);
}

void free(void *p)
{
	resolve();
	if (!p || is_boot(p))
		return;
	depth++;
	count(C_FREE, 1);
	r_free(p);
	depth--;
}

void cfree(void *p)
{
	free(p);
}

#define ALIGNED(call)                                                                              \
	do {                                                                                       \
		resolve();                                                                         \
		depth++;                                                                           \
		p = call;                                                                          \
		count(C_ALIGNED, p != NULL);                                                       \
		depth--;                                                                           \
	} while (0)

void *memalign(size_t a, size_t n)
{
	void *p;

	ALIGNED(r_memalign(a, n));
	return p;
}

void *aligned_alloc(size_t a, size_t n)
{
	void *p;

	ALIGNED(r_aligned_alloc(a, n));
	return p;
}

void *valloc(size_t n)
{
	void *p;

	ALIGNED(r_valloc(n));
	return p;
}

void *pvalloc(size_t n)
{
	void *p;

	ALIGNED(r_pvalloc(n));
	return p;
}

int posix_memalign(void **out, size_t a, size_t n)
{
	int rc;

	resolve();
	depth++;
	rc = r_posix_memalign(out, a, n);
	count(C_ALIGNED, rc == 0);
	depth--;
	return rc;
}

/* C++: the replaceable operators, forwarded to malloc/free (what libstdc++'s do), counted as
 * the outermost call. Aligned and nothrow forms are rare in the programs checked. */
void *_Znwm(size_t n)
{
	void *p;

	depth++;
	p = malloc(n ? n : 1); /* nested: not counted there */
	count(C_MALLOC, p != NULL);
	depth--;
	if (!p)
		abort(); /* no exceptions from C: a checker, not a runtime */
	return p;
}

void *_Znam(size_t n) __attribute__((alias("_Znwm")));

void _ZdlPv(void *p)
{
	if (!p)
		return;
	depth++;
	count(C_FREE, 1);
	free(p);
	depth--;
}

void _ZdaPv(void *p) __attribute__((alias("_ZdlPv")));

void _ZdlPvm(void *p, size_t n)
{
	(void)n;
	_ZdlPv(p);
}

void _ZdaPvm(void *p, size_t n) __attribute__((alias("_ZdlPvm")));

static char *put_u64(char *s, uint64_t v)
{
	char tmp[24];
	int n = 0;

	do
		tmp[n++] = (char)('0' + v % 10);
	while (v /= 10);
	while (n)
		*s++ = tmp[--n];
	return s;
}

static char *put_str(char *s, const char *t)
{
	while (*t)
		*s++ = *t++;
	return s;
}

/* A forked child starts from zero: its parent's calls are the parent's. */
static void mt_count_child(void)
{
	for (int i = 0; i < C_NR; i++)
		counts[i] = 0;
}

__attribute__((constructor)) static void mt_count_init(void)
{
	resolve();
	pthread_atfork(NULL, NULL, mt_count_child);
}

__attribute__((destructor(101))) static void mt_count_report(void)
{
	static const char *const names[C_NR] = {" malloc ", " calloc ", " realloc ", " aligned ",
						" free "};
	const char *path = getenv("MT_COUNT_FILE");
	char line[256], *s = line;
	int fd = 2;

	s = put_str(s, "pid ");
	s = put_u64(s, (uint64_t)getpid());
	for (int i = 0; i < C_NR; i++) {
		s = put_str(s, names[i]);
		s = put_u64(s, __atomic_load_n(&counts[i], __ATOMIC_RELAXED));
	}
	*s++ = '\n';
	if (path && *path)
		fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd >= 0)
		(void)!write(fd, line, (size_t)(s - line));
	if (fd > 2)
		close(fd);
}
