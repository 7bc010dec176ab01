package vocab

import (
	"net"
	"regexp"
	"strconv"
	"strings"
)

// NFS client forms of exports(5), checked by NFSClientError.
var (
	// nfsNetgroup is @name: NIS netgroup names are letters, digits, _ . -.
	nfsNetgroup = regexp.MustCompile(`^@[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`)
	// nfsHostLabel is one dot-separated label of a host name, where
	// exports(5) also allows the wildcards * and ? and character classes
	// in brackets ([0-9], [!a-c]).
	nfsHostLabel  = regexp.MustCompile(`^(?:[A-Za-z0-9_*?]|\[!?[A-Za-z0-9-]+\])(?:[A-Za-z0-9_*?-]|\[!?[A-Za-z0-9-]+\])*$`)
	nfsDigitsDots = regexp.MustCompile(`^[0-9.]+$`)
)

// maxHostLen is the longest DNS name; maxLabelLen its longest label.
const (
	maxHostLen  = 253
	maxLabelLen = 63
)

// NFSClientError says why s is not one NFS client as exports(5) writes
// it, or returns "" when it is: * (everybody), a host name (whose labels
// may hold the wildcards * and ? and [character classes]), an IPv4 or
// IPv6 address, a network (address/prefix length, or IPv4
// address/netmask), or a netgroup (@name). Anything else — spaces,
// commas, parentheses, slashes outside a network, empty or .. labels —
// could change the meaning of the exports line it is written into.
func NFSClientError(s string) string {
	switch {
	case s == "*":
		return ""
	case s == "":
		return "is empty"
	case len(s) > maxHostLen:
		return "is longer than 253 characters"
	case strings.HasPrefix(s, "@"):
		if !nfsNetgroup.MatchString(s) {
			return "is not a netgroup (@ and a name of letters, digits, _ . -)"
		}
		return ""
	}
	if addr, mask, isNet := strings.Cut(s, "/"); isNet {
		if !validNetwork(addr, mask) {
			return "is not a network (address/prefix length or IPv4 address/netmask)"
		}
		return ""
	}
	if net.ParseIP(s) != nil {
		return ""
	}
	if nfsDigitsDots.MatchString(s) {
		return "is not a valid IP address"
	}
	for _, label := range strings.Split(s, ".") {
		if len(label) > maxLabelLen || !nfsHostLabel.MatchString(label) {
			return "is not a host name, address, network, netgroup or * (labels of letters, digits, - and _, " +
				"wildcards * ? [..], separated by single dots)"
		}
	}
	return ""
}

// validNetwork reports whether addr/mask is a network: an address with a
// prefix length in range, or an IPv4 address with a contiguous netmask.
func validNetwork(addr, mask string) bool {
	ip := net.ParseIP(addr)
	if ip == nil {
		return false
	}
	bits := 128
	if ip.To4() != nil {
		bits = 32
	}
	if n, err := strconv.Atoi(mask); err == nil && mask == strconv.Itoa(n) {
		return n >= 0 && n <= bits
	}
	m := net.ParseIP(mask).To4()
	if m == nil || bits != 32 {
		return false
	}
	_, size := net.IPMask(m).Size()
	return size == 32 // Size is 0, 0 for a mask that is not contiguous
}
