// SPDX-License-Identifier: MIT
/*
 * The preload path's stack area, memtrack's side (src/track/stack_shm.c, ABI
 * src/preload/stack_abi.h): entries written here as the interposer writes them are turned into
 * stack-file ids once each; refs that name no well-formed entry give 0 and are counted, never
 * read out of bounds.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include "preload/stack_abi.h"
#include "stacks/stack_sink.h"
#include "track/stack_shm.h"
#include "../lib/mt_tmpdir.h"

static char tmpdir[64];

/* Appends an entry of len bytes to the area as the interposer does; returns its ref. */
static uint32_t take(struct mt_stk_hdr *h, uint32_t len, void **e)
{
	uint64_t off = h->used;

	h->used += len;
	*e = (char *)h + h->data_off + off;
	return (uint32_t)(off / 8 + 1);
}

static uint32_t add_module(struct mt_stk_hdr *h, const char *path)
{
	uint32_t len = (uint32_t)((sizeof(struct mt_stk_module) + strlen(path) + 1 + 7) & ~7ul),
		 ref;
	struct mt_stk_module *m;

	ref = take(h, len, (void **)&m);
	m->e = (struct mt_stk_entry){.kind = MT_STK_MODULE, .len = len};
	m->pid = 42;
	m->build_id_len = 4;
	memcpy(m->build_id, "\x01\x02\x03\x04", 4);
	m->bias = 0x555500000000ull;
	strcpy(m->path, path);
	return ref;
}

static uint32_t add_stack(struct mt_stk_hdr *h, const struct mt_stk_frame *f, uint32_t nr,
			  uint32_t flags)
{
	uint32_t len = (uint32_t)(sizeof(struct mt_stk_stack) + nr * sizeof(*f)), ref;
	struct mt_stk_stack *s;

	ref = take(h, len, (void **)&s);
	s->e = (struct mt_stk_entry){.kind = MT_STK_STACK, .len = len, .nr = nr | flags};
	memcpy(s->f, f, nr * sizeof(*f));
	return ref;
}

static void test_translate(void **state)
{
	struct stack_shm *s;
	struct stack_sink *sink;
	struct stack_shm_stats st;
	struct mt_stk_hdr *h;
	struct stackfile sf;
	struct mt_event ev = {.type = MT_EV_MALLOC};
	char out[128];
	uint32_t mod, good, trunc, cut, wrong_len;
	struct stat sb;
	int fd;
	(void)state;

	assert_int_equal(stack_shm__new(&s, (uid_t)-1, (gid_t)-1), 0);
	fd = open(getenv(MT_STK_ENV), O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &sb), 0);
	h = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	assert_true(h != MAP_FAILED);
	assert_int_equal(h->magic, MT_STK_MAGIC);
	assert_int_equal(h->max_frames, MT_STK_MAX_FRAMES);

	snprintf(out, sizeof(out), "%s/1.memtrack.stacks", tmpdir);
	fd = open(out, O_WRONLY | O_CREAT | O_EXCL, 0644);
	assert_int_equal(stack_sink__open(&sink, fd, "1.MemtrackArtifact.msgpack", "preload=t"), 0);
	stack_shm__set_sink(s, sink);

	mod = add_module(h, "/usr/bin/prog");
	good = add_stack(h, (struct mt_stk_frame[]){{mod, 0, 0x1234}, {0, 0, 0x7fff0000}}, 2, 0);
	trunc = add_stack(h, (struct mt_stk_frame[]){{mod, 0, 0x1234}}, 1, MT_STK_TRUNCATED);
	/* cut at a uretprobe's trampoline (the interposer left that frame out) */
	cut = add_stack(h, (struct mt_stk_frame[]){{mod, 0, 0x4321}}, 1,
			MT_STK_TRUNCATED | MT_STK_URETPROBE);
	wrong_len = add_stack(h, (struct mt_stk_frame[]){{mod, 0, 0x1}}, 1, 0);
	((struct mt_stk_entry *)((char *)h + h->data_off + (wrong_len - 1) * 8))->nr = 2;
	h->failed = 3;
	h->full = 2;

	ev.aux = good;
	assert_int_equal(stack_shm__translate(s, &ev), 1);
	assert_int_equal(stack_shm__translate(s, &ev), 1); /* read once: the id is in the entry */
	ev.aux = trunc;
	assert_int_equal(stack_shm__translate(s, &ev), 2);
	ev.aux = cut; /* counted per allocation, the first read and the next */
	assert_int_equal(stack_shm__translate(s, &ev), 3);
	assert_int_equal(stack_shm__translate(s, &ev), 3);
	/* refs that name no stack: a module, a stack whose length lies, past the used area,
	 * between entries */
	ev.aux = mod;
	assert_int_equal(stack_shm__translate(s, &ev), 0);
	ev.aux = wrong_len;
	assert_int_equal(stack_shm__translate(s, &ev), 0);
	ev.aux = (uint32_t)(h->used / 8 + 1);
	assert_int_equal(stack_shm__translate(s, &ev), 0);
	ev.aux = 0xffffffffu;
	assert_int_equal(stack_shm__translate(s, &ev), 0);
	ev.aux = good + 1;
	assert_int_equal(stack_shm__translate(s, &ev), 0);
	/* six records without a stack, five of which the interposer explained (failed, full) */
	ev.aux = 0;
	for (int i = 0; i < 6; i++)
		assert_int_equal(stack_shm__translate(s, &ev), 0);
	stack_shm__stats(s, &st);
	assert_int_equal(st.early, 1);
	assert_int_equal(st.bad, 5);
	assert_int_equal(st.failed, 3);
	assert_int_equal(st.full, 2);
	assert_int_equal(st.used, h->used);
	assert_int_equal(st.truncated, 3);
	assert_int_equal(st.uretprobe, 2);

	for (uint32_t id = 0; id <= 3; id++)
		assert_int_equal(stack_sink__alloc(sink, id), 0);
	assert_int_equal(stack_sink__close(sink), 0);
	assert_int_equal(stackfile__read(out, &sf), 0);
	assert_int_equal(sf.nr_modules, 1);
	assert_string_equal(sf.modules[0].path, "/usr/bin/prog");
	assert_int_equal(sf.modules[0].build_id_len, 4);
	assert_int_equal(sf.nr_loads, 1);
	assert_int_equal(sf.loads[0].pid, 42);
	assert_int_equal(sf.loads[0].bias, 0x555500000000ull);
	assert_int_equal(sf.nr_stacks, 3);
	assert_int_equal(sf.stacks[0].nr, 2);
	assert_int_equal(sf.stacks[0].frames[0].module, 1);
	assert_int_equal(sf.stacks[0].frames[0].vaddr, 0x1234);
	assert_int_equal(sf.stacks[0].frames[1].module, 0);
	assert_false(sf.stacks[0].truncated);
	assert_true(sf.stacks[1].truncated);
	assert_true(sf.stacks[2].truncated);
	assert_int_equal(sf.stacks[2].nr, 1); /* the flags are not frames */
	assert_int_equal(sf.nr_allocs, 4);
	stackfile__free(&sf);
	munmap(h, (size_t)sb.st_size);
	stack_shm__free(s);
	assert_int_not_equal(access(getenv(MT_STK_ENV), F_OK), 0); /* its name is gone */
}

static int setup(void **state)
{
	(void)state;
	return mt_tmpdir_make(tmpdir, sizeof(tmpdir), "stack-shm");
}

static int teardown(void **state)
{
	(void)state;
	return mt_tmpdir_remove(tmpdir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_translate),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
