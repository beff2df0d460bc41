package core

import . "time"

// Wait hides time.Sleep behind a dot import.
func Wait() { Sleep(Second) }
