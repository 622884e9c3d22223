// SPDX-License-Identifier: MIT
/*
 * The stacks file writer (format: docs/stacks.md). Records are packed with msgpack-c into one
 * buffer; each time it passes FRAME_BYTES it is compressed as one independent zstd frame and
 * written, so a run cut short (memtrack killed) leaves every earlier frame readable. Modules and
 * stacks are interned in open-addressing tables of ids; the per-allocation call
 * (stackfile_writer__alloc) only appends a u32 to the pending `allocs` chunk.
 *
 * Order: a stack is packed when first seen, while the allocation ids that name it are still in
 * the pending chunk, so every record precedes the records that refer to it.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <msgpack.h>
#include <zstd.h>
#include "stacks/stackfile.h"
#include "stacks/stackfile_priv.h"

#define FRAME_BYTES  (256u << 10) /* msgpack bytes per zstd frame */
#define ALLOCS_CHUNK 16384	  /* ids per `allocs` record (64 KiB) */
#define ZSTD_LEVEL   3

struct wmodule {
	uint64_t hash;
	char *path;
	uint8_t build_id[20];
	uint8_t build_id_len;
};

struct wstack {
	uint64_t hash;
	uint64_t off; /* into the frame pool */
	uint32_t nr;
	bool truncated;
};

/* Ids (1-based) in slots; 0 = empty. Capacity a power of two, at most half full. */
struct idtab {
	uint32_t *slots;
	size_t cap;
};

struct stackfile_writer {
	int fd;
	int err; /* sticky: first failure */
	ZSTD_CCtx *cctx;
	void *zout;
	size_t zout_cap;
	msgpack_sbuffer sb;
	msgpack_packer pk;
	struct wmodule *mods;
	uint32_t nr_mods, cap_mods;
	struct idtab mod_tab;
	struct wstack *stacks;
	uint32_t nr_stacks, cap_stacks;
	struct idtab stack_tab;
	struct stack_frame *pool;
	uint64_t pool_nr, pool_cap;
	uint64_t nr_allocs;
	uint32_t nr_ids;
	uint32_t ids[ALLOCS_CHUNK];
};

/* FNV-1a, 64-bit: over a few hundred bytes per new stack, never on the per-allocation path. */
static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

#define HASH_SEED 0xcbf29ce484222325ull

static int grow32(void **p, uint32_t *cap, uint64_t need, size_t elem)
{
	uint64_t c = *cap;
	int rc;

	if (need > UINT32_MAX)
		return -EOVERFLOW;
	rc = stackfile__grow(p, &c, need, elem);
	*cap = (uint32_t)c;
	return rc;
}

typedef uint64_t (*idtab_hash_fn)(const struct stackfile_writer *w, uint32_t id);
/* Does id hold key (whose hash is h)? */
typedef bool (*idtab_same_fn)(const struct stackfile_writer *w, uint32_t id, uint64_t h,
			      const void *key);

