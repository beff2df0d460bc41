package core

import (
	"testing"
	"time"
)

// Test files are not checked.
func TestRun(t *testing.T) {
	go Run()
	_ = time.Now()
}
