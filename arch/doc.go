// Package arch checks burrow's architecture against its code, so that
// `go test ./...` fails when the structure of DESIGN.md is broken.
//
// Two rules are checked, on non-test files only:
//
//   - layers: every package is placed on a layer in layers.yaml and
//     imports only packages on lower layers (or of its own entry);
//   - core purity: the packages on core layers, the sans-I/O core, do no
//     I/O, start no goroutines, read no clock and draw no global
//     randomness. The clock and the random source are injected.
//
// Check reports every violation as "file:line: rule: detail".
package arch
