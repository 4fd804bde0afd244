package egress

import "net/netip"

// Class describes the special-purpose range an address belongs to.
type Class struct {
	// Name is what the range is, e.g. "loopback" or "private (RFC 1918)".
	Name string
	// Range is the registry entry that matched.
	Range netip.Prefix
	// Embedded is the IPv4 address carried inside an IPv6 address
	// (IPv4-mapped, NAT64) when that is what made it special.
	Embedded netip.Addr
}

type special struct {
	prefix netip.Prefix
	name   string
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// specials4 and specials6 follow the IANA IPv4 and IPv6 Special-Purpose
// Address Registries (RFC 6890 and successors); more specific entries come
// first so that the most telling name wins.
var specials4 = []special{
	{mustPrefix("0.0.0.0/32"), "unspecified"},
	{mustPrefix("0.0.0.0/8"), "\"this network\" (RFC 791)"},
	{mustPrefix("10.0.0.0/8"), "private (RFC 1918)"},
	{mustPrefix("100.64.0.0/10"), "carrier-grade NAT (RFC 6598)"},
	{mustPrefix("127.0.0.0/8"), "loopback"},
	{mustPrefix("169.254.169.254/32"), "link-local cloud metadata"},
	{mustPrefix("169.254.0.0/16"), "link-local"},
	{mustPrefix("172.16.0.0/12"), "private (RFC 1918)"},
	{mustPrefix("192.0.0.0/24"), "IETF protocol assignment (RFC 6890)"},
	{mustPrefix("192.0.2.0/24"), "documentation (TEST-NET-1)"},
	{mustPrefix("192.88.99.0/24"), "6to4 relay anycast (RFC 7526)"},
	{mustPrefix("192.168.0.0/16"), "private (RFC 1918)"},
	{mustPrefix("198.18.0.0/15"), "benchmarking (RFC 2544)"},
	{mustPrefix("198.51.100.0/24"), "documentation (TEST-NET-2)"},
	{mustPrefix("203.0.113.0/24"), "documentation (TEST-NET-3)"},
	{mustPrefix("224.0.0.0/4"), "multicast"},
	{mustPrefix("255.255.255.255/32"), "broadcast"},
	{mustPrefix("240.0.0.0/4"), "reserved (RFC 1112)"},
}

var specials6 = []special{
	{mustPrefix("::/128"), "unspecified"},
	{mustPrefix("::1/128"), "loopback"},
	{mustPrefix("::/96"), "IPv4-compatible IPv6 (deprecated)"},
	{mustPrefix("64:ff9b:1::/48"), "local-use NAT64 (RFC 8215)"},
	{mustPrefix("100::/64"), "discard-only (RFC 6666)"},
	{mustPrefix("2001:db8::/32"), "documentation (RFC 3849)"},
	{mustPrefix("2001::/32"), "Teredo (RFC 4380)"},
	{mustPrefix("2001::/23"), "IETF protocol assignment (RFC 2928)"},
	{mustPrefix("2002::/16"), "6to4 (RFC 3056)"},
	{mustPrefix("3fff::/20"), "documentation (RFC 9637)"},
	{mustPrefix("5f00::/16"), "segment routing (RFC 9602)"},
	{mustPrefix("fc00::/7"), "unique local (RFC 4193)"},
	{mustPrefix("fe80::/10"), "link-local"},
	{mustPrefix("fec0::/10"), "site-local (deprecated)"},
	{mustPrefix("ff00::/8"), "multicast"},
}

// nat64 is the well-known NAT64 prefix (RFC 6052): its addresses reach
// the IPv4 address in their last 32 bits.
var nat64 = mustPrefix("64:ff9b::/96")

// Classify reports whether addr is special-purpose (not a public unicast
// address) and which range it is in. IPv4-mapped and NAT64 IPv6 addresses
// are judged by the IPv4 address they carry.
func Classify(addr netip.Addr) (Class, bool) {
	addr = addr.WithZone("")
	switch {
	case !addr.IsValid():
		return Class{Name: "invalid"}, true
	case addr.Is4():
		return lookup(specials4, addr)
	case addr.Is4In6():
		v4 := addr.Unmap()
		c, ok := lookup(specials4, v4)
		if ok {
			c.Name += " (IPv4-mapped IPv6)"
			c.Embedded = v4
		}
		return c, ok
	case nat64.Contains(addr):
		b := addr.As16()
		v4 := netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
		c, ok := lookup(specials4, v4)
		if ok {
			c.Name += " (via NAT64)"
			c.Embedded = v4
		}
		return c, ok
	}
	return lookup(specials6, addr)
}

func lookup(table []special, a netip.Addr) (Class, bool) {
	for _, s := range table {
		if s.prefix.Contains(a) {
			return Class{Name: s.name, Range: s.prefix}, true
		}
	}
	return Class{}, false
}
