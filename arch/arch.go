package arch

import (
	"fmt"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
)

// A Violation is one broken rule at one place.
type Violation struct {
	Pos    token.Position // Filename is relative to the module root
	Rule   string
	Detail string
}

// String formats v as "file:line: rule: detail".
func (v Violation) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", v.Pos.Filename, v.Pos.Line, v.Rule, v.Detail)
}

// Check checks the module at root against the layers file and returns
// every violation, ordered by file and line.
func Check(root, layersFile string) ([]Violation, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	layersFile, err = filepath.Abs(layersFile)
	if err != nil {
		return nil, err
	}
	rel, err := filepath.Rel(root, layersFile)
	if err != nil {
		return nil, err
	}
	ls, err := loadLayers(layersFile, filepath.ToSlash(rel))
	if err != nil {
		return nil, err
	}
	mod, err := loadModule(root)
	if err != nil {
		return nil, err
	}
	vs := append(checkLayers(mod, ls), checkPurity(mod, ls)...)
	slices.SortStableFunc(vs, func(a, b Violation) int {
		if c := strings.Compare(a.Pos.Filename, b.Pos.Filename); c != 0 {
			return c
		}
		return a.Pos.Line - b.Pos.Line
	})
	return vs, nil
}

// matches reports whether an import path matches a pattern: "a/b" is that
// package, "a/b/..." is a/b and every package under it.
func matches(pattern, path string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == pattern
}
