package core

import (
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

// The core's Service watch leaves out what carries a skipped label key,
// whatever its value, and keeps everything when no key is skipped.
func TestWithoutLabels(t *testing.T) {
	const placeholder = "metallb.drivers.local.sdn.cozystack.io/ip-address"
	for _, tc := range []struct {
		name   string
		keys   []string
		labels map[string]string
		want   bool
	}{
		{"1 no key skipped: every Service", nil, map[string]string{placeholder: "ip-192-0-2-1"}, true},
		{"2 a Service without the key is watched", []string{placeholder}, map[string]string{"app": "web"}, true},
		{"3 a Service with the key is not", []string{placeholder}, map[string]string{placeholder: "ip-192-0-2-1"}, false},
		{"4 with an empty value neither", []string{placeholder}, map[string]string{placeholder: ""}, false},
		{"5 any one of several keys leaves it out", []string{"example.com/own", placeholder}, map[string]string{"example.com/own": "x"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sel := withoutLabels(tc.keys)
			if got := sel == nil || sel.Matches(labels.Set(tc.labels)); got != tc.want {
				t.Errorf("watched = %v, want %v (selector %v)", got, tc.want, sel)
			}
		})
	}
}

func TestValidateSkipLabels(t *testing.T) {
	if err := ValidateSkipLabels([]string{"metallb.drivers.local.sdn.cozystack.io/ip-address", "app"}); err != nil {
		t.Errorf("valid keys refused: %v", err)
	}
	if err := ValidateSkipLabels([]string{"not a key"}); err == nil {
		t.Error("an invalid key was accepted")
	}
}
