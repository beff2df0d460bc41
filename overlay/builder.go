package overlay

import (
	"math"
	"math/rand/v2"

	"burrow/nid"
)

// Params are a node's overlay parameters. Nodes with different parameters
// interoperate.
type Params struct {
	Successors   int  // s: successor links
	LongDistance int  // k: long-distance links; 0 with Auto
	Auto         bool // k = log2 of the estimated size
	MaxInbound   int  // long-distance links accepted from others; 0 = 2k
	MaxLinks     int  // hard cap on links of all kinds; 0 = none
}

// K is the number of long-distance links to keep at estimated size n.
func (p Params) K(n float64) int {
	if p.Auto {
		return max(1, int(math.Round(math.Log2(math.Max(n, 2)))))
	}
	return p.LongDistance
}

// InboundLimit is how many long-distance links this node accepts from
// others: as many as it creates, or the cascade of refusals the paper warns
// about sets in.
func (p Params) InboundLimit(n float64) int {
	if p.MaxInbound > 0 {
		return p.MaxInbound
	}
	return 2 * max(p.K(n), 1)
}

// LongDistanceDraw is one long-distance link target: a uniform draw u in
// [0, 1) kept for the link's life, so that the target only moves when the
// size estimate does.
type LongDistanceDraw struct {
	U float64
}

// Draw makes a new long-distance draw from rng.
func Draw(rng *rand.Rand) LongDistanceDraw { return LongDistanceDraw{U: rng.Float64()} }

// Fraction is the clockwise distance of the target as a fraction of the
// ring at estimated size n: x = e^(ln(n)·(u−1)) = n^(u−1), Symphony's
// harmonic pdf (eq. 1), so x ranges over [1/n, 1).
func (d LongDistanceDraw) Fraction(n float64) float64 {
	return math.Exp(math.Log(math.Max(n, 1)) * (d.U - 1))
}

// TooClose is the paper's eq. 2: a target within D_c = ⌊n·e^(−ln n)⌋ = 1
// node of us is no shortcut; such a draw is discarded and redrawn.
func (d LongDistanceDraw) TooClose(n float64) bool {
	dc := math.Floor(n * math.Exp(-math.Log(math.Max(n, 1))))
	return n*d.Fraction(n) <= dc
}

// Resize carries a draw made at estimated size n over to size m, keeping
// its target wherever a draw at m is as likely to have put it there, and
// reports whether it kept it; when not, d is a new draw at m. The result
// is a draw at m exactly as Draw would make it, so a link need not be
// aimed again only because the estimate moved: in a cold start of 5,000
// nodes the estimates of nodes that knew only a few successors were off
// by factors of 2 to 11, and aiming every such link again was thousands
// of requests and, for the last of them, a minute.
//
// The target lies at x = n^(u−1). Expressed at m it is u' = 1 + ln x/ln m.
// When m < n, x is a harmonic draw on [1/n, 1), and so one on [1/m, 1)
// wherever it is at least 1/m: it is kept there, and drawn afresh when
// closer.
// When m > n, a harmonic draw on [1/m, 1) falls in [1/n, 1) with
// probability p = ln n/ln m, and is then distributed as x is: x is kept
// with probability p, else the draw moves below 1/n.
func (d *LongDistanceDraw) Resize(n, m float64, rng *rand.Rand) bool {
	n, m = math.Max(n, 2), math.Max(m, 2)
	u := 1 + math.Log(d.Fraction(n))/math.Log(m)
	switch {
	case m < n && u >= 0, m > n && rng.Float64() < math.Log(n)/math.Log(m), m == n:
		d.U = min(max(u, 0), math.Nextafter(1, 0))
		return true
	case m < n:
		*d = Draw(rng)
	default:
		d.U = rng.Float64() * (1 - math.Log(n)/math.Log(m))
	}
	return false
}

// Target is the ring position the draw points at from self.
func (d LongDistanceDraw) Target(self nid.ID, n float64) nid.ID {
	return self.Add(nid.FromFraction(d.Fraction(n)))
}
