package core

import (
	"os"
	"testing"
	"time"
)

// Test files may do what the core must not.
func TestStep(t *testing.T) {
	go func() { _ = os.Args }()
	Step(time.Now(), NewRand(1))
}
