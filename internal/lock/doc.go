// Package lock owns the controllers' optimistic-lock writes of metadata: a
// change made to an object read from the cache is written as a merge patch
// of that change alone, preconditioned on the resource version read. A
// concurrent writer's change is never overwritten; the write fails with a
// conflict instead, and the next pass decides again on what it then reads.
package lock
