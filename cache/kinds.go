package cache

import (
	"fmt"
	"time"

	"github.com/hmsproxy/hmsproxy/thrift/hms"
)

// Overrides are a configuration's changes to DefaultKinds: first the
// settings of the whole cache, then those of single kinds. The proxy and
// the bench's replay read them from the same keys, and must cache alike.
type Overrides struct {
	// TTL, when positive, is the TTL of every kind cached by default.
	TTL time.Duration
	// RefreshAfter, when positive, is the refresh-ahead age of every kind
	// cached by default.
	RefreshAfter time.Duration
	// NoNegative turns negative caching off for every kind.
	NoNegative bool
	// Kinds are the overrides of single kinds, by name (hms.ParseKind).
	Kinds map[string]KindOverride
}

// KindOverride changes one kind's policy; a nil field leaves it as the
// whole-cache settings made it.
type KindOverride struct {
	// TTL of the kind; zero or negative: the kind is not cached.
	TTL *time.Duration
	// RefreshAfter of the kind; zero or negative: no refresh-ahead.
	RefreshAfter *time.Duration
	// Negative caching of the kind.
	Negative *bool
}

// Resolve is DefaultKinds with o applied.
func (o Overrides) Resolve() ([NumKinds]KindConfig, error) {
	k := DefaultKinds()
	for i := range k {
		if k[i].TTL == 0 {
			continue
		}
		if o.TTL > 0 {
			k[i].TTL = o.TTL
		}
		if o.RefreshAfter > 0 {
			k[i].RefreshAfter = o.RefreshAfter
		}
		if o.NoNegative {
			k[i].Negative = false
		}
	}
	for name, ko := range o.Kinds {
		kind, ok := hms.ParseKind(name)
		if !ok {
			return k, fmt.Errorf("cache.kinds: unknown kind %q", name)
		}
		if ko.TTL != nil {
			k[kind].TTL = max(*ko.TTL, 0)
		}
		if ko.RefreshAfter != nil {
			k[kind].RefreshAfter = max(*ko.RefreshAfter, 0)
		}
		if ko.Negative != nil {
			k[kind].Negative = *ko.Negative
		}
	}
	return k, nil
}
