// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* For the benchmark only: the cheapest XDP program there is, to measure what
 * merely having an XDP stage on a session's host-side veth costs. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

SEC("xdp")
int xdp_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
