package usage

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cozystack/address-controller/internal/quota"
)

// Only a charge dropped from a live claim (settled by addresses a cache
// shows) asks the API server again; a claim gone needs no second look.
func TestSettledLive(t *testing.T) {
	charges := quota.Charges{"live": {Claim: "a"}, "gone": {Claim: "b"}}
	live := map[types.UID]bool{"live": true}
	for _, tc := range []struct {
		name   string
		pruned quota.Charges
		want   bool
	}{
		{"nothing pruned", nil, false},
		{"the gone claim's charge dropped", quota.Charges{"live": charges["live"]}, false},
		{"the live claim's charge dropped", quota.Charges{"gone": charges["gone"]}, true},
		{"both dropped", quota.Charges{}, true},
	} {
		if got := settledLive(charges, tc.pruned, live); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
