package bench

import (
	"math"
	"testing"
	"time"
)

func TestMeanAndMedian(t *testing.T) {
	ms := time.Millisecond
	if m := median([]time.Duration{3 * ms, 1 * ms, 2 * ms, 100 * ms}); m != 2500*time.Microsecond {
		t.Errorf("median of 1, 2, 3, 100 ms = %v, want 2.5 ms", m)
	}
	if m := median([]float64{2.5, 1.9, 2.2}); m != 2.2 {
		t.Errorf("median of 2.5, 1.9, 2.2 = %v, want 2.2", m)
	}
	if m := mean([]time.Duration{131 * time.Microsecond, 12500 * time.Microsecond}); m != 6315500*time.Nanosecond {
		t.Errorf("mean %v", m)
	}
}

// percentile is nearest-rank: always one of the values, the smallest that
// at least p % of them do not exceed.
func TestPercentile(t *testing.T) {
	// 1 … 200 in a shuffled order: the p-th percentile of 200 values is
	// the value of rank ⌈p × 2⌉.
	var xs []int
	for i := range 200 {
		xs = append(xs, (i*73)%200+1)
	}
	for _, c := range []struct {
		p    float64
		want int
	}{{50, 100}, {99, 198}, {99.5, 199}, {100, 200}, {0.1, 1}, {0, 1}} {
		if got := percentile(xs, c.p); got != c.want {
			t.Errorf("p%v of 1…200 = %d, want %d", c.p, got, c.want)
		}
	}
	// Of 800 ping replies, the 99th percentile leaves the 8 slowest out.
	rtts := make([]time.Duration, 800)
	for i := range rtts {
		rtts[i] = 100 * time.Microsecond
	}
	for i := range 8 {
		rtts[i*100] = time.Duration(10+i) * time.Millisecond
	}
	if got := percentile(rtts, 99); got != 100*time.Microsecond {
		t.Errorf("p99 with 8 slow replies of 800 = %v, want 0.1 ms", got)
	}
	rtts[1] = 5 * time.Millisecond // a 9th: now it is the 99th percentile
	if got := percentile(rtts, 99); got != 5*time.Millisecond {
		t.Errorf("p99 with 9 slow replies of 800 = %v, want 5 ms", got)
	}
	if got := percentile([]float64{7}, 99); got != 7 {
		t.Errorf("p99 of one value = %v", got)
	}
}

func TestFitLine(t *testing.T) {
	// One-way latency 0.2 ms over a direct link, 0.03 ms per node in
	// between, with noise that cancels out in a least-squares fit.
	xs := []float64{0, 1, 2, 3}
	ys := []float64{0.2 + 0.001, 0.23 - 0.001, 0.26 - 0.001, 0.29 + 0.001}
	got := fitLine(xs, ys)
	if math.Abs(got.Slope-0.03) > 1e-9 || math.Abs(got.Intercept-0.2) > 1e-9 {
		t.Errorf("fit %+v, want slope 0.03, intercept 0.2", got)
	}
	// Two points: the slope is their difference, as the chain's per-hop
	// figure (RTT to C − RTT to B) / 2 is.
	if got := fitLine([]float64{0, 1}, []float64{0.072, 0.101}); math.Abs(got.Slope-0.029) > 1e-9 {
		t.Errorf("slope through two points %v, want 0.029", got.Slope)
	}
	if got := fitLine([]float64{2, 2}, []float64{1, 3}); !math.IsNaN(got.Slope) {
		t.Errorf("slope with one distinct x = %v, want NaN", got.Slope)
	}
}
