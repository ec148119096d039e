package eventlog

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/hmsproxy/hmsproxy/ops/worker"
)

// Lease writes a key only while the writer still holds the lease it was
// elected with (leader.Elector implements it).
type Lease interface {
	SetIfLeader(ctx context.Context, token int64, key, value string) error
}

// RedisCursor keeps the cursor in Redis, shared by every node that may
// take over polling, and written only under the current leader's token:
// a deposed leader that is still running cannot move it.
type RedisCursor struct {
	Client redis.UniversalClient
	Lease  Lease
	Key    string
}

func (c *RedisCursor) Load(ctx context.Context) (int64, bool, error) {
	v, err := c.Client.Get(ctx, c.Key).Result()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("eventlog: load cursor: %w", err)
	}
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("eventlog: cursor %q: %w", v, err)
	}
	return id, true, nil
}

// Save needs ctx from a leader-only worker run, which carries the token.
func (c *RedisCursor) Save(ctx context.Context, id int64) error {
	tok, ok := worker.LeaderToken(ctx)
	if !ok {
		return errors.New("eventlog: cursor saved outside a leader term")
	}
	return c.Lease.SetIfLeader(ctx, tok, c.Key, strconv.FormatInt(id, 10))
}
