// Package usage is the core's ResourceQuota reconciler (package quota):
// for every ResourceQuota that limits addresses it drops the charges that
// are settled or whose claim is gone, and writes each key's usage into
// status.used, where a tenant reads it with kubectl describe quota, and
// into the metrics. It charges nothing itself: the claim reconciler does,
// before it takes an address.
package usage
