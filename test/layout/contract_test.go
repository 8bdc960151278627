package layout

import (
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// contractDoc is the contract in the project's own words, relative to the
// repository's root. Its headings define the sections and the numbered
// steps that code and tests cite.
const contractDoc = "docs/contract.md"

// sourceRoots are the trees whose Go files may cite the contract.
var sourceRoots = []string{"../../api", "../../cmd", "../../internal", "../../test"}

// stepID is a step's id: a section number or a named part of the contract
// ("class"), a dash, and the step's number.
const stepID = `(?:\d+|class)-\d+`

var (
	stepHeading    = regexp.MustCompile(`^#+ (` + stepID + `)\s`)
	sectionHeading = regexp.MustCompile(`^#+ §(\d+)\s`)

	// In comments: a step id in brackets on the branch that carries the
	// step out, and a section sign followed by a number, alone or with
	// ".M" or " step M" naming one of its steps.
	marker  = regexp.MustCompile(`\[(` + stepID + `)[\] ]`)
	section = regexp.MustCompile(`§(\d+)(?:\.(\d+)| step (\d+))?`)
	// A test case named after its step: a string literal that opens with
	// the step id and a space.
	caseName = regexp.MustCompile("^[\"`](" + stepID + ") ")
	// A test function named after its steps, as the integration tests
	// are: the numbers between the first underscore and the title, read
	// in pairs, or a lone section number.
	testFunc = regexp.MustCompile(`^Test[A-Za-z]*((?:_\d+)+)_`)
)

// ref is one citation of the contract in the Go sources: a step id such as
// "4-7", or a section such as "§4".
type ref struct {
	pos  token.Position
	id   string
	test bool // cited in a _test.go file
}

// TestContractReferencesAreDefined fails on every citation in the code and
// tests of a step or section that docs/contract.md does not define: such a
// citation points the reader nowhere, and usually means a step was
// renumbered on one side only.
func TestContractReferencesAreDefined(t *testing.T) {
	_, defined := contract(t)
	for _, r := range references(t) {
		if !defined[r.id] {
			t.Errorf("%s: %s is not defined in %s", r.pos, r.id, contractDoc)
		}
	}
}

// TestContractStepsArePinned fails on every step of docs/contract.md that no
// test cites — by a table case's name, a test function's name or a comment
// in a _test.go file — so that no step is documented without a test that
// fails when the step breaks.
func TestContractStepsArePinned(t *testing.T) {
	steps, _ := contract(t)
	pinned := map[string]bool{}
	for _, r := range references(t) {
		if r.test {
			pinned[r.id] = true
		}
	}
	for _, id := range steps {
		if !pinned[id] {
			t.Errorf("step %s of %s: no test cites it", id, contractDoc)
		}
	}
}

// contract returns the steps docs/contract.md defines, in the order of the
// page, and every step and section it defines.
func contract(t *testing.T) (steps []string, defined map[string]bool) {
	t.Helper()
	data, err := os.ReadFile("../../" + contractDoc)
	if err != nil {
		t.Fatal(err)
	}
	defined = map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		id := ""
		if m := stepHeading.FindStringSubmatch(line); m != nil {
			id = m[1]
			steps = append(steps, id)
		} else if m := sectionHeading.FindStringSubmatch(line); m != nil {
			id = "§" + m[1]
		} else {
			continue
		}
		if defined[id] {
			t.Errorf("%s defines %s twice", contractDoc, id)
		}
		defined[id] = true
	}
	if len(steps) == 0 {
		t.Fatalf("%s defines no step", contractDoc)
	}
	return steps, defined
}

