// Package layout checks the module's shape: its import graph against the
// layer table in docs/architecture.md, and the length of its functions; it
// has no code, only its tests.
package layout
