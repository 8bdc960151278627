// Package allocator owns the IP arithmetic of allocating from a pool: it
// parses pool ranges in every form MetalLB accepts (CIDR and "a-b", IPv4 and
// IPv6), finds the smallest free address of a family, and counts capacity.
// It is pure — ranges and addresses in use go in, an address or figures come
// out. The addresses in use are prepared once (Used, sorted); a first-free
// search then costs a binary search per run of taken addresses it steps
// over, never a walk over the pool or over every address in use: an IPv6
// /64 or a full IPv4 /16 allocates in under a microsecond.
package allocator
