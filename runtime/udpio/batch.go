//go:build linux

package udpio

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// batch holds the kernel-facing arrays of one direction, allocated once, and
// the call that uses them, created once so that a call allocates nothing.
type batch struct {
	hdrs  []unix.Mmsghdr
	iovs  []unix.Iovec // one per message; a segmented send spans several
	names []unix.RawSockaddrInet6
	ctrl  []byte // ctrlSpace bytes per header
	segs  []int  // messages per header (send)

	ctrlSpace int
	from, to  int // hdrs[from:to] go to the next system call
	n         int
	errno     unix.Errno
	// nowait makes call return what is there, nothing perhaps, rather
	// than wait in the kernel until it can move at least one message.
	nowait bool
	// shut says the wait ended because the socket was shut down.
	shut bool
	call func(fd uintptr)
}

func newBatch(trap uintptr, ctrlSpace int) *batch {
	b := &batch{
		hdrs:      make([]unix.Mmsghdr, BatchSize),
		iovs:      make([]unix.Iovec, BatchSize),
		names:     make([]unix.RawSockaddrInet6, BatchSize),
		ctrl:      make([]byte, BatchSize*ctrlSpace),
		segs:      make([]int, BatchSize),
		ctrlSpace: ctrlSpace,
	}
	events := int16(unix.POLLIN)
	if trap == unix.SYS_SENDMMSG {
		events = unix.POLLOUT
	}
	b.call = func(fd uintptr) {
		b.shut = false
		for {
			n, errno := mmsg(trap, fd, b.hdrs[b.from:b.to])
			switch errno {
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				if b.nowait {
					b.n, b.errno = 0, 0
					return
				}
				if waitFor(int(fd), events) {
					continue
				}
				b.shut = true
			}
			b.n, b.errno = n, errno
			return
		}
	}
	return b
}

// control returns header i's control buffer.
func (b *batch) control(i int) []byte {
	return b.ctrl[i*b.ctrlSpace : (i+1)*b.ctrlSpace]
}

// setHeader points header i at its address and at iovs[iov:iov+iovs], with
// ctrl as control data (nil for none).
func (b *batch) setHeader(i, iov, iovs int, namelen uint32, ctrl []byte) {
	h := &b.hdrs[i].Hdr
	h.Name = (*byte)(unsafe.Pointer(&b.names[i]))
	h.Namelen = namelen
	h.Iov = &b.iovs[iov]
	h.SetIovlen(iovs)
	h.Control = nil
	if len(ctrl) > 0 {
		h.Control = &ctrl[0]
	}
	h.SetControllen(len(ctrl))
	h.Flags = 0
}

// ReadBatch receives up to min(len(msgs), BatchSize) messages, blocking
// until at least one is there, and returns how many it filled. Each Buf
// should be ReadBufSize long when GRO is on.
func (c *Conn) ReadBatch(msgs []Message) (int, error) { return c.readBatch(msgs, false) }

// TryReadBatch is ReadBatch without the wait: it returns 0 when nothing
// is there.
func (c *Conn) TryReadBatch(msgs []Message) (int, error) { return c.readBatch(msgs, true) }

func (c *Conn) readBatch(msgs []Message, nowait bool) (int, error) {
	if len(msgs) == 0 {
		return 0, nil
	}
	c.readMu.Lock()
	defer c.readMu.Unlock()
	if c.read == nil {
		c.read = newBatch(unix.SYS_RECVMMSG, readCmsgSpace)
	}
	b := c.read
	b.nowait = nowait
	count := min(len(msgs), BatchSize)
	for i := range count {
		setIovec(&b.iovs[i], msgs[i].Buf)
		b.setHeader(i, i, 1, unix.SizeofSockaddrInet6, b.control(i))
	}
	b.from, b.to = 0, count
	if err := c.raw.Control(b.call); err != nil || b.shut {
		return 0, c.closed("read")
	}
	if b.errno != 0 {
		return 0, os.NewSyscallError("recvmmsg", b.errno)
	}
	for i := range b.n {
		h := &b.hdrs[i]
		m := &msgs[i]
		m.N = int(h.Len)
		m.Addr = readSockaddr(&b.names[i])
		m.SegmentSize, m.Received = parseReadControl(b.control(i)[:h.Hdr.Controllen])
		if m.SegmentSize >= m.N {
			m.SegmentSize = 0
		}
	}
	return b.n, nil
}

