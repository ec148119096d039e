package hms

import "github.com/hmsproxy/hmsproxy/thrift/wire"

// ReadLockResponse reads the fields of the LockResponse struct at d's
// position, the answer of lock and check_lock: the lock's id (1) and its
// LockState (2: 1 ACQUIRED, 2 WAITING, 3 ABORT, 4 NOT_ACQUIRED). Errors
// stay in d.
func ReadLockResponse(d *wire.Decoder) (id int64, state int32) {
	d.Struct(wire.I64At(1, &id), wire.I32At(2, &state))
	return id, state
}
