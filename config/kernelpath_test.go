package config

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func TestKernelPathIsOffByDefault(t *testing.T) {
	c, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	k := c.KernelPath
	if k.Enabled || k.Port != DefaultKernelPathPort || len(k.Prefixes) != 0 || k.AllowPublic {
		t.Fatalf("kernel path defaults: %+v", k)
	}
}

func TestKernelPathOnForAPrivateUnderlay(t *testing.T) {
	c, err := Parse([]byte(minimal + "kernel_path: {enabled: true, trusted: [10.1.2.3/16, 192.168.7.0/24], port: 4789}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("192.168.7.0/24")}
	if k := c.KernelPath; !k.Enabled || k.Port != 4789 || len(k.Prefixes) != 2 || k.Prefixes[0] != want[0] || k.Prefixes[1] != want[1] {
		t.Fatalf("kernel path: %+v, want prefixes %v", k, want)
	}
}

// TestKernelPathRefusesPublicPrefixesUnlessToldSo: the kernel path sends
// frames in the clear, so a trusted prefix that crosses the internet
// needs allow_public, and the error says why and how.
func TestKernelPathRefusesPublicPrefixesUnlessToldSo(t *testing.T) {
	for _, prefix := range []string{"0.0.0.0/0", "203.0.113.0/24", "10.0.0.0/7", "100.64.0.0/10", "198.18.0.0/16"} {
		_, err := Parse([]byte(minimal + "kernel_path: {enabled: true, trusted: [10.0.0.0/8, " + prefix + "]}\n"))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "kernel_path.trusted[1]" {
			t.Errorf("%s: error %v, want one naming kernel_path.trusted[1]", prefix, err)
			continue
		}
		for _, says := range []string{"not a private network", "unencrypted", "kernel_path.allow_public: true"} {
			if !strings.Contains(err.Error(), says) {
				t.Errorf("%s: error %q does not say %q", prefix, err, says)
			}
		}
		// Even with the kernel path off: a configuration that would
		// trust the internet is wrong before anyone turns it on.
		if _, err := Parse([]byte(minimal + "kernel_path: {trusted: [" + prefix + "]}\n")); err == nil {
			t.Errorf("%s accepted with the kernel path off", prefix)
		}
		c, err := Parse([]byte(minimal + "kernel_path: {enabled: true, allow_public: true, trusted: [" + prefix + "]}\n"))
		if err != nil || len(c.KernelPath.Prefixes) != 1 {
			t.Errorf("%s with allow_public: %v", prefix, err)
		}
	}
}

func TestKernelPathErrorsNameTheField(t *testing.T) {
	cases := []struct {
		yaml, field string
	}{
		{"kernel_path: {enabled: true}\n", "kernel_path.trusted"},
		{"kernel_path: {trusted: [10.0.0.0]}\n", "kernel_path.trusted[0]"},
		{"kernel_path: {trusted: [\"fd00::/8\"]}\n", "kernel_path.trusted[0]"},
		{"kernel_path: {port: 70000}\n", "kernel_path.port"},
		{"kernel_path: {port: -1}\n", "kernel_path.port"},
		{"listen: 0.0.0.0:51819\nkernel_path: {enabled: true, trusted: [10.0.0.0/8]}\n", "kernel_path.port"},
		{"kernel_path: {enabled: true, trusted: [10.0.0.0/8]}\ntap: {enabled: false}\n", "kernel_path.enabled"},
		{"kernel_path: {enabled: true, trusted: [10.0.0.0/8]}\ntap: {mtu: 1480}\n", "kernel_path.enabled"},
	}
	for _, tc := range cases {
		_, err := Parse([]byte(minimal + tc.yaml))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("config %q: error %v, want one naming %s", tc.yaml, err, tc.field)
		}
	}
}

func TestIsPrivatePrefix(t *testing.T) {
	for p, want := range map[string]bool{
		"10.0.0.0/8": true, "10.200.1.0/24": true, "172.16.0.0/12": true, "172.31.255.0/24": true,
		"192.168.0.0/16": true, "169.254.0.0/16": true, "10.1.2.3/32": true,
		"10.0.0.0/7": false, "172.32.0.0/16": false, "172.0.0.0/8": false, "0.0.0.0/0": false,
		"100.64.0.0/10": false, "8.8.8.8/32": false, "192.0.0.0/8": false,
	} {
		if got := IsPrivatePrefix(netip.MustParsePrefix(p)); got != want {
			t.Errorf("IsPrivatePrefix(%s) = %v", p, got)
		}
	}
}

// A configuration written by a program (the labs, the benchmarks) without
// the kernel path does not name it, so that builds from before it was
// added, which refuse unknown keys, still read the file.
func TestAConfigWithoutTheKernelPathDoesNotNameIt(t *testing.T) {
	out, err := yaml.Marshal(Config{Network: "n"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "kernel_path") {
		t.Errorf("a configuration without the kernel path names it:\n%s", out)
	}
}
