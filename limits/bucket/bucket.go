// Package bucket is a token bucket for one key, which its owner keeps in
// a map under its own lock, with the rate and burst it looks up per key.
package bucket

import "time"

// Bucket holds tokens refilled at a rate per second up to a burst. The
// owner serialises calls; the zero Bucket is empty.
type Bucket struct {
	tokens float64
	at     time.Time // when tokens was last brought up to date
}

// Full is a bucket holding burst tokens at now, as a key seen for the
// first time gets.
func Full(burst float64, now time.Time) *Bucket { return &Bucket{tokens: burst, at: now} }

// Take refills the bucket to now and spends one token if it holds one.
// A clock that went back refills nothing, then or when it comes forward
// again over time already counted.
func (b *Bucket) Take(now time.Time, rate, burst float64) bool {
	if el := now.Sub(b.at).Seconds(); el > 0 {
		b.tokens = min(burst, b.tokens+el*rate)
		b.at = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// Refilled reports whether the bucket is full again at now, so that
// forgetting it loses nothing: a new one starts full.
func (b *Bucket) Refilled(now time.Time, rate, burst float64) bool {
	return b.tokens+now.Sub(b.at).Seconds()*rate >= burst
}
