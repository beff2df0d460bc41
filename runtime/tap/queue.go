//go:build linux

package tap

import "os"

// Queue is one file descriptor of the device. Each queue is read by one
// goroutine at a time; reads block in the Go runtime poller, not in a thread,
// and return when the device is closed.
type Queue struct {
	file *os.File
}

// Read reads one packet into buf: the virtio_net_hdr first when the device
// has VnetHdr, then the Ethernet frame. A packet longer than buf is cut
// silently, so buf should hold VnetHdrLen+65550 bytes (a 64 KiB IP packet
// with its Ethernet header) when the device has TSO or USO, and the MTU
// plus the headers otherwise.
func (q *Queue) Read(buf []byte) (int, error) { return q.file.Read(buf) }

// Write hands one packet (virtio_net_hdr first when the device has VnetHdr)
// to the kernel.
func (q *Queue) Write(pkt []byte) (int, error) { return q.file.Write(pkt) }
