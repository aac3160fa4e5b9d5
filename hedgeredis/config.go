package hedgeredis

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/cfgerr"
)

// ErrInvalidConfig is matched (errors.Is) by every error New and
// NewFromOptions return. The error itself lists each mistake on a line of
// its own, with the path of the argument or field at fault and what to do.
var ErrInvalidConfig = errors.New("hedgeredis: invalid configuration")

// defaultPort is the port go-redis and Redis use when none is given.
const defaultPort = "6379"

// validate checks the clients (named arg in messages: "clients" for New,
// "opts" for NewFromOptions; nil entries are mistakes) and cfg, and makes
// the Hedger. It reports every mistake at once: its own checks and
// hedge.New's, the latter with their field paths from Config.
func validate(arg string, clients []*redis.Client, cfg Config) (*hedge.Hedger, error) {
	var errs []error
	n := len(clients)
	switch n {
	case 0:
		errs = append(errs, fmt.Errorf("hedgeredis: %s is empty: give one entry per replica, two or more, or hedges have nowhere to go", arg))
	case 1:
		errs = append(errs, fmt.Errorf("hedgeredis: %s has a single entry: a hedge needs another replica to go to, so none would ever be sent; list every replica (two or more), or use the *redis.Client on its own", arg))
	}
	errs = append(errs, checkServers(arg, clients)...)
	if cfg.Primary < 0 || (n > 0 && cfg.Primary >= n) {
		use := "a non-negative index into " + arg
		if n > 0 {
			use = fmt.Sprintf("0 to %d", n-1)
		}
		errs = append(errs, fmt.Errorf("hedgeredis: Config.Primary = %d is not an index of %s: use %s", cfg.Primary, arg, use))
	}
	if cfg.Hedge.Replicas != 0 && cfg.Hedge.Replicas != n {
		errs = append(errs, fmt.Errorf("hedgeredis: Config.Hedge.Replicas = %d but %s has %d entries: leave it 0, it is set to the number of clients", cfg.Hedge.Replicas, arg, n))
	}

	hc := cfg.Hedge
	hc.Replicas = n
	hc.ReapInBackground = true
	if n < 2 {
		// Reported above. Check the rest of Config.Hedge as for an
		// unknown number of replicas: a zone list cannot be matched
		// against a replica count that is itself wrong.
		hc.Replicas = 0
		hc.Picker.Zones = nil
	}
	h, err := hedge.New(hc)
	if err != nil {
		errs = append(errs, fromHedge(err, cfg.Hedge.Delay)...)
	}
	if len(errs) > 0 {
		return nil, &cfgerr.Error{Errs: errs, Sentinel: ErrInvalidConfig}
	}
	return h, nil
}

// checkServers reports nil entries, a client given twice, and two clients
// certainly connected to the same server: a hedge sent to the second would
// queue behind the stall it was sent to escape.
func checkServers(arg string, clients []*redis.Client) []error {
	var errs []error
	seenClient := map[*redis.Client]int{}
	seenServer := map[string]int{}
	for i, rc := range clients {
		if rc == nil {
			errs = append(errs, fmt.Errorf("hedgeredis: %s[%d] is nil: give one entry per replica", arg, i))
			continue
		}
		if j, ok := seenClient[rc]; ok {
			errs = append(errs, fmt.Errorf("hedgeredis: %s[%d] is the same *redis.Client as %s[%d]: give one client per replica", arg, i, arg, j))
			continue
		}
		seenClient[rc] = i
		o := rc.Options()
		key := serverKey(o.Network, o.Addr)
		if j, ok := seenServer[key]; ok {
			errs = append(errs, fmt.Errorf("hedgeredis: %s[%d] (%s) and %s[%d] (%s) are the same server: a hedge sent from one to the other would wait behind the very stall it escapes; give each replica's address once",
				arg, i, o.Addr, arg, j, clients[j].Options().Addr))
			continue
		}
		seenServer[key] = i
	}
	return errs
}

// serverKey returns a canonical form of a go-redis network and address,
// equal for two addresses only when they certainly name the same server:
// the host's case, an IP address's spelling (::1 and 0:0::1, a v4-mapped
// v6 address and its v4 form), a trailing dot, leading zeros of the port
// and an omitted default port make no difference. Different names of one
// host (localhost and 127.0.0.1) are kept apart: only DNS and the server's
// bindings could tell whether they meet.
func serverKey(network, addr string) string {
	switch network {
	case "unix":
		return "unix:" + filepath.Clean(addr)
	case "", "tcp4", "tcp6":
		network = "tcp"
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		// No port (go-redis's default dialer would refuse it, a custom
		// one may not): the default port.
		host, port = strings.TrimSuffix(strings.TrimPrefix(addr, "["), "]"), defaultPort
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if ip, err := netip.ParseAddr(host); err == nil {
		host = ip.Unmap().String()
	}
	if p, err := strconv.ParseUint(port, 10, 16); err == nil {
		port = strconv.FormatUint(p, 10)
	}
	return network + ":" + net.JoinHostPort(host, port)
}

// hedgeFieldError is a mistake hedge.New found in Config.Hedge, told with
// the path of the field from Config ("Config.Hedge.MaxAttempts") instead
// of from hedge.Config. It wraps hedge.New's error.
type hedgeFieldError struct {
	msg string
	err error
}

func (e *hedgeFieldError) Error() string { return e.msg }
func (e *hedgeFieldError) Unwrap() error { return e.err }

// fromHedge splits hedge.New's error into its mistakes and rewrites each
// message's field paths to start at Config.Hedge; a mistake naming the
// type of delay (a Percentile field, a negative Fixed) is put under
// Config.Hedge.Delay.
func fromHedge(err error, delay hedge.Delay) []error {
	var out []error
	for _, e := range cfgerr.Leaves(err, nil) {
		msg := qualify(strings.TrimPrefix(e.Error(), "hedge: "))
		switch {
		case strings.HasPrefix(msg, "Config.Hedge"):
		case delay != nil && namesType(msg, delay):
			msg = "Config.Hedge.Delay: " + msg
		default:
			msg = "Config.Hedge: " + msg
		}
		out = append(out, &hedgeFieldError{msg: "hedgeredis: " + msg, err: e})
	}
	return out
}

// qualify rewrites each path that starts at hedge.Config ("Config.X", or
// "Config" alone as a word) to start at Config.Hedge. "hedge.Config{...}"
// and other qualified names are left alone.
func qualify(msg string) string {
	const word = "Config"
	var b strings.Builder
	for {
		i := strings.Index(msg, word)
		if i < 0 {
			b.WriteString(msg)
			return b.String()
		}
		end := i + len(word)
		before := byte(' ')
		if i > 0 {
			before = msg[i-1]
		}
		after := byte(' ')
		if end < len(msg) {
			after = msg[end]
		}
		b.WriteString(msg[:end])
		if !isNamePart(before) && before != '.' && !isNamePart(after) && after != '{' {
			b.WriteString(".Hedge")
		}
		msg = msg[end:]
	}
}

func isNamePart(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// namesType reports whether msg starts with the name of v's type (without
// package or pointer), followed by a dot or a space: "Percentile.P = ...",
// "Fixed delay ...".
func namesType(msg string, v any) bool {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	name := t.Name()
	rest, ok := strings.CutPrefix(msg, name)
	return ok && name != "" && (strings.HasPrefix(rest, ".") || strings.HasPrefix(rest, " "))
}