/* Room for one more id (at most half full): re-inserts the nr ids into a table twice as large. */
static int idtab_reserve(struct idtab *t, uint32_t nr, idtab_hash_fn hash_of,
			 const struct stackfile_writer *w)
{
	size_t ncap = t->cap ? t->cap * 2 : 64;
	uint32_t *slots;

	if ((uint64_t)(nr + 1) * 2 <= t->cap)
		return 0;
	slots = calloc(ncap, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (uint32_t id = 1; id <= nr; id++) {
		size_t i = hash_of(w, id) & (ncap - 1);

		while (slots[i])
			i = (i + 1) & (ncap - 1);
		slots[i] = id;
	}
	free(t->slots);
	t->slots = slots;
	t->cap = ncap;
	return 0;
}

/* The id holding key, or 0 and in *slot where a new one goes (after idtab_reserve). */
static uint32_t idtab_find(const struct idtab *t, uint64_t h, idtab_same_fn same,
			   const struct stackfile_writer *w, const void *key, size_t *slot)
{
	size_t i = h & (t->cap - 1);

	for (; t->slots[i]; i = (i + 1) & (t->cap - 1))
		if (same(w, t->slots[i], h, key))
			return t->slots[i];
	*slot = i;
	return 0;
}

/* --- output ----------------------------------------------------------------------------------- */

static int write_all(int fd, const void *buf, size_t n)
{
	const uint8_t *p = buf;

	while (n) {
		ssize_t k = write(fd, p, n);

		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Compresses the packed records as one frame and writes it. */
static int flush_frame(struct stackfile_writer *w)
{
	ZSTD_inBuffer in = {w->sb.data, w->sb.size, 0};
	size_t ret;
	int rc;

	if (w->err || !w->sb.size)
		return w->err;
	do {
		ZSTD_outBuffer out = {w->zout, w->zout_cap, 0};

		ret = ZSTD_compressStream2(w->cctx, &out, &in, ZSTD_e_end);
		if (ZSTD_isError(ret))
			return w->err = -EIO;
		rc = write_all(w->fd, w->zout, out.pos);
		if (rc)
			return w->err = rc;
	} while (ret);
	msgpack_sbuffer_clear(&w->sb);
	return 0;
}

static int record_done(struct stackfile_writer *w)
{
	return w->sb.size >= FRAME_BYTES ? flush_frame(w) : w->err;
}

static void pack_str(msgpack_packer *pk, const char *s)
{
	size_t n = strlen(s);

	msgpack_pack_str(pk, n);
	msgpack_pack_str_body(pk, s, n);
}

/* A map of n keys whose first is "t": kind. */
static void pack_record(msgpack_packer *pk, const char *kind, size_t n)
{
	msgpack_pack_map(pk, n);
	pack_str(pk, "t");
	pack_str(pk, kind);
}

static int flush_allocs(struct stackfile_writer *w)
{
	msgpack_packer *pk = &w->pk;

	if (!w->nr_ids)
		return w->err;
	for (uint32_t i = 0; i < w->nr_ids; i++)
		w->ids[i] = htole32(w->ids[i]);
	pack_record(pk, "allocs", 2);
	pack_str(pk, "ids");
	msgpack_pack_bin(pk, (size_t)w->nr_ids * 4);
	msgpack_pack_bin_body(pk, w->ids, (size_t)w->nr_ids * 4);
	w->nr_ids = 0;
	return record_done(w);
}

/* --- the API ---------------------------------------------------------------------------------- */

int stackfile_writer__open(struct stackfile_writer **wp, int fd, const char *artifact_name,
			   const char *unwinder)
{
	struct stackfile_writer *w;
	msgpack_packer *pk;

	if (!wp || fd < 0 || !artifact_name || !unwinder)
		return -EINVAL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->fd = fd;
	w->cctx = ZSTD_createCCtx();
	w->zout_cap = ZSTD_CStreamOutSize();
	w->zout = malloc(w->zout_cap);
	msgpack_sbuffer_init(&w->sb);
	msgpack_packer_init(&w->pk, &w->sb, msgpack_sbuffer_write);
	if (!w->cctx || !w->zout ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_compressionLevel, ZSTD_LEVEL))) {
		w->fd = -1; /* not taken over on failure */
		stackfile_writer__close(w);
		return -ENOMEM;
	}
	pk = &w->pk;
	pack_record(pk, "header", 5);
	pack_str(pk, "format");
	pack_str(pk, "memtrack-stacks");
	pack_str(pk, "version");
	msgpack_pack_uint32(pk, STACKFILE_VERSION);
	pack_str(pk, "artifact");
	pack_str(pk, artifact_name);
	pack_str(pk, "unwinder");
	pack_str(pk, unwinder);
	*wp = w;
	return 0;
}

static uint64_t module_hash(const char *path, const uint8_t *bid, size_t len)
{
	return hash_bytes(hash_bytes(HASH_SEED, path, strlen(path) + 1), bid, len);
}

static uint64_t module_hash_of(const struct stackfile_writer *w, uint32_t id)
{
	return w->mods[id - 1].hash;
}

struct module_key {
	const char *path;
	const uint8_t *build_id;
	size_t build_id_len;
};

static bool module_same(const struct stackfile_writer *w, uint32_t id, uint64_t h, const void *key)
{
	const struct wmodule *m = &w->mods[id - 1];
	const struct module_key *k = key;

	return m->hash == h && m->build_id_len == k->build_id_len && !strcmp(m->path, k->path) &&
	       !memcmp(m->build_id, k->build_id, k->build_id_len);
}

int stackfile_writer__module(struct stackfile_writer *w, const char *path, const uint8_t *build_id,
			     size_t build_id_len, uint32_t *id)
{
	struct module_key k = {path, build_id, build_id_len};
	struct wmodule *m;
	uint64_t h;
	size_t slot;
	int rc;

	if (!w || !path || !id || (build_id_len && !build_id))
		return -EINVAL;
	if (w->err)
		return w->err;
	/* Longer (non-GNU) ids do not fit the format: the path alone identifies the module. */
	if (build_id_len > sizeof(m->build_id))
		k.build_id_len = build_id_len = 0;
	h = module_hash(path, build_id, build_id_len);
	rc = idtab_reserve(&w->mod_tab, w->nr_mods, module_hash_of, w);
	if (!rc)
		rc = grow32((void **)&w->mods, &w->cap_mods, w->nr_mods + 1ull, sizeof(*w->mods));
	if (rc)
		return w->err = rc;
	*id = idtab_find(&w->mod_tab, h, module_same, w, &k, &slot);
	if (*id)
		return 0;
	m = &w->mods[w->nr_mods];
	memset(m, 0, sizeof(*m));
	m->path = strdup(path);
	if (!m->path)
		return w->err = -ENOMEM;
	m->hash = h;
	m->build_id_len = (uint8_t)build_id_len;
	if (build_id_len)
		memcpy(m->build_id, build_id, build_id_len);
	*id = w->mod_tab.slots[slot] = ++w->nr_mods;

	pack_record(&w->pk, "module", 4);
	pack_str(&w->pk, "id");
	msgpack_pack_uint32(&w->pk, *id);
	pack_str(&w->pk, "path");
	pack_str(&w->pk, path);
	pack_str(&w->pk, "build_id");
	msgpack_pack_bin(&w->pk, build_id_len);
	msgpack_pack_bin_body(&w->pk, build_id, build_id_len);
	return record_done(w);
}

int stackfile_writer__load(struct stackfile_writer *w, const struct stack_load *l)
{
	if (!w || !l || !l->module || l->module > w->nr_mods)
		return -EINVAL;
	if (w->err)
		return w->err;
	pack_record(&w->pk, "load", 4);
	pack_str(&w->pk, "pid");
	msgpack_pack_int32(&w->pk, l->pid);
	pack_str(&w->pk, "module");
	msgpack_pack_uint32(&w->pk, l->module);
	pack_str(&w->pk, "bias");
	msgpack_pack_uint64(&w->pk, l->bias);
	return record_done(w);
}

static uint64_t stack_hash(const struct stack_frame *f, uint32_t nr, bool truncated)
{
	uint64_t h = hash_bytes(HASH_SEED, &truncated, 1);

	for (uint32_t i = 0; i < nr; i++) {
		h = hash_bytes(h, &f[i].module, sizeof(f[i].module));
		h = hash_bytes(h, &f[i].vaddr, sizeof(f[i].vaddr));
	}
	return h;
}

static uint64_t stack_hash_of(const struct stackfile_writer *w, uint32_t id)
{
	return w->stacks[id - 1].hash;
}

struct stack_key {
	const struct stack_frame *frames;
	uint32_t nr;
	bool truncated;
};

static bool stack_same(const struct stackfile_writer *w, uint32_t id, uint64_t h, const void *key)
{
	const struct wstack *s = &w->stacks[id - 1];
	const struct stack_key *k = key;

	if (s->hash != h || s->nr != k->nr || s->truncated != k->truncated)
		return false;
	for (uint32_t i = 0; i < k->nr; i++)
		if (w->pool[s->off + i].module != k->frames[i].module ||
		    w->pool[s->off + i].vaddr != k->frames[i].vaddr)
			return false;
	return true;
}

int stackfile_writer__stack(struct stackfile_writer *w, const struct stack_frame *frames,
			    uint32_t nr, bool truncated, uint32_t *id)
{
	struct stack_key k = {frames, nr, truncated};
	uint64_t h;
	size_t slot;
	int rc;

	if (!w || !id || (nr && !frames) || nr > STACKFILE_MAX_FRAMES)
		return -EINVAL;
	for (uint32_t i = 0; i < nr; i++)
		if (frames[i].module > w->nr_mods)
			return -EINVAL;
	if (w->err)
		return w->err;
	h = stack_hash(frames, nr, truncated);
	rc = idtab_reserve(&w->stack_tab, w->nr_stacks, stack_hash_of, w);
	if (!rc)
		rc = grow32((void **)&w->stacks, &w->cap_stacks, w->nr_stacks + 1ull,
			    sizeof(*w->stacks));
	if (!rc)
		rc = stackfile__grow((void **)&w->pool, &w->pool_cap, w->pool_nr + nr,
				     sizeof(*w->pool));
	if (rc)
		return w->err = rc;
	*id = idtab_find(&w->stack_tab, h, stack_same, w, &k, &slot);
	if (*id)
		return 0;
	w->stacks[w->nr_stacks] =
	    (struct wstack){.hash = h, .off = w->pool_nr, .nr = nr, .truncated = truncated};
	if (nr)
		memcpy(&w->pool[w->pool_nr], frames, nr * sizeof(*frames));
	w->pool_nr += nr;
	*id = w->stack_tab.slots[slot] = ++w->nr_stacks;

	pack_record(&w->pk, "stack", truncated ? 4 : 3);
	pack_str(&w->pk, "id");
	msgpack_pack_uint32(&w->pk, *id);
	pack_str(&w->pk, "frames");
	msgpack_pack_array(&w->pk, (size_t)nr * 2);
	for (uint32_t i = 0; i < nr; i++) {
		msgpack_pack_uint32(&w->pk, frames[i].module);
		msgpack_pack_uint64(&w->pk, frames[i].vaddr);
	}
	if (truncated) {
		pack_str(&w->pk, "truncated");
		msgpack_pack_true(&w->pk);
	}
	return record_done(w);
}

int stackfile_writer__alloc(struct stackfile_writer *w, uint32_t stack_id)
{
	if (w->err)
		return w->err;
	if (stack_id > w->nr_stacks)
		return -EINVAL;
	w->ids[w->nr_ids++] = stack_id;
	w->nr_allocs++;
	return w->nr_ids == ALLOCS_CHUNK ? flush_allocs(w) : 0;
}

int stackfile_writer__close(struct stackfile_writer *w)
{
	int rc;

	if (!w)
		return 0;
	if (w->fd >= 0) {
		flush_allocs(w);
		/* the trailer: a file without it was cut short */
		pack_record(&w->pk, "end", 4);
		pack_str(&w->pk, "modules");
		msgpack_pack_uint32(&w->pk, w->nr_mods);
		pack_str(&w->pk, "stacks");
		msgpack_pack_uint32(&w->pk, w->nr_stacks);
		pack_str(&w->pk, "allocs");
		msgpack_pack_uint64(&w->pk, w->nr_allocs);
		flush_frame(w);
		if (close(w->fd) && !w->err)
			w->err = -errno;
	}
	rc = w->err;
	for (uint32_t i = 0; i < w->nr_mods; i++)
		free(w->mods[i].path);
	free(w->mods);
	free(w->mod_tab.slots);
	free(w->stacks);
	free(w->stack_tab.slots);
	free(w->pool);
	msgpack_sbuffer_destroy(&w->sb);
	free(w->zout);
	ZSTD_freeCCtx(w->cctx);
	free(w);
	return rc;
}
