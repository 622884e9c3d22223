// SPDX-License-Identifier: MIT
/*
 * A streaming reader of the BTF format (Documentation/bpf/btf.rst), just enough to map
 * function names to type ids: one pass over the string section finds the names' offsets, one
 * pass over the type section walks every record (ids are 1-based, in file order) and keeps
 * the FUNCs with those offsets. Native byte order only (a BTF file of the running kernel).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "track/btf_scan.h"

#define BTF_MAGIC      0xeB9F
#define BTF_KIND_FUNC  12
#define SCAN_MAX_NAMES 32

struct btf_file_hdr {
	uint16_t magic;
	uint8_t version, flags;
	uint32_t hdr_len;
	uint32_t type_off, type_len; /* from the end of the header */
	uint32_t str_off, str_len;
};

/* Bytes that follow a type's 12-byte common part, by kind (vlen = number of members). */
static size_t btf_extra(uint32_t kind, uint32_t vlen)
{
	switch (kind) {
	case 1:	 /* INT */
	case 14: /* VAR */
	case 17: /* DECL_TAG */
		return 4;
	case 3: /* ARRAY */
		return 12;
	case 4:	 /* STRUCT */
	case 5:	 /* UNION */
	case 15: /* DATASEC */
	case 19: /* ENUM64 */
		return 12 * (size_t)vlen;
	case 6:	 /* ENUM */
	case 13: /* FUNC_PROTO */
		return 8 * (size_t)vlen;
	default: /* PTR, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT, FUNC, FLOAT, TYPE_TAG */
		return 0;
	}
}

/* off[i] = offset of names[i] in the string section, UINT32_MAX when absent. */
static int scan_strings(int fd, const struct btf_file_hdr *h, unsigned char *buf, size_t chunk,
			const char *const *names, int n, uint32_t *off)
{
	size_t base = (size_t)h->hdr_len + h->str_off, at = 0;

	for (int i = 0; i < n; i++)
		off[i] = UINT32_MAX;
	while (at < h->str_len) {
		size_t want = h->str_len - at < chunk ? h->str_len - at : chunk, s = 0;
		ssize_t k = pread(fd, buf, want, (off_t)(base + at));

		if (k <= 0)
			return k < 0 ? -errno : -EINVAL;
		for (;;) {
			unsigned char *z = memchr(buf + s, 0, (size_t)k - s);
			size_t e;

			if (!z)
				break;
			e = (size_t)(z - buf);
			for (int i = 0; i < n; i++)
				if (off[i] == UINT32_MAX && strlen(names[i]) == e - s &&
				    !memcmp(buf + s, names[i], e - s))
					off[i] = (uint32_t)(at + s);
			s = e + 1;
		}
		if (!s)
			return -EINVAL; /* one string longer than the buffer: not vmlinux */
		at += s; /* the unterminated tail is read again with the next chunk */
	}
	return 0;
}

static int scan_types(int fd, const struct btf_file_hdr *h, unsigned char *buf, size_t chunk,
		      const uint32_t *off, int n, int *ids)
{
	size_t base = (size_t)h->hdr_len + h->type_off, at = 0, have = 0;
	uint32_t id = 1;

	while (at < h->type_len || have) {
		size_t used = 0;

		if (at < h->type_len) {
			size_t room = chunk - have;
			size_t want = h->type_len - at < room ? h->type_len - at : room;
			ssize_t k = pread(fd, buf + have, want, (off_t)(base + at));

			if (k <= 0)
				return k < 0 ? -errno : -EINVAL;
			have += (size_t)k;
			at += (size_t)k;
		}
		for (;;) {
			uint32_t t[3], kind;
			size_t len;

			if (have - used < sizeof(t))
				break;
			memcpy(t, buf + used, sizeof(t));
			kind = (t[1] >> 24) & 0x1f;
			len = sizeof(t) + btf_extra(kind, t[1] & 0xffff);
			if (len > chunk)
				return -EINVAL;
			if (have - used < len)
				break;
			if (kind == BTF_KIND_FUNC)
				for (int i = 0; i < n; i++)
					if (t[0] == off[i])
						ids[i] = (int)id;
			id++;
			used += len;
		}
		if (!used && at >= h->type_len)
			return have ? -EINVAL : 0; /* a truncated last record */
		memmove(buf, buf + used, have - used);
		have -= used;
	}
	return 0;
}

int btf_scan__funcs_chunk(const char *path, const char *const *names, int n, int *ids, size_t chunk)
{
	uint32_t off[SCAN_MAX_NAMES];
	struct btf_file_hdr h;
	unsigned char *buf;
	int fd, err;

	if (n < 0 || n > SCAN_MAX_NAMES || chunk < 256)
		return -EINVAL;
	for (int i = 0; i < n; i++)
		ids[i] = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	buf = malloc(chunk);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) || h.magic != BTF_MAGIC ||
	    h.hdr_len < sizeof(h))
		err = -EINVAL;
	else
		err = scan_strings(fd, &h, buf, chunk, names, n, off);
	if (!err)
		err = scan_types(fd, &h, buf, chunk, off, n, ids);
	free(buf);
	close(fd);
	return err;
}

int btf_scan__funcs(const char *path, const char *const *names, int n, int *ids)
{
	return btf_scan__funcs_chunk(path, names, n, ids, 64 * 1024);
}
