package kernelpath

// The programs are compiled from bpf/kernelpath.c, outside the Go packages;
// the object and its Go bindings are committed, so building burrow needs no
// clang. After changing the C source, on Debian with clang and libbpf-dev:
//
//	go generate ./runtime/kernelpath/
//
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go@v0.22.0 -cc clang -cflags "-O2 -g -Wall -I/usr/include/x86_64-linux-gnu" -target bpfel,bpfeb -type stats -type dest -type mac_key bpf ../../bpf/kernelpath.c
