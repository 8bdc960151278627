package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cozystack/address-controller/internal/driver/metallb"
)

// TestSourceAnnotationsAreMetalLBs: the flag's default names exactly the
// annotations the MetalLB driver knows as a Service's own address source.
func TestSourceAnnotationsAreMetalLBs(t *testing.T) {
	if diff := cmp.Diff(metallb.BackendAnnotations, list(metallbSourceAnnotations)); diff != "" {
		t.Errorf("--auto-claim-skip-annotations default differs from the driver's (-driver +flag):\n%s", diff)
	}
}

// TestSkipLabelsAreThePlaceholders: the flag's default is the label the
// MetalLB driver puts on its placeholders.
func TestSkipLabelsAreThePlaceholders(t *testing.T) {
	if metallbPlaceholderLabel != metallb.LabelAddress {
		t.Errorf("--auto-claim-skip-labels default %q, the driver's placeholders carry %q", metallbPlaceholderLabel, metallb.LabelAddress)
	}
}
