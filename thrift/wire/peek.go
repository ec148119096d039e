package wire

import (
	"net"
	"syscall"
)

// PeekResult is what a peek at a connection found.
type PeekResult uint8

const (
	// PeekUnsupported: the connection is not a socket that can be peeked
	// at (a TLS connection, a pipe); nothing is known.
	PeekUnsupported PeekResult = iota
	// PeekFailed: the peek could not be made (the connection was closed
	// on this side) or was interrupted; nothing is known.
	PeekFailed
	// PeekEmpty: the connection is open and nothing waits to be read.
	PeekEmpty
	// PeekPending: bytes wait to be read.
	PeekPending
	// PeekClosed: the peer closed the connection (end of file), or the
	// socket holds an error.
	PeekClosed
)

// Peek looks at nc's socket without blocking and without taking a byte.
// It goes through the descriptor's Control, not Read, so a read deadline
// set on nc, even one that has passed, does not change the answer: a
// client whose request was read long ago, or an idle pooled connection
// with the deadline of its last call, is still seen as it is.
func Peek(nc net.Conn) PeekResult {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return PeekUnsupported
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return PeekClosed
	}
	res := PeekFailed
	var one [1]byte
	err = rc.Control(func(fd uintptr) {
		n, _, rerr := syscall.Recvfrom(int(fd), one[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case rerr == nil && n > 0:
			res = PeekPending
		case rerr == nil:
			res = PeekClosed
		case rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK:
			res = PeekEmpty
		case rerr == syscall.EINTR:
			res = PeekFailed
		default:
			res = PeekClosed
		}
	})
	if err != nil {
		return PeekFailed
	}
	return res
}
