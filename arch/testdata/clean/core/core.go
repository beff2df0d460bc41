// Package core keeps every purity rule while using what they allow.
package core

import (
	"math/rand/v2"
	"net"
	"time"

	"fixture/core/codec"
)

// Step uses the clock and the random source it is given.
func Step(now time.Time, rng *rand.Rand) time.Time {
	_ = net.IP(codec.Addr.AsSlice()).String()
	return now.Add(time.Duration(rng.IntN(6)) * time.Second)
}

// NewRand builds a seeded generator.
func NewRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 1)) }
