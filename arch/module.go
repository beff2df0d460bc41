package arch

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// A module is the parsed non-test Go code of one Go module.
type module struct {
	path     string // the module path from go.mod
	fset     *token.FileSet
	packages []*pkg
}

// A pkg is one package of the module. Its path is relative to the module
// root ("node", "runtime/tap"), as in layers.yaml.
type pkg struct {
	path  string
	files []*ast.File
}

// loadModule parses every non-test .go file under root, skipping what the
// go command skips: testdata, directories starting with "." or "_", and
// nested modules. Build tags are ignored: the rules hold on every platform.
// File names are relative to root.
func loadModule(root string) (*module, error) {
	modPath, err := modulePath(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, err
	}
	mod := &module{path: modPath, fset: token.NewFileSet()}
	err = filepath.WalkDir(root, func(dir string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if dir != root {
			name := d.Name()
			if name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return filepath.SkipDir
			}
		}
		p, err := mod.parseDir(root, dir)
		if p != nil {
			mod.packages = append(mod.packages, p)
		}
		return err
	})
	return mod, err
}

// parseDir parses the non-test .go files of dir; it returns nil if there
// are none.
func (m *module) parseDir(root, dir string) (*pkg, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	rel, err := filepath.Rel(root, dir)
	if err != nil {
		return nil, err
	}
	p := &pkg{path: filepath.ToSlash(rel)}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(m.fset, filepath.ToSlash(filepath.Join(rel, name)), src, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		p.files = append(p.files, f)
	}
	if len(p.files) == 0 {
		return nil, nil
	}
	return p, nil
}

// internal returns the path of an imported package relative to the module
// root, and whether it is in the module at all.
func (m *module) internal(importPath string) (string, bool) {
	return strings.CutPrefix(importPath, m.path+"/")
}

func modulePath(goMod string) (string, error) {
	f, err := os.Open(goMod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(lines.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	if err := lines.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s: no module line", goMod)
}
