// SPDX-License-Identifier: MIT
/*
 * `dlopen_loop N`: N rounds of dlopen("libz.so.1"), dlsym, dlclose, as a program that loads
 * plugins does. A neighbour for scripts/neighbour-cost.sh (NEIGHBOUR=dlopen): a uprobe on
 * glibc's dlopen would trap every round of it, tracked or not.
 */
#include <dlfcn.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 10000;

	for (long i = 0; i < n; i++) {
		void *h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);

		if (!h || !dlsym(h, "zlibVersion"))
			return 1;
		dlclose(h);
	}
	return 0;
}
