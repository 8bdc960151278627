package v1alpha1

import (
	"net/netip"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestIPAddressName(t *testing.T) {
	tests := []struct {
		ip, name, err string
	}{
		{ip: "203.0.113.7", name: "ip-203-0-113-7"},
		{ip: "2001:db8::7", name: "ip-2001-db8--7"},
		{ip: "2001:db8::", name: "ip-2001-db8--0"},
		{ip: "::", name: "ip---0"},
		{ip: "::1", name: "ip---1"},
		{ip: "fd00:10:96::a", name: "ip-fd00-10-96--a"},
		{ip: "0.0.0.0", name: "ip-0-0-0-0"},
		{ip: "2001:DB8::7", err: `"2001:DB8::7" is not in canonical form; write it as "2001:db8::7"`},
		{ip: "2001:db8:0:0:0:0:0:7", err: "not in canonical form"},
		{ip: "203.0.113.07", err: "is not an IP address"},
		{ip: "fe80::1%eth0", err: "has a zone"},
		{ip: "::ffff:203.0.113.7", err: "IPv4-mapped"},
		{ip: "203.0.113.7/32", err: "is not an IP address"},
		{ip: "", err: "is not an IP address"},
		{ip: " 203.0.113.7", err: "is not an IP address"},
	}
	for _, tc := range tests {
		t.Run(tc.ip, func(t *testing.T) {
			name, err := IPAddressName(tc.ip)
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("IPAddressName(%q) = %q, %v; want error containing %q", tc.ip, name, err, tc.err)
			case tc.err == "" && (err != nil || name != tc.name):
				t.Fatalf("IPAddressName(%q) = %q, %v; want %q", tc.ip, name, err, tc.name)
			}
		})
	}
}

// FuzzIPAddressName: never panics; every name it returns is a valid object
// name, and distinct IPs never share a name.
func FuzzIPAddressName(f *testing.F) {
	for _, s := range []string{"203.0.113.7", "2001:db8::7", "2001:db8::", "::", "fe80::1%eth0", "::ffff:1.2.3.4", "1.2.3.4.5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		name, err := IPAddressName(s)
		if err != nil {
			return
		}
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Fatalf("IPAddressName(%q) = %q, not a valid object name: %v", s, name, errs)
		}
		addr := netip.MustParseAddr(s)
		if back, ok := IPOfAddressName(name); !ok || back != addr {
			t.Fatalf("IPAddressName(%q) = %q maps back to %v: two IPs could share the name", s, name, back)
		}
	})
}

func TestIPOfAddressName(t *testing.T) {
	for name, want := range map[string]string{
		"ip-203-0-113-7":   "203.0.113.7",
		"ip-2001-db8--7":   "2001:db8::7",
		"ip-2001-db8--0":   "2001:db8::",
		"ip---0":           "::",
		"ip-fd00-10-96--a": "fd00:10:96::a",
		"ip-203-0-113-07":  "", // not canonical
		"ip-2001-db8--":    "", // the 0 is appended
		"ip-2001-DB8--7":   "", // upper case
		"203-0-113-7":      "", // no prefix
		"ip-203.0.113.7":   "", // dots stay dots
		"203.0.113.7":      "", // an IP, not a name
		"ip-1-2-3":         "", // three parts
		"ip--ffff-1-2-3-4": "", // IPv4-mapped
	} {
		ip, ok := IPOfAddressName(name)
		switch {
		case ok != (want != ""):
			t.Errorf("IPOfAddressName(%q) = %v, ok %v; want %q", name, ip, ok, want)
		case ok && ip.String() != want:
			t.Errorf("IPOfAddressName(%q) = %s, want %s", name, ip, want)
		}
	}
}
