package layout

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/cozystack/address-controller/"

// wings name the two sides by import-path prefix.
var wings = map[string][]string{
	"core":   {module + "internal/core", module + "cmd/manager"},
	"driver": {module + "internal/driver", module + "cmd/metallb-iad"},
}

// TestImportDirection lists every product package with its transitive
// dependencies (go list -deps) and fails on any package that reaches into
// a wing it does not belong to.
func TestImportDirection(t *testing.T) {
	for pkg, deps := range dependencies(t) {
		own := wingOf(pkg)
		for _, d := range deps {
			if w := wingOf(d); w != "" && w != own {
				t.Errorf("%s (%s) depends on %s (%s)", strings.TrimPrefix(pkg, module), side(own), strings.TrimPrefix(d, module), side(w))
			}
		}
	}
}

func side(wing string) string {
	if wing == "" {
		return "shared floor"
	}
	return wing
}

func wingOf(pkg string) string {
	for w, prefixes := range wings {
		for _, p := range prefixes {
			if pkg == p || strings.HasPrefix(pkg, p+"/") {
				return w
			}
		}
	}
	return ""
}

// dependencies maps each package of the module (tests excluded) to the
// module's packages it depends on, directly or not.
func dependencies(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Deps", "../../api/...", "../../cmd/...", "../../internal/...")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deps := map[string][]string{}
	for dec := json.NewDecoder(out); ; {
		var p struct {
			ImportPath string
			Deps       []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		for _, d := range p.Deps {
			if strings.HasPrefix(d, module) {
				deps[p.ImportPath] = append(deps[p.ImportPath], d)
			}
		}
		if _, ok := deps[p.ImportPath]; !ok {
			deps[p.ImportPath] = nil
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if len(deps) < 20 {
		t.Fatalf("go list found only %d packages", len(deps))
	}
	return deps
}
