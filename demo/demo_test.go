package demo

import (
	"testing"

	"burrow/netlab"
)

func TestSiteSizesSpreadEveryNodeWithSeveralPerSite(t *testing.T) {
	for nodes := MinNodes; nodes <= 250; nodes++ {
		sizes := siteSizes(nodes)
		total, smallest, largest := 0, nodes, 0
		for i, size := range sizes {
			total += size
			if size < 2 {
				t.Errorf("%d nodes: site %s gets %d", nodes, siteLayout[i].name, size)
			}
			if siteLayout[i].nat == netlab.EndpointIndependent {
				smallest, largest = min(smallest, size), max(largest, size)
			}
		}
		if total != nodes {
			t.Errorf("%d nodes: sizes %v add up to %d", nodes, sizes, total)
		}
		if largest-smallest > 1 {
			t.Errorf("%d nodes: endpoint-independent sites unevenly filled: %v", nodes, sizes)
		}
	}
	if got := siteSizes(MinNodes); got[0] < 3 {
		t.Errorf("the smallest demo puts only %d nodes on %s: %v", got[0], siteLayout[0].name, got)
	}
}

func TestTooFewOrTooManyNodesAreRefused(t *testing.T) {
	for _, nodes := range []int{0, MinNodes - 1, 251} {
		if checkNodes(nodes) == nil {
			t.Errorf("--nodes %d accepted", nodes)
		}
	}
	if err := checkNodes(MinNodes); err != nil {
		t.Error(err)
	}
}
