// Package trace records the calls clients make through the proxy to a
// compact, rotating, size-bounded file, and reads such files (and
// metastore audit logs) back as calls to replay.
//
// # File format
//
// A trace file is a header and records, all integers big-endian or
// varints:
//
//	header:  "HMSTRACE" | version u16 | flags u16 | start (Unix ns) i64
//	record:  length u32 | CRC-32C of the payload u32 | payload
//	payload: kind (1: call) | time (ns after start, zigzag varint) |
//	         took (ns, uvarint) | connection (uvarint) |
//	         identity kind (byte) | identity (uvarint length + bytes) |
//	         method (uvarint length + bytes) | flags (byte) |
//	         args size (uvarint) | args (uvarint length + bytes) |
//	         reply size (uvarint) | outcome (byte) |
//	         exception field (zigzag varint) | served (uvarint length + bytes)
//
// Args are the request's args struct exactly as the client sent it (its
// Thrift binary bytes after the message header); the reply is kept as
// its size and outcome only. The header's flags say how the recording
// was redacted. A reader takes a file from disk as untrusted input: every
// length is bounded, a record whose checksum fails or that is cut short
// ends the file with an error that says so.
//
// # Rotation
//
// A recording writes PATH; when PATH reaches its size bound it is renamed
// PATH.000001 (the next free sequence number) and a new PATH begun, and
// the oldest files go while the set is over its total bound. Files lists
// a set in time order.
//
// # Sensitivity
//
// A trace holds the names of databases, tables, partitions and users,
// filter expressions and set_ugi groups: whatever clients asked. Treat it
// as the metastore's own data. Redaction replaces every string of a
// request with a keyed hash (RedactNames), or keeps no request bytes at
// all (RedactBodies).
package trace
