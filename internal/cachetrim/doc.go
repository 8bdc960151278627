// Package cachetrim owns what the controllers' caches keep of the objects
// they hold in the tens of thousands — claims and addresses — and how those
// are walked.
//
// A /16 is 65,536 addresses and as many claims in each binary's memory.
// Decoding gives every object its own copy of strings that a handful of
// values cover (its kind and group, its class, namespace, finalizers,
// phase, condition types and reasons, the message of ClassResolved);
// Transform makes them share one copy, makes equal small label and
// annotation maps one map, and drops managedFields, which nothing reads —
// unless a server-side apply wrote them, which an update must then send
// back whole (package untrack). It changes no other value, so a write
// built from a cached object sends exactly what it would have sent.
//
// Each walks the cache's own objects without copying them, for readers
// that look at every object (metrics, the used set of a pool): a list from
// the cache copies each object into a fresh slice on every call.
//
// Slim and Whole are the form the informers store claims and addresses in:
// the metadata of each in a fifth of its decoded room, exactly, or the
// object whole when its metadata has no exact slim form. NewInformer
// builds informers that store the slim form and show every reader — their
// store, index functions and event handlers — whole objects, so no reader
// knows of it. (client-go's debug check KUBE_WATCHLIST_INCONSISTENCY_DETECTOR
// expects stored objects to be runtime.Objects: leave it off.) NewInformer
// also leaves out the namespace index of the cluster-scoped kinds, which
// would file every address under one key no reader asks for.
package cachetrim
