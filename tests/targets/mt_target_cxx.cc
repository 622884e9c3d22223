// SPDX-License-Identifier: MIT
/* C++ allocations for the root tests: each must give exactly one event (operator new calls
 * malloc inside libstdc++; only the outer call counts). Reports on $MT_EXPECT_FD. */
#include <cstdio>
#include <cstdlib>
#include <new>
#include <unistd.h>

static int expect_fd = -1;

static void say(const char *what, void *p, size_t n)
{
	char buf[128];
	int len = snprintf(buf, sizeof(buf), "%s %p %zu\n", what, p, n);

	if (expect_fd >= 0)
		(void)!write(expect_fd, buf, len);
}

int main()
{
	const char *e = getenv("MT_EXPECT_FD");

	if (e)
		expect_fd = atoi(e);
	int *a = new int[100];
	say("new", a, 400);
	say("delete", a, 0); /* said before: the address is what matters */
	delete[] a;
	auto *b = new long(7);
	say("new", b, sizeof(long));
	say("delete", b, 0);
	delete b;
	void *c = operator new(333, std::align_val_t(64));
	say("aligned", c, 333);
	say("delete", c, 0);
	operator delete(c, std::align_val_t(64));
	void *d = operator new(444, std::nothrow);
	say("new", d, 444);
	say("delete", d, 0);
	operator delete(d);
	return 0;
}
