package changes

import "sync"

// Queue is a bounded queue whose senders never block, for a change sink
// on the client's path (this package's Stream, the Kafka feed): a put
// into a full or closed queue is refused, and the sender counts the
// event lost. Close may race with puts.
type Queue[T any] struct {
	mu     sync.RWMutex // guards closed, and sends on c against its close
	closed bool
	c      chan T
}

// NewQueue is a Queue of at most n waiting items.
func NewQueue[T any](n int) *Queue[T] { return &Queue[T]{c: make(chan T, n)} }

// Put queues v; false when the queue is full or closed.
func (q *Queue[T]) Put(v T) bool {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return false
	}
	select {
	case q.c <- v:
		return true
	default:
		return false
	}
}

// Items yields what was queued, in order; it ends once Close was called
// and the queue is drained.
func (q *Queue[T]) Items() <-chan T { return q.c }

// Close refuses later puts and ends Items after what is queued. Safe
// twice.
func (q *Queue[T]) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.closed = true
		close(q.c)
	}
}
