package hedgerueidis

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/redis/rueidis"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/cfgerr"
)

// ErrInvalidConfig is matched (errors.Is) by every error New and
// NewFromOptions return for a mistaken configuration. The error lists
// each mistake on a line of its own, naming the argument or field at fault
// and what to do. Mistakes hedge.New finds in Config.Hedge are wrapped, so
// errors.Is(err, hedge.ErrInvalidConfig) holds for them too.
var ErrInvalidConfig = errors.New("hedgerueidis: invalid configuration")

// validate checks the clients (named arg in messages) and cfg, and makes
// the Hedger. It returns each client's address, for stats and errors.
func validate(arg string, clients []rueidis.Client, cfg Config) (*hedge.Hedger, []string, error) {
	var errs []error
	n := len(clients)
	switch n {
	case 0:
		errs = append(errs, fmt.Errorf("hedgerueidis: %s is empty: give one entry per replica, two or more, or hedges have nowhere to go", arg))
	case 1:
		errs = append(errs, fmt.Errorf("hedgerueidis: %s has a single entry: a hedge needs another replica to go to; list every replica (two or more), or use the rueidis.Client on its own", arg))
	}
	addrs, serverErrs := checkServers(arg, clients)
	errs = append(errs, serverErrs...)
	if cfg.Primary < 0 || (n > 0 && cfg.Primary >= n) {
		use := "a non-negative index into " + arg
		if n > 0 {
			use = fmt.Sprintf("0 to %d", n-1)
		}
		errs = append(errs, fmt.Errorf("hedgerueidis: Config.Primary = %d is not an index of %s: use %s", cfg.Primary, arg, use))
	}
	if cfg.Hedge.Replicas != 0 && cfg.Hedge.Replicas != n {
		errs = append(errs, fmt.Errorf("hedgerueidis: Config.Hedge.Replicas = %d but %s has %d entries: leave it 0, it is set to the number of clients", cfg.Hedge.Replicas, arg, n))
	}
	hc := cfg.Hedge
	hc.Replicas = n
	if n < 2 {
		// Reported above: check the rest of Config.Hedge as for an
		// unknown number of replicas.
		hc.Replicas = 0
		hc.Picker.Zones = nil
	}
	h, err := hedge.New(hc)
	if err != nil {
		errs = append(errs, fmt.Errorf("hedgerueidis: Config.Hedge: %w", err))
	}
	if len(errs) > 0 {
		return nil, nil, &cfgerr.Error{Errs: errs, Sentinel: ErrInvalidConfig}
	}
	return h, addrs, nil
}

// checkServers reports nil entries, a client given twice, a client over
// several servers (a cluster) and two clients certainly connected to the
// same server. It returns each client's address.
func checkServers(arg string, clients []rueidis.Client) ([]string, []error) {
	var errs []error
	addrs := make([]string, len(clients))
	seenClient := map[rueidis.Client]int{}
	seenServer := map[string]int{}
	for i, rc := range clients {
		if rc == nil {
			errs = append(errs, fmt.Errorf("hedgerueidis: %s[%d] is nil: give one entry per replica", arg, i))
			continue
		}
		if j, ok := seenClient[rc]; ok {
			errs = append(errs, fmt.Errorf("hedgerueidis: %s[%d] is the same rueidis.Client as %s[%d]: give one client per replica", arg, i, arg, j))
			continue
		}
		seenClient[rc] = i
		nodes := make([]string, 0, 1)
		for addr := range rc.Nodes() {
			nodes = append(nodes, addr)
		}
		sort.Strings(nodes)
		if len(nodes) != 1 {
			errs = append(errs, fmt.Errorf("hedgerueidis: %s[%d] reaches %d servers (%s): give one client per standalone server, not a cluster client", arg, i, len(nodes), strings.Join(nodes, ", ")))
			continue
		}
		addrs[i] = nodes[0]
		key := serverKey(nodes[0])
		if j, ok := seenServer[key]; ok {
			errs = append(errs, fmt.Errorf("hedgerueidis: %s[%d] (%s) and %s[%d] (%s) are the same server: a hedge sent from one to the other would wait behind the very stall it escapes; give each replica's address once",
				arg, i, nodes[0], arg, j, addrs[j]))
			continue
		}
		seenServer[key] = i
	}
	return addrs, errs
}

// serverKey returns a canonical form of a host:port address, equal for two
// addresses only when they certainly name the same server: the host's
// case, a trailing dot, an IP address's spelling (a v4-mapped address and
// its v4 form) and leading zeros of the port make no difference; different
// names of one host are kept apart.
func serverKey(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		host, port = strings.Trim(addr, "[]"), "6379"
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if ip, err := netip.ParseAddr(host); err == nil {
		host = ip.Unmap().String()
	}
	if p, err := strconv.ParseUint(port, 10, 16); err == nil {
		port = strconv.FormatUint(p, 10)
	}
	return net.JoinHostPort(host, port)
}
