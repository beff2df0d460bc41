package arch

import (
	"fmt"
	"go/ast"
	"go/token"
	"path"
	"slices"
	"strconv"
	"strings"
)

// forbiddenImports are packages the core must not import at all: all they
// offer is I/O or global state.
var forbiddenImports = []struct{ pattern, why string }{
	{"os/...", "the core does no I/O; files and processes belong in runtime"},
	{"syscall", "the core does no I/O; system calls belong in runtime"},
	{"io/ioutil", "the core does no I/O; files belong in runtime"},
	{"net/http/...", "the core does no I/O; sockets belong in runtime"},
	{"golang.org/x/sys/...", "the core does no I/O; system calls belong in runtime"},
	{"github.com/vishvananda/...", "the core does no I/O; netlink belongs in runtime"},
	{"crypto/rand", "randomness is injected: take an io.Reader"},
}

// A nameRule limits what the core may use of a package that mixes pure
// values with a clock, global randomness or sockets: only the names listed,
// or all but the names listed.
type nameRule struct {
	only, except []string
	why          string
}

func (r nameRule) allows(name string) bool {
	if r.only != nil {
		return slices.Contains(r.only, name)
	}
	return !slices.Contains(r.except, name)
}

const injectRandomness = "randomness is injected: draw from the *rand.Rand passed in"

// nameRules are keyed by import path.
var nameRules = map[string]nameRule{
	"time": {
		except: []string{"Now", "Since", "Until", "Sleep", "After", "AfterFunc", "NewTimer", "NewTicker", "Tick"},
		why:    "inject the clock: use the now passed in",
	},
	// A generator seeded by the caller may be built; the global one must
	// not be drawn from.
	"math/rand": {
		only: []string{"New", "NewSource", "NewZipf", "Rand", "Source", "Source64", "Zipf"},
		why:  injectRandomness,
	},
	"math/rand/v2": {
		only: []string{"New", "NewChaCha8", "NewPCG", "NewZipf", "ChaCha8", "PCG", "Rand", "Source", "Zipf"},
		why:  injectRandomness,
	},
	// net's address types are plain values, and the codecs the core uses
	// (miekg/dns, dhcpv4) speak them; everything else in net is sockets.
	"net": {
		only: []string{"HardwareAddr", "IP", "IPMask", "IPNet", "CIDRMask", "IPv4", "IPv4Mask",
			"ParseCIDR", "ParseIP", "ParseMAC", "IPv4bcast", "IPv4zero", "IPv6unspecified", "IPv6zero"},
		why: "sockets belong in runtime; the core may use only net's address types",
	},
}

// checkPurity checks the packages on core layers.
func checkPurity(mod *module, ls *layers) []Violation {
	var vs []Violation
	for _, p := range mod.packages {
		if e := ls.find(p.path); e == nil || !e.core {
			continue
		}
		for _, f := range p.files {
			vs = append(vs, checkFilePurity(mod.fset, f)...)
		}
	}
	return vs
}

func checkFilePurity(fset *token.FileSet, f *ast.File) []Violation {
	var vs []Violation
	report := func(pos token.Pos, format string, args ...any) {
		vs = append(vs, Violation{fset.Position(pos), "core purity", fmt.Sprintf(format, args...)})
	}
	// restricted maps the name this file gives each package with a name
	// rule to that package's path.
	restricted := map[string]string{}
	for _, spec := range f.Imports {
		path, _ := strconv.Unquote(spec.Path.Value)
		for _, fi := range forbiddenImports {
			if matches(fi.pattern, path) {
				report(spec.Pos(), "imports %s (%s)", path, fi.why)
			}
		}
		if _, ok := nameRules[path]; !ok {
			continue
		}
		name := packageName(path)
		if spec.Name != nil {
			name = spec.Name.Name
		}
		if name == "." {
			report(spec.Pos(), "dot-imports %s, which hides the names used from it; import it by name", path)
			continue
		}
		restricted[name] = path
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			report(n.Pos(), "go statement (the core runs on its driver's goroutine; goroutines belong in runtime)")
		case *ast.SelectorExpr:
			// Without type information a local variable named like an
			// import is taken for the import; such shadowing is best
			// renamed anyway.
			if x, ok := n.X.(*ast.Ident); ok {
				if path, ok := restricted[x.Name]; ok && !nameRules[path].allows(n.Sel.Name) {
					report(n.Pos(), "uses %s.%s (%s)", path, n.Sel.Name, nameRules[path].why)
				}
			}
		}
		return true
	})
	return vs
}

// packageName is the name a package is imported under by default: the
// last element of its path, or the one before a major version suffix
// ("math/rand/v2" is rand).
func packageName(importPath string) string {
	dir, name := path.Split(importPath)
	if v, ok := strings.CutPrefix(name, "v"); ok && dir != "" {
		if _, err := strconv.Atoi(v); err == nil {
			return path.Base(dir)
		}
	}
	return name
}
