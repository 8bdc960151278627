// Command manager runs the class-agnostic core of address-controller: it
// binds IPAddressClaims to IPAddress objects, resolves classes, reclaims and
// protects classes. It never allocates an address; per-class drivers do.
// Run it with --help for every flag.
package main
