//go:build linux

package tap

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Queue is one file descriptor of the device, outside Go's poller: a
// frame wakes only the thread that waits for it in the kernel (a loop
// that waits for Fd, then calls TryRead). Each queue is read by one
// goroutine at a time; any number may write, each with a Writer.
type Queue struct {
	file *os.File // holds the descriptor open while a call uses it
	raw  syscall.RawConn
	fd   int

	// The state of the TryRead in progress, and the call made once, so
	// that a read allocates nothing.
	readBuf []byte
	readN   int
	readErr error
	read    func(fd uintptr)
}

// newQueue wraps fd, still blocking, so that Go leaves it out of its
// poller, then makes it non-blocking for TryRead.
func newQueue(fd int, name string) (*Queue, error) {
	q := &Queue{file: os.NewFile(uintptr(fd), tunPath+":"+name), fd: fd}
	q.raw, _ = q.file.SyscallConn() // never fails for a file
	if err := unix.SetNonblock(fd, true); err != nil {
		q.file.Close()
		return nil, describe("set non-blocking", err)
	}
	q.read = func(fd uintptr) {
		for {
			n, err := unix.Read(int(fd), q.readBuf)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if errors.Is(err, unix.EAGAIN) {
				n, err = 0, nil
			}
			q.readN, q.readErr = n, err
			return
		}
	}
	return q, nil
}

// TryRead reads one packet into buf, or returns 0 and no error at once
// when none is queued: the virtio_net_hdr first when the device has
// VnetHdr, then the Ethernet frame. A packet longer than buf is cut
// silently, so buf should hold VnetHdrLen+65550 bytes (a 64 KiB IP packet
// with its Ethernet header) when the device has TSO or USO, and the MTU
// plus the headers otherwise. After Close it fails with os.ErrClosed.
func (q *Queue) TryRead(buf []byte) (int, error) {
	q.readBuf = buf
	err := q.raw.Control(q.read)
	q.readBuf = nil
	if err != nil {
		return 0, q.closed("read")
	}
	if q.readErr != nil {
		return 0, os.NewSyscallError("read", q.readErr)
	}
	return q.readN, nil
}

// Fd is the queue's file descriptor, for a loop that waits until it is
// readable (pinned.Stop.Wait) and then calls TryRead. It stays the
// queue's until the device is closed.
func (q *Queue) Fd() int { return q.fd }

// Writer writes packets to a Queue. Each goroutine that writes takes one
// of its own: writers never wait for each other, and a write allocates
// nothing.
type Writer struct {
	q     *Queue
	pkt   []byte
	n     int
	err   error
	write func(fd uintptr)
}

// NewWriter makes a Writer to q.
func (q *Queue) NewWriter() *Writer {
	w := &Writer{q: q}
	w.write = func(fd uintptr) {
		for {
			if w.n, w.err = unix.Write(int(fd), w.pkt); !errors.Is(w.err, unix.EINTR) {
				return
			}
		}
	}
	return w
}

// Write hands one packet (virtio_net_hdr first when the device has VnetHdr)
// to the kernel. A TAP takes every packet at once: it has no buffer to
// fill. After Close it fails with os.ErrClosed.
func (w *Writer) Write(pkt []byte) (int, error) {
	w.pkt = pkt
	err := w.q.raw.Control(w.write)
	w.pkt = nil
	if err != nil {
		return 0, w.q.closed("write")
	}
	if w.err != nil {
		return 0, os.NewSyscallError("write", w.err)
	}
	return w.n, nil
}

// closed is the error of a call on a closed queue.
func (q *Queue) closed(op string) error {
	return &os.PathError{Op: op, Path: q.file.Name(), Err: os.ErrClosed}
}
