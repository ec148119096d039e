package peers

import (
	"net"
	"testing"
)

func TestKeyOf(t *testing.T) {
	tcp := func(s string) net.Addr { return &net.TCPAddr{IP: net.ParseIP(s), Port: 1234} }
	for _, tc := range []struct {
		name string
		a, b net.Addr
		same bool
		str  string // a's key
	}{
		{"ports aside", tcp("10.0.0.1"), &net.TCPAddr{IP: net.ParseIP("10.0.0.1"), Port: 9}, true, "10.0.0.1"},
		{"two IPv4 hosts", tcp("10.0.0.1"), tcp("10.0.0.2"), false, "10.0.0.1"},
		{"IPv4-mapped is IPv4", tcp("::ffff:10.0.0.1"), tcp("10.0.0.1"), true, "10.0.0.1"},
		{"one IPv6 /64", tcp("2001:db8:1:2::1"), tcp("2001:db8:1:2:ffff::9"), true, "2001:db8:1:2::/64"},
		{"two IPv6 /64s", tcp("2001:db8:1:2::1"), tcp("2001:db8:1:3::1"), false, "2001:db8:1:2::/64"},
		{"not IP", &net.UnixAddr{Name: "/tmp/s"}, dummy{}, true, "local"},
		{"IP and not IP", tcp("10.0.0.1"), dummy{}, false, "10.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ka, kb := KeyOf(tc.a), KeyOf(tc.b)
			if (ka == kb) != tc.same {
				t.Errorf("KeyOf(%v) == KeyOf(%v): %v; want %v", tc.a, tc.b, ka == kb, tc.same)
			}
			if got := ka.String(); got != tc.str {
				t.Errorf("KeyOf(%v).String() = %q; want %q", tc.a, got, tc.str)
			}
		})
	}
}

type dummy struct{}

func (dummy) Network() string { return "pipe" }
func (dummy) String() string  { return "pipe" }

func TestCounter(t *testing.T) {
	var c Counter
	a, b := KeyOf(&net.TCPAddr{IP: net.ParseIP("10.0.0.1")}), KeyOf(&net.TCPAddr{IP: net.ParseIP("10.0.0.2")})
	c.Add(a)
	c.Add(a)
	c.Add(b)
	if c.N(a) != 2 || c.N(b) != 1 || c.Len() != 2 {
		t.Fatalf("got a %d, b %d, %d keys; want 2, 1, 2", c.N(a), c.N(b), c.Len())
	}
	c.Done(a)
	c.Done(b)
	if c.N(a) != 1 || c.N(b) != 0 || c.Len() != 1 {
		t.Fatalf("got a %d, b %d, %d keys; want 1, 0, 1 (b forgotten)", c.N(a), c.N(b), c.Len())
	}
}
