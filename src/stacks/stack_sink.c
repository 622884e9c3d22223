// SPDX-License-Identifier: MIT
/*
 * The stack sink: the stackfile writer plus what the sources need around it (loads written
 * once per process and mapping, counts for the manifest). See stack_sink.h for the contract.
 */
#include <errno.h>
#include <stdlib.h>
#include "stacks/stack_sink.h"

struct load_key {
	uint64_t bias;
	int32_t pid;
	uint32_t module; /* 0: empty slot */
};

struct stack_sink {
	struct stackfile_writer *w;
	struct load_key *loads; /* open addressing, at most half full */
	size_t cap_loads, nr_loads;
	struct stack_sink_stats st;
	int err;
};

int stack_sink__open(struct stack_sink **sp, int fd, const char *artifact_name,
		     const char *unwinder)
{
	struct stack_sink *s;
	int rc;

	if (!sp)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	rc = stackfile_writer__open(&s->w, fd, artifact_name, unwinder);
	if (rc) {
		free(s);
		return rc;
	}
	*sp = s;
	return 0;
}

static size_t load_slot(const struct load_key *t, size_t cap, const struct load_key *k)
{
	uint64_t h =
	    (k->bias ^ ((uint64_t)(uint32_t)k->pid << 32) ^ k->module) * 0x9e3779b97f4a7c15ull;
	size_t i = (size_t)(h >> 32) & (cap - 1);

	while (t[i].module &&
	       (t[i].module != k->module || t[i].pid != k->pid || t[i].bias != k->bias))
		i = (i + 1) & (cap - 1);
	return i;
}

/* 1 when (pid, module, bias) is new (and now known), 0 when seen, -errno. */
static int load_add(struct stack_sink *s, const struct load_key *k)
{
	size_t i;

	if ((s->nr_loads + 1) * 2 > s->cap_loads) {
		size_t ncap = s->cap_loads ? s->cap_loads * 2 : 256;
		struct load_key *t = calloc(ncap, sizeof(*t));

		if (!t)
			return -ENOMEM;
		for (size_t j = 0; j < s->cap_loads; j++)
			if (s->loads[j].module)
				t[load_slot(t, ncap, &s->loads[j])] = s->loads[j];
		free(s->loads);
		s->loads = t;
		s->cap_loads = ncap;
	}
	i = load_slot(s->loads, s->cap_loads, k);
	if (s->loads[i].module)
		return 0;
	s->loads[i] = *k;
	s->nr_loads++;
	return 1;
}

int stack_sink__module(struct stack_sink *s, int32_t pid, const char *path, const uint8_t *build_id,
		       size_t build_id_len, uint64_t bias, uint32_t *id)
{
	struct load_key k = {.bias = bias, .pid = pid};
	int rc;

	if (!s)
		return -EINVAL;
	rc = stackfile_writer__module(s->w, path, build_id, build_id_len, id);
	if (rc)
		return rc;
	k.module = *id;
	s->st.modules = *id > s->st.modules ? *id : s->st.modules;
	if (bias == STACK_SINK_NO_BIAS)
		return 0;
	rc = load_add(s, &k);
	if (rc <= 0)
		return rc;
	return stackfile_writer__load(s->w, &(struct stack_load){pid, *id, bias});
}

int stack_sink__stack(struct stack_sink *s, const struct stack_frame *frames, uint32_t nr,
		      bool truncated, uint32_t *id)
{
	int rc;

	if (!s)
		return -EINVAL;
	rc = stackfile_writer__stack(s->w, frames, nr, truncated, id);
	if (!rc && *id > s->st.stacks)
		s->st.stacks = *id;
	return rc;
}

int stack_sink__alloc(struct stack_sink *s, uint32_t stack_id)
{
	int rc;

	s->st.allocs++;
	/* an id the sink never gave (a source's bug) is stored as "no stack", and counted */
	if (stack_id > s->st.stacks)
		stack_id = 0;
	s->st.with_stack += stack_id != 0;
	rc = stackfile_writer__alloc(s->w, stack_id);
	if (rc && !s->err)
		s->err = rc;
	return rc;
}

void stack_sink__stats(const struct stack_sink *s, struct stack_sink_stats *st)
{
	*st = s->st;
}

int stack_sink__close(struct stack_sink *s)
{
	int rc;

	if (!s)
		return 0;
	rc = stackfile_writer__close(s->w);
	if (!rc)
		rc = s->err;
	free(s->loads);
	free(s);
	return rc;
}