// Writer sends batches of datagrams on a Conn. Each goroutine that sends
// takes a Writer of its own: Writers share only the socket, so that no
// sender waits for another.
type Writer struct {
	c     *Conn
	batch *batch
	one   [1]Message // WriteTo's
}

// NewWriter makes a Writer for c.
func (c *Conn) NewWriter() *Writer {
	return &Writer{c: c, batch: newBatch(unix.SYS_SENDMMSG, segmentCmsgSpace)}
}

// WriteBatch sends msgs as Writer.WriteBatch does, with a Writer of the
// Conn's.
func (c *Conn) WriteBatch(msgs []Message) (int, error) {
	w := c.writers.Get().(*Writer)
	defer c.writers.Put(w)
	return w.WriteBatch(msgs)
}

// WriteBatch sends msgs in order, waiting while the socket's buffer is
// full, and returns how many were sent; on error msgs[n] is the first one
// not sent. While GSO is on, consecutive datagrams to one address with
// equal length (the last of a run may be shorter) leave in one segmented
// send. When the kernel refuses a segmented send, the datagrams are sent
// again unsegmented; if that works, GSO is switched off for the socket
// (EIO, EINVAL: it cannot segment) or kept for later sends (EMSGSIZE: the
// segments exceed the path MTU, a limit of this path only).
func (w *Writer) WriteBatch(msgs []Message) (int, error) {
	c := w.c
	sent := 0
	var refused unix.Errno // why the last segmented send was refused, while retrying unsegmented
	for sent < len(msgs) {
		n, refusal, err := w.send(w.pack(msgs[sent:], refused == 0 && c.gso.Load()))
		sent += n
		if refused != 0 && n > 0 {
			if refused != unix.EMSGSIZE {
				c.gso.Store(false)
			}
			refused = 0
		}
		if err != nil {
			if refusal == 0 {
				return sent, err
			}
			refused = refusal
		}
	}
	return sent, nil
}

// pack lays out the first BatchSize messages as send headers, one per
// datagram or, when segment is set, per run of segments, and returns the
// number of headers.
func (w *Writer) pack(msgs []Message, segment bool) int {
	b := w.batch
	msgs = msgs[:min(len(msgs), BatchSize)]
	groups := 0
	for i := 0; i < len(msgs); {
		run := 1
		if segment {
			run = segmentRun(msgs[i:])
		}
		for k := i; k < i+run; k++ {
			setIovec(&b.iovs[k], msgs[k].Buf)
		}
		var ctrl []byte
		if run > 1 {
			ctrl = b.control(groups)
			putSegmentSize(ctrl, len(msgs[i].Buf))
		}
		namelen := putSockaddr(&b.names[groups], msgs[i].Addr, w.c.family)
		b.setHeader(groups, i, run, namelen, ctrl)
		b.segs[groups] = run
		groups++
		i += run
	}
	return groups
}

// segmentRun counts the leading messages of msgs that can go as one
// segmented send: same address, same length except a shorter last one,
// within the kernel's limits.
func segmentRun(msgs []Message) int {
	size := len(msgs[0].Buf)
	total, n := size, 1
	for size > 0 && n < len(msgs) && n < maxSegments {
		next := len(msgs[n].Buf)
		if msgs[n].Addr != msgs[0].Addr || next == 0 || next > size || total+next > maxGSOBytes {
			break
		}
		total += next
		n++
		if next < size {
			break
		}
	}
	return n
}

// send hands the first groups headers to sendmmsg, through partial sends and
// full socket buffers. It returns the number of messages sent and, when the
// kernel refused a segmented send in a way an unsegmented one may not be,
// the refusal.
func (w *Writer) send(groups int) (sent int, refusal unix.Errno, err error) {
	b := w.batch
	b.from, b.to = 0, groups
	for b.from < b.to {
		if err := w.c.raw.Control(b.call); err != nil || b.shut {
			return sent, 0, w.c.closed("write")
		}
		if b.errno != 0 {
			if b.segs[b.from] > 1 && (b.errno == unix.EIO || b.errno == unix.EINVAL || b.errno == unix.EMSGSIZE) {
				refusal = b.errno
			}
			return sent, refusal, os.NewSyscallError("sendmmsg", b.errno)
		}
		for _, segs := range b.segs[b.from : b.from+b.n] {
			sent += segs
		}
		b.from += b.n
	}
	return sent, 0, nil
}
