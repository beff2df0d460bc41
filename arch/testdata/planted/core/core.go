// Package core plants a violation of each purity rule, and an upward import.
package core

import (
	"math/rand/v2"
	"net"
	"os"
	"time"

	"fixture/app"
)

var _ = app.Name

// Run breaks one rule a line, then keeps them in its last block.
func Run() {
	_ = time.Now()
	go Run()
	_ = rand.IntN(6)
	_, _ = net.Dial("udp", "192.0.2.1:53")
	_ = os.Args

	_ = rand.New(rand.NewPCG(1, 2)).IntN(6)
	_ = time.Duration(0).Seconds()
	_ = net.IP{192, 0, 2, 1}.String()
}
