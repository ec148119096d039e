// Package peers bounds what each client host may hold at a listener: its
// connections (Key, Counter), and its handshakes in progress, which a
// Listener runs off the accept loop, each within a deadline, per host
// and in total.
package peers

import (
	"net"
	"net/netip"
)

// Key is the host a connection comes from: an IPv4 address, or the /64
// network of an IPv6 address (a host is handed a whole /64, and may pick
// any address in it). Comparable, and a map key that costs no
// allocation. The zero Key stands for every address that is not IP (an
// in-process pipe, a Unix socket).
type Key struct{ a netip.Addr }

// KeyOf is the Key of a connection's remote address.
func KeyOf(a net.Addr) Key {
	var ip netip.Addr
	switch a := a.(type) {
	case *net.TCPAddr:
		ip, _ = netip.AddrFromSlice(a.IP)
	case *net.UDPAddr:
		ip, _ = netip.AddrFromSlice(a.IP)
	default:
		return Key{}
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, err := ip.Prefix(64)
		if err != nil {
			return Key{}
		}
		ip = p.Addr()
	}
	return Key{ip}
}

// String is the address, or the network ("2001:db8::/64"), for logs.
func (k Key) String() string {
	switch {
	case !k.a.IsValid():
		return "local"
	case k.a.Is6():
		return netip.PrefixFrom(k.a, 64).String()
	}
	return k.a.String()
}

// Counter counts what each Key holds. The zero value is ready. It is not
// safe for concurrent use: its owner's lock guards it.
type Counter struct {
	m map[Key]int
}

// N is what k holds.
func (c *Counter) N(k Key) int { return c.m[k] }

// Add counts one more for k.
func (c *Counter) Add(k Key) {
	if c.m == nil {
		c.m = map[Key]int{}
	}
	c.m[k]++
}

// Done counts one less for k; a Key that holds nothing is forgotten, so
// the counter is as large as the hosts that hold something.
func (c *Counter) Done(k Key) {
	if n := c.m[k]; n > 1 {
		c.m[k] = n - 1
	} else {
		delete(c.m, k)
	}
}

// Len is how many Keys hold something.
func (c *Counter) Len() int { return len(c.m) }
