// Package allocator owns the IP arithmetic of allocating from a pool: it
// parses pool ranges in every form MetalLB accepts (CIDR and "a-b", IPv4 and
// IPv6), finds the smallest free address of a family, and counts capacity.
// It is pure — ranges and addresses in use go in, an address or figures come
// out — and its cost depends on how many addresses are in use, never on the
// pool's size: an IPv6 /64 or an IPv4 /8 allocates as fast as a /24.
package allocator
