package charts

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The image the charts run builds from what the Dockerfile copies and
// .dockerignore lets through, and nothing else: both binaries build from
// that context alone, static (no ELF interpreter), as the Dockerfile's build
// stage makes them. Docker itself cannot run here.
func TestImageBuildContext(t *testing.T) {
	root := repoRoot(t)
	var copied, allowed []string
	for _, line := range strings.Split(string(readFile(t, "Dockerfile")), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == "COPY" && !strings.HasPrefix(f[1], "--from") {
			copied = append(copied, f[1:len(f)-1]...)
		}
	}
	for _, line := range strings.Split(string(readFile(t, ".dockerignore")), "\n") {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "!"); ok {
			allowed = append(allowed, p)
		}
	}
	slices.Sort(copied)
	slices.Sort(allowed)
	if len(copied) == 0 || !slices.Equal(copied, allowed) {
		t.Fatalf("the Dockerfile copies %v, .dockerignore lets through %v", copied, allowed)
	}

	context := t.TempDir()
	for _, p := range copied {
		var err error
		if strings.HasSuffix(p, "/") {
			err = os.CopyFS(filepath.Join(context, p), os.DirFS(filepath.Join(root, p)))
		} else {
			err = os.WriteFile(filepath.Join(context, p), readFile(t, p), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "out") + string(filepath.Separator)
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "./cmd/manager", "./cmd/metallb-iad")
	cmd.Dir = context
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=readonly")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building from the image's context: %v\n%s", err, b)
	}
	for _, bin := range []string{"manager", "metallb-iad"} {
		f, err := elf.Open(out + bin)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s is dynamically linked", bin)
			}
		}
		_ = f.Close()
	}
}
