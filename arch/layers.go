package arch

import (
	"fmt"
	"go/token"
	"os"
	"strconv"

	"gopkg.in/yaml.v3"
)

// layers is the parsed layers file.
type layers struct {
	file    string // relative to the module root, for messages
	entries []*entry
}

// An entry is one package pattern of the layers file, placed on a layer.
type entry struct {
	pattern string
	line    int
	layer   int // counted from 1, the ground
	core    bool
}

// loadLayers reads the layers file at path; name is how messages call it.
func loadLayers(path, name string) (*layers, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var doc struct {
		Layers []struct {
			Core     bool
			Packages []yaml.Node
		}
	}
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	ls := &layers{file: name}
	seen := map[string]bool{}
	aboveCore := false
	for i, l := range doc.Layers {
		// Core layers lie below all others, so that a core package, which
		// imports only lower layers, imports only the core.
		if l.Core && aboveCore {
			return nil, fmt.Errorf("%s: layer %d is core but lies above a layer that is not", name, i+1)
		}
		aboveCore = aboveCore || !l.Core
		for _, n := range l.Packages {
			if n.Kind != yaml.ScalarNode || n.Value == "" {
				return nil, fmt.Errorf("%s:%d: a package pattern must be a non-empty string", name, n.Line)
			}
			if seen[n.Value] {
				return nil, fmt.Errorf("%s:%d: %s is listed twice", name, n.Line, n.Value)
			}
			seen[n.Value] = true
			ls.entries = append(ls.entries, &entry{pattern: n.Value, line: n.Line, layer: i + 1, core: l.Core})
		}
	}
	if len(ls.entries) == 0 {
		return nil, fmt.Errorf("%s: no layers", name)
	}
	return ls, nil
}

// find returns the entry a package belongs to: the most specific pattern
// that matches it, or nil.
func (ls *layers) find(path string) *entry {
	var best *entry
	for _, e := range ls.entries {
		if matches(e.pattern, path) && (best == nil || len(e.pattern) > len(best.pattern)) {
			best = e
		}
	}
	return best
}

// checkLayers reports packages missing from the layers file, imports that
// do not point down, and entries that match no package.
func checkLayers(mod *module, ls *layers) []Violation {
	var vs []Violation
	used := map[*entry]bool{}
	for _, p := range mod.packages {
		from := ls.find(p.path)
		if from == nil {
			vs = append(vs, Violation{mod.fset.Position(p.files[0].Package), "layers",
				fmt.Sprintf("package %s is not in %s; add it to the layer where it belongs", p.path, ls.file)})
			continue
		}
		used[from] = true
		for _, f := range p.files {
			for _, spec := range f.Imports {
				path, _ := strconv.Unquote(spec.Path.Value)
				target, ok := mod.internal(path)
				if !ok {
					continue
				}
				// An import of an unlisted package is reported where that
				// package is, not here.
				to := ls.find(target)
				if to == nil || to == from || to.layer < from.layer {
					continue
				}
				vs = append(vs, Violation{mod.fset.Position(spec.Pos()), "layers",
					fmt.Sprintf("%s (layer %d) imports %s (layer %d); imports must point down", p.path, from.layer, target, to.layer)})
			}
		}
	}
	for _, e := range ls.entries {
		if !used[e] {
			vs = append(vs, Violation{token.Position{Filename: ls.file, Line: e.line}, "layers",
				fmt.Sprintf("%s matches no package; remove it or correct it", e.pattern)})
		}
	}
	return vs
}
