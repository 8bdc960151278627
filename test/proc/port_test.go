package proc

import "testing"

func TestFreePortsAreDistinctAndOutsideTheEphemeralRange(t *testing.T) {
	lo, hi := outsideEphemeral()
	seen := map[int]bool{}
	for range 50 {
		p, err := FreePort("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		if p < lo || p >= hi {
			t.Fatalf("port %d outside [%d, %d)", p, lo, hi)
		}
		seen[p] = true
	}
}
