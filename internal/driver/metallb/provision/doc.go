// Package provision is the metallb-iad driver's provisioner: contract §7
// obligations 1 and 2. For a claim stamped with the driver's provisioner and
// missing a family, it picks the smallest free address of the class's
// MetalLB pool and creates one IPAddress pre-bound to the claim. decide is
// pure (claim, class, addresses already naming the claim, taken addresses →
// addresses to create); Reconciler gathers from the cache and creates.
package provision
