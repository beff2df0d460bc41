// Package tools stands on the top layer.
package tools

// Name names the tools.
const Name = "tools"
