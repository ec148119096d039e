// Package chaos runs hostile clients against an hmsproxy process while a
// well-behaved client measures it (issue 22: `make chaos`).
//
// Everything is in its test files: TestChaos starts the proxy binary in
// front of a demo metastore, then re-runs its own test binary twice, as
// the victim (the well-behaved client, a process of its own so that the
// attackers' goroutines never delay its timing) and as the attackers (a
// process at a lower CPU priority, as attackers on other hosts would
// be). It is skipped unless HMSPROXY_CHAOS=1; see chaos_test.go for the
// knobs.
package chaos
