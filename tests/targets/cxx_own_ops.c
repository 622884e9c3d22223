// SPDX-License-Identifier: MIT
/*
 * Runs lib/own_ops.cc (linked beside it): a library whose own operator new and delete its code
 * calls directly, each reported on the side channel.
 */
#include "expect.h"

int own_ops_run(void);

int main(void)
{
	mt_expect_init();
	return own_ops_run();
}
