package cni

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

func TestBadConfigurationsGetCNIErrorsNamingTheField(t *testing.T) {
	for _, tc := range []struct {
		conf string
		code uint
		want string
	}{
		{`{"cniVersion":"1.1.0","name":"burrow","type":"burrow-cni"`, types.ErrDecodingFailure, "not valid JSON"},
		{`{"cniVersion":"1.1.0","name":"burrow","type":"bridge"}`, types.ErrInvalidNetworkConfig, `type: is "bridge"`},
		{`{"cniVersion":"1.1.0","name":"../etc","type":"burrow-cni"}`, types.ErrInvalidNetworkConfig, "name:"},
		{`{"cniVersion":"1.1.0","name":"burrow","type":"burrow-cni","socket":"run/b.sock"}`, types.ErrInvalidNetworkConfig, "socket:"},
		{`{"cniVersion":"1.1.0","name":"burrow","type":"burrow-cni","dataDir":"x"}`, types.ErrInvalidNetworkConfig, "dataDir:"},
		{`{"cniVersion":"1.1.0","name":"burrow","type":"burrow-cni","ipam":{"type":"host-local"}}`, types.ErrInvalidNetworkConfig, "ipam:"},
	} {
		_, err := parseConf([]byte(tc.conf))
		var e *types.Error
		if !errors.As(err, &e) || e.Code != tc.code || !strings.Contains(e.Msg, tc.want) {
			t.Errorf("%s: got %v, want code %d saying %q", tc.conf, err, tc.code, tc.want)
		}
	}
	conf, err := parseConf([]byte(`{"cniVersion":"1.1.0","name":"burrow","type":"burrow-cni"}`))
	if err != nil || conf.Socket != "/run/burrow/burrow.sock" || conf.DataDir != "/var/lib/burrow/containers" {
		t.Errorf("defaults: %+v %v", conf, err)
	}
}

func TestContainerNameComesFromTheRuntimesArguments(t *testing.T) {
	for args, want := range map[string]string{
		"IgnoreUnknown=1;K8S_POD_NAME=web":                                     "web",
		"K8S_POD_NAMESPACE=shop;K8S_POD_NAME=web;K8S_POD_INFRA_CONTAINER_ID=x": "web.shop",
		"K8S_POD_NAME=web;K8S_POD_NAMESPACE=default":                           "web",
		"IgnoreUnknown=1": "",
		"":                "",
	} {
		if got := containerName(args); got != want {
			t.Errorf("%q: %q, want %q", args, got, want)
		}
	}
}

func TestBroadcastOfAnIPv4SubnetOnly(t *testing.T) {
	for p, want := range map[string]string{"10.83.7.16/28": "10.83.7.31", "10.0.0.0/8": "10.255.255.255", "fd53::/112": "invalid IP"} {
		if got := broadcast(netip.MustParsePrefix(p)).String(); got != want {
			t.Errorf("%s: %s, want %s", p, got, want)
		}
	}
}

func TestHostVethNameIsStableAndShort(t *testing.T) {
	a, b := hostVethName("c1", "eth0"), hostVethName("c1", "eth1")
	if a != hostVethName("c1", "eth0") || a == b || len(a) > 15 || !strings.HasPrefix(a, "bw") {
		t.Errorf("%q %q", a, b)
	}
}
