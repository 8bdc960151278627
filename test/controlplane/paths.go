package controlplane

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

const (
	modulePath = "github.com/cozystack/address-controller"

	// BinEnv names the directory holding etcd, kube-apiserver and
	// kube-controller-manager. The Makefile sets it; without it, bin/ at
	// the repository root is used so that a plain `go test` works too.
	BinEnv = "CONTROLPLANE_BIN"
)

// RepoRoot returns the repository's root: the nearest directory at or above
// the working directory whose go.mod declares this module, or, failing that
// (a binary run from elsewhere), the one above this source file.
func RepoRoot() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	for _, dir := range starts {
		for {
			if isModuleRoot(dir) {
				return dir, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", fmt.Errorf("no go.mod of module %s found above %s", modulePath, strings.Join(starts, " or "))
}

// isModuleRoot tells whether dir/go.mod declares this module (and not, say,
// one of the tools modules below it).
func isModuleRoot(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`) == modulePath
		}
	}
	return false
}

// BinDir returns the directory of the control plane binaries: $CONTROLPLANE_BIN
// if set, else bin/ at the repository root.
func BinDir() (string, error) {
	if dir := os.Getenv(BinEnv); dir != "" {
		return filepath.Abs(dir)
	}
	root, err := RepoRoot()
	if err != nil {
		return "", fmt.Errorf("%s is not set and %w", BinEnv, err)
	}
	return filepath.Join(root, "bin"), nil
}

// Binaries checks that etcd, kube-apiserver, kube-controller-manager and
// extra are in BinDir, as Start looks for them, and returns that directory.
func Binaries(extra ...string) (string, error) {
	dir, err := BinDir()
	if err != nil {
		return "", err
	}
	_, err = findBinaries(dir, append([]string{Etcd, KubeAPIServer, KubeControllerManager}, extra...)...)
	return dir, err
}

// RequireBinaries is Binaries for a test: without them the test skips, or
// fails when CI is set, where a missing binary is a broken build.
func RequireBinaries(t testing.TB, extra ...string) string {
	t.Helper()
	dir, err := Binaries(extra...)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return dir
}

// findBinaries returns the paths of the named binaries in dir, or one error
// naming every missing one and how to build it.
func findBinaries(dir string, names ...string) (map[string]string, error) {
	paths := make(map[string]string, len(names))
	var missing []string
	for _, name := range names {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			missing = append(missing, name)
			continue
		}
		paths[name] = p
	}
	if len(missing) > 0 {
		return nil, errors.New("missing control plane binaries in " + dir + ": " + strings.Join(missing, ", ") +
			" (run `make controlplane` at the repository root, or set " + BinEnv + ")")
	}
	return paths, nil
}
