// Package app is not core: it may read the clock and start goroutines.
package app

import (
	"time"

	"fixture/tools"
)

// Name names the app.
var Name = tools.Name

// Start starts the app.
func Start() {
	go func() { _ = time.Now() }()
}
