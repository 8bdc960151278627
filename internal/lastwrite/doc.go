// Package lastwrite remembers the resource version of a controller's last
// write to each object until its informer delivers it. A pass that runs on
// an older cached copy would only write on a stale version and be refused
// with a conflict, so it waits instead: the API server sees one write per
// change, not one plus a refused retry.
package lastwrite
