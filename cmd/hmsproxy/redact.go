package main

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
)

// credentials matches the userinfo of a URL inside any text, up to the
// last '@' before the host, so a password holding a raw '@' is caught
// whole. Error texts quote URLs ("parse \"redis://:pw@h:x\": ..."), so a
// quote ends it too.
var credentials = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.\-]*://)([^/?#\s"']*)@`)

// redact hides the credentials of every URL in s: "redis://:pw@host"
// becomes "redis://:xxxxx@host", "redis://user:pw@host"
// "redis://user:xxxxx@host", and a bare "redis://token@host"
// "redis://xxxxx@host" (as url.URL.Redacted, which needs a URL that parses).
func redact(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	return credentials.ReplaceAllStringFunc(s, func(m string) string {
		sub := credentials.FindStringSubmatch(m)
		user, _, hasPassword := strings.Cut(sub[2], ":")
		if !hasPassword {
			return sub[1] + "xxxxx@"
		}
		return sub[1] + user + ":xxxxx@"
	})
}

// redactingHandler hides URL credentials in every log message and
// attribute, whatever logs it: an error that quotes a URL is caught too.
type redactingHandler struct{ slog.Handler }

func (h redactingHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, redact(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(a))
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h redactingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = redactAttr(a)
	}
	return redactingHandler{h.Handler.WithAttrs(red)}
}

func (h redactingHandler) WithGroup(name string) slog.Handler {
	return redactingHandler{h.Handler.WithGroup(name)}
}

func redactAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, redact(v.String()))
	case slog.KindGroup:
		g := v.Group()
		red := make([]any, len(g))
		for i, ga := range g {
			red[i] = redactAttr(ga)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, redact(x.Error()))
		case fmt.Stringer:
			return slog.String(a.Key, redact(x.String()))
		case []string:
			red := make([]string, len(x))
			for i, s := range x {
				red[i] = redact(s)
			}
			return slog.Any(a.Key, red)
		default:
			if s := fmt.Sprint(x); strings.Contains(s, "://") {
				return slog.String(a.Key, redact(s))
			}
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
