package hms

import "github.com/hmsproxy/hmsproxy/thrift/wire"

// ReadLockResponse reads the fields of the LockResponse struct at d's
// position, the answer of lock and check_lock: the lock's id (1) and its
// LockState (2: 1 ACQUIRED, 2 WAITING, 3 ABORT, 4 NOT_ACQUIRED). Errors
// stay in d.
func ReadLockResponse(d *wire.Decoder) (id int64, state int32) {
	d.Fields(func(fid int16, typ byte) bool {
		switch {
		case fid == 1 && typ == wire.TI64:
			id = d.I64()
		case fid == 2 && typ == wire.TI32:
			state = d.I32()
		default:
			return false
		}
		return true
	})
	return id, state
}
