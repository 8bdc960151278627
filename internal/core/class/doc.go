// Package class is the core's IPAddressClass reconciler: class deletion
// protection. A class carries the class-protection finalizer; once deleted
// it is held until no IPAddress of it is left, in any phase, and a ClassInUse
// event names the addresses it waits for — drivers resolve their backend
// configuration through the class to hold and pin its addresses.
package class
