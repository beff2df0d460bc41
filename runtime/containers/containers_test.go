package containers

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

func TestRecordsAreWrittenReadListedAndRemoved(t *testing.T) {
	dir := t.TempDir()
	a := Attachment{ContainerID: "c1", IfName: "eth0", Name: "web", HostInterface: "bw0123",
		Addresses: []netip.Prefix{netip.MustParsePrefix("10.83.1.8/28"), netip.MustParsePrefix("fd53::10/112")}}
	b := Attachment{ContainerID: "c2", IfName: "eth0", HostInterface: "bw4567"}
	if err := Write(dir, "burrow", a); err != nil {
		t.Fatal(err)
	}
	if err := Write(dir, "other", b); err != nil {
		t.Fatal(err)
	}
	// A record cut short, as a crash may leave a temporary file, is skipped.
	if err := os.WriteFile(filepath.Join(dir, "attachments", "burrow", "c3-eth0.json"), []byte(`{"container_id":`), 0o644); err != nil {
		t.Fatal(err)
	}
	got, ok, err := Read(dir, "burrow", "c1", "eth0")
	if err != nil || !ok || got.Name != "web" || len(got.Addrs()) != 2 || got.Addrs()[0] != netip.MustParseAddr("10.83.1.8") {
		t.Fatalf("Read: %+v %v %v", got, ok, err)
	}
	all, err := All(dir)
	if err != nil || len(all) != 2 || all[0].ContainerID != "c1" || all[1].ContainerID != "c2" {
		t.Fatalf("All: %+v %v", all, err)
	}
	if of, _ := OfNetwork(dir, "other"); len(of) != 1 || of[0].ContainerID != "c2" {
		t.Fatalf("OfNetwork: %+v", of)
	}
	for range 2 { // removing twice is no error
		if err := Remove(dir, "burrow", "c1", "eth0"); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, err := Read(dir, "burrow", "c1", "eth0"); ok || err != nil {
		t.Fatalf("after Remove: %v %v", ok, err)
	}
}
