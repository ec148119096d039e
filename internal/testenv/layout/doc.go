// Package layout checks the module's import graph against the layer table
// in docs/architecture.md; it has no code, only its test.
package layout
