// SPDX-License-Identifier: MIT
#include <libiberty/demangle.h>
#include "symbols/demangle.h"

char *demangle(const char *name)
{
	if (!name || name[0] != '_' || (name[1] != 'Z' && name[1] != 'R'))
		return NULL; /* C names, and a fast path for them */
	/* the default style is "auto": Rust (legacy and v0) is tried before C++ */
	return cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI);
}
