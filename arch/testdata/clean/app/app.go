// Package app is not core: it drives the core with the real clock.
package app

import (
	"os"
	"time"

	"fixture/core"
)

// Run drives the core.
func Run() {
	rng := core.NewRand(uint64(os.Getpid()))
	go core.Step(time.Now(), rng)
}
