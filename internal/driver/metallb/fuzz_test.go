package metallb

import (
	"bytes"
	"encoding/json"
	"io"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// strictPool reads raw as the class-parameters admission policy does
// (policies/metallb-iad-class-parameters.yaml): one JSON object whose only
// key is "pool", spelled exactly so, holding a non-empty string. The
// policy also caps the name at 253 characters; the driver leaves that to
// the pool lookup, which finds no such pool.
func strictPool(raw []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	var m map[string]json.RawMessage
	if err := dec.Decode(&m); err != nil || m == nil {
		return "", false
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", false // more after the object
	}
	var pool string
	if len(m) != 1 || json.Unmarshal(m["pool"], &pool) != nil || pool == "" {
		return "", false
	}
	return pool, true
}

// FuzzParseParameters reads fuzzed bytes as a class's spec.parameters.
// The driver accepts exactly what the admission policy admits, with the
// same pool; a success names a pool, and writing the parameters back and
// reading them again gives the same; a class decoded from the API's JSON
// reads as its raw parameters do.
func FuzzParseParameters(f *testing.F) {
	for _, s := range []string{
		`{"pool":"public"}`, `{"pool":""}`, `{}`, `null`, `"public"`, `[]`,
		`{"pool":"public","pools":"x"}`, `{"pool":7}`, `{"pool":null}`,
		`{"pool":"a","pool":"b"}`, ` {"pool":"pub\u006cic"} `, `{"pool":"public"`,
		`{"Pool":"public"}`, `{"pool":"public"} trailing`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		class := &v1alpha1.IPAddressClass{Spec: v1alpha1.IPAddressClassSpec{Provisioner: Provisioner,
			Parameters: &runtime.RawExtension{Raw: raw}}}
		p, err := ParseParameters(class)
		want, admitted := strictPool(raw)
		switch {
		case err != nil && !strings.HasPrefix(err.Error(), "spec.parameters"):
			t.Fatalf("error %q does not name spec.parameters", err)
		case err == nil && p.Pool == "":
			t.Fatalf("%q parsed without a pool", raw)
		case !json.Valid(raw):
			// Not one JSON value: the API server never stores such
			// parameters, so only the above is judged.
		case (err == nil) != admitted || (err == nil && p.Pool != want):
			t.Fatalf("%q: driver reads pool %q (err %v), the admission policy %q (admitted %v)", raw, p.Pool, err, want, admitted)
		}
		// The API server hands the driver the class as JSON.
		doc := append(append([]byte(`{"spec":{"provisioner":"p","parameters":`), raw...), "}}"...)
		var decoded v1alpha1.IPAddressClass
		if json.Unmarshal(doc, &decoded) == nil {
			dp, derr := ParseParameters(&decoded)
			if dp != p || (derr == nil) != (err == nil) {
				t.Fatalf("%q: raw reads %+v (%v), decoded from JSON %+v (%v)", raw, p, err, dp, derr)
			}
		}
		if err != nil {
			return
		}
		out, merr := json.Marshal(p)
		if merr != nil {
			t.Fatal(merr)
		}
		again, err := ParseParameters(&v1alpha1.IPAddressClass{Spec: v1alpha1.IPAddressClassSpec{Parameters: &runtime.RawExtension{Raw: out}}})
		if err != nil || again != p {
			t.Fatalf("%q: written back as %s, read again as %+v (%v)", raw, out, again, err)
		}
	})
}

// FuzzParseIPs reads fuzzed annotation values: every address read is
// valid and comes from one comma-separated entry; FormatIPs writes them
// sorted, in one spelling whatever the order they came in, and reading
// that back gives the same addresses.
func FuzzParseIPs(f *testing.F) {
	for _, s := range []string{
		"203.0.113.1", "203.0.113.1,2001:db8::1", " 2001:db8::1 , 203.0.113.1 ", "2001:DB8::1,,bogus",
		"::ffff:203.0.113.1", "fe80::1%eth0,203.0.113.1", "203.0.113.1,203.0.113.1", "", ",",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ips := ParseIPs(s)
		if n := strings.Count(s, ",") + 1; len(ips) > n {
			t.Fatalf("%q: %d addresses out of %d entries", s, len(ips), n)
		}
		for _, ip := range ips {
			if !ip.IsValid() {
				t.Fatalf("%q: invalid address in %v", s, ips)
			}
		}
		formatted := FormatIPs(ips)
		back := ParseIPs(formatted)
		sorted := slices.Clone(ips)
		slices.SortFunc(sorted, netip.Addr.Compare)
		if !slices.Equal(back, sorted) {
			t.Fatalf("%q: %v formats as %q, which reads back as %v", s, ips, formatted, back)
		}
		if FormatIPs(back) != formatted {
			t.Fatalf("%q: formatting %q again gives %q", s, formatted, FormatIPs(back))
		}
		reversed := slices.Clone(ips)
		slices.Reverse(reversed)
		if FormatIPs(reversed) != formatted {
			t.Fatalf("%q: the order of %v changes its spelling", s, ips)
		}
	})
}
