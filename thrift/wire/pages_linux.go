package wire

import (
	"os"
	"syscall"
	"unsafe"
)

// dropPages gives the memory of b, a buffer its owner has outgrown and
// will never touch again, back to the system at once. A reader that
// grows its buffer with the bytes that arrive would otherwise leave about
// as much garbage as it keeps (1 + 2 + 4 ... MiB) resident until the
// collector and the scavenger get to it, and a process holding large
// partial requests would use up to twice what their claims say. Only the
// whole pages inside b are dropped; the collector frees b as usual, and
// memory reused from it is zeroed (faulted in afresh) like any other.
// b must not hold pointers (a []byte does not).
func dropPages(b []byte) {
	page := uintptr(os.Getpagesize())
	if uintptr(len(b)) < 2*page {
		return
	}
	start := uintptr(unsafe.Pointer(&b[0]))
	from := (start + page - 1) &^ (page - 1)
	to := (start + uintptr(len(b))) &^ (page - 1)
	if to <= from {
		return
	}
	syscall.Madvise(b[from-start:to-start], syscall.MADV_DONTNEED)
}
