package hms

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"io"
	"strings"
)

// NotificationEvent is the part of a notification-log event (Thrift
// NotificationEvent) that the invalidation poller and the change feed read:
// both take it from the same get_next_notification answers.
type NotificationEvent struct {
	ID      int64
	Time    int32
	Type    string
	Cat     string
	DB      string
	Table   string
	Message string
	Format  string
}

// maxNotification bounds a decompressed notification message: a gzip
// bomb in the log costs this much and no more.
const maxNotification = 64 << 20

// NotificationJSON decodes the message of a notification-log event, given
// its format: plain JSON (2.x, 3.x: "json-2.0"), or base64 of gzip (4.x:
// "gzip(json-2.0)"). It returns the message's top-level keys, or nil when
// the message is not one of these.
func NotificationJSON(message, format string) map[string]json.RawMessage {
	raw := []byte(message)
	if strings.HasPrefix(format, "gzip") {
		z, err := base64.StdEncoding.DecodeString(message)
		if err != nil {
			return nil
		}
		r, err := gzip.NewReader(bytes.NewReader(z))
		if err != nil {
			return nil
		}
		if raw, err = io.ReadAll(io.LimitReader(r, maxNotification)); err != nil {
			return nil
		}
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}
