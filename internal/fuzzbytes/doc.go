// Package fuzzbytes owns the one helper the fuzz targets share: a reader
// handing out a fuzzed input byte by byte, zeros once it runs out, so that a
// target builds a whole world out of any input, however short.
package fuzzbytes
