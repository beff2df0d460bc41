package bench

import (
	"math"
	"slices"
	"time"
)

// number is what median and spread summarize: durations, byte counts,
// CPU shares.
type number interface {
	~int | ~int64 | ~uint64 | ~float64
}

func mean(ds []time.Duration) time.Duration {
	var total time.Duration
	for _, d := range ds {
		total += d
	}
	return total / time.Duration(len(ds))
}

// median is the middle value, or the mean of the two middle ones.
func median[T number](xs []T) T {
	sorted := slices.Sorted(slices.Values(xs))
	middle := len(sorted) / 2
	if len(sorted)%2 == 0 {
		return (sorted[middle-1] + sorted[middle]) / 2
	}
	return sorted[middle]
}

// percentile is the nearest-rank p-th percentile (0 < p ≤ 100): the
// smallest value that at least p % of the values do not exceed, so always
// one of them. Of 800 ping replies, the 99th percentile is the 792nd
// smallest: 8 replies took longer. xs must not be empty.
func percentile[T number](xs []T, p float64) T {
	sorted := slices.Sorted(slices.Values(xs))
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// line is y = Intercept + Slope·x.
type line struct {
	Slope, Intercept float64
}

// fitLine is the least-squares line through the points (xs[i], ys[i]).
// It needs at least two distinct xs; with fewer the slope is NaN.
func fitLine(xs, ys []float64) line {
	n := float64(len(xs))
	var sx, sy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
	}
	mx, my := sx/n, sy/n
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	if sxx == 0 {
		return line{Slope: math.NaN(), Intercept: math.NaN()}
	}
	slope := sxy / sxx
	return line{Slope: slope, Intercept: my - slope*mx}
}
