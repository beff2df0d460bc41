package main

import (
	"bytes"
	"flag"
	"net/netip"
	"os"
	"testing"

	"burrow/config"
)

var updateExample = flag.Bool("update-example", false, "rewrite packaging/burrow.example.yaml from the configuration template")

const examplePath = "../../packaging/burrow.example.yaml"

// TestPackagedExampleIsTheInitTemplate keeps the example configuration that
// 'make install' and the package ship identical to what 'burrow init'
// writes; 'make example-config' rewrites it after the template changed.
func TestPackagedExampleIsTheInitTemplate(t *testing.T) {
	l, err := newNodeLayout("home", defaultConfigDir, defaultNodeStateDir, "", config.DefaultListen,
		contacts{bootstrap: []netip.AddrPort{netip.MustParseAddrPort("203.0.113.10:51820")}})
	if err != nil {
		t.Fatal(err)
	}
	want := renderConfig(l)
	if *updateExample {
		if err := os.WriteFile(examplePath, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from what burrow init writes; run: make example-config", examplePath)
	}
	if _, err := config.Parse(got); err != nil {
		t.Fatalf("the example does not parse: %v", err)
	}
}