// references returns every citation of the contract in the Go files under
// sourceRoots.
func references(t *testing.T) []ref {
	t.Helper()
	var refs []ref
	fset := token.NewFileSet()
	for _, root := range sourceRoots {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			refs = append(refs, scan(fset, path, src)...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return refs
}

// scan returns the citations in one Go file. It reads tokens, not lines, so
// that an index expression such as a[n-1] or a string that merely contains
// a step id is not taken for a citation.
func scan(fset *token.FileSet, path string, src []byte) []ref {
	file := fset.AddFile(strings.TrimPrefix(filepath.ToSlash(path), "../../"), -1, len(src))
	test := strings.HasSuffix(path, "_test.go")
	var refs []ref
	cite := func(pos token.Pos, id string) {
		refs = append(refs, ref{pos: fset.Position(pos), id: id, test: test})
	}
	var s scanner.Scanner
	s.Init(file, src, nil, scanner.ScanComments)
	prev := token.ILLEGAL
	for {
		pos, tok, lit := s.Scan()
		switch tok {
		case token.EOF:
			return refs
		case token.COMMENT:
			for _, m := range marker.FindAllStringSubmatch(lit, -1) {
				cite(pos, m[1])
			}
			for _, m := range section.FindAllStringSubmatch(lit, -1) {
				switch {
				case m[2] != "":
					cite(pos, m[1]+"-"+m[2])
				case m[3] != "":
					cite(pos, m[1]+"-"+m[3])
				default:
					cite(pos, "§"+m[1])
				}
			}
		case token.STRING:
			if m := caseName.FindStringSubmatch(lit); m != nil {
				cite(pos, m[1])
			}
		case token.IDENT:
			if m := testFunc.FindStringSubmatch(lit); m != nil && prev == token.FUNC && test {
				for _, id := range funcSteps(m[1]) {
					cite(pos, id)
				}
			}
		}
		prev = tok
	}
}

// funcSteps reads the numbers of a test function's name ("_4_2_4_6") as the
// steps they cite (4-2 and 4-6), or a lone number as a section. An odd
// count of more than one is returned whole, so that it is reported.
func funcSteps(numbers string) []string {
	n := strings.Split(strings.TrimPrefix(numbers, "_"), "_")
	switch {
	case len(n) == 1:
		return []string{"§" + n[0]}
	case len(n)%2 == 1:
		return []string{strings.Join(n, "_")}
	}
	var ids []string
	for i := 0; i < len(n); i += 2 {
		ids = append(ids, n[i]+"-"+n[i+1])
	}
	return ids
}

// named is a function, method, type or value the contract names in backticks:
// `claim.decide`, `hold.(*Reconciler).refresh`, or a test `TestMultisync`.
var named = regexp.MustCompile("`(?:([a-z][a-z0-9]*)\\.(?:\\(\\*?[A-Za-z]+\\)\\.)?([A-Za-z][A-Za-z0-9]*)`|(Test[A-Za-z0-9_]+)[` ])")

// TestContractNamesExist fails on every function, method, type or test
// docs/contract.md names that the sources do not declare: a rename on one
// side only would send the reader to code that is not there.
func TestContractNamesExist(t *testing.T) {
	decls := declarations(t)
	data, err := os.ReadFile("../../" + contractDoc)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range named.FindAllStringSubmatch(string(data), -1) {
		switch {
		case m[3] != "" && !decls["test."+m[3]]:
			t.Errorf("%s names %s, which no _test.go file declares", contractDoc, m[3])
		case m[1] != "" && decls["pkg."+m[1]] && !decls[m[1]+"."+m[2]]:
			t.Errorf("%s names %s.%s, which package %s does not declare", contractDoc, m[1], m[2], m[1])
		}
	}
}

// declarations are the top-level names of every package under
// sourceRoots, keyed "package.Name" (methods by their own name), with
// "pkg.<name>" for each package seen and "test.<Name>" for each test.
func declarations(t *testing.T) map[string]bool {
	t.Helper()
	decls := map[string]bool{}
	fset := token.NewFileSet()
	for _, root := range sourceRoots {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			pkg := strings.TrimSuffix(f.Name.Name, "_test")
			decls["pkg."+pkg] = true
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					decls[pkg+"."+d.Name.Name] = true
					if strings.HasPrefix(d.Name.Name, "Test") && strings.HasSuffix(path, "_test.go") {
						decls["test."+d.Name.Name] = true
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							decls[pkg+"."+s.Name.Name] = true
						case *ast.ValueSpec:
							for _, n := range s.Names {
								decls[pkg+"."+n.Name] = true
							}
						}
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return decls
}
