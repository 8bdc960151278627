package fuzzbytes

// Bytes hands out fuzzed bytes, zeros once they run out.
type Bytes []byte

// Next takes the next byte.
func (b *Bytes) Next() byte {
	if len(*b) == 0 {
		return 0
	}
	c := (*b)[0]
	*b = (*b)[1:]
	return c
}
