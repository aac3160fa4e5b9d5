package try

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgeredis"
)

// RedisOptions configures a Redis run: reads of keys, GET of one key or
// MGET of several, sent in turn. try never writes to Redis.
type RedisOptions struct {
	// Keys are the keys read, in turn. At least one.
	Keys []string
	// MGet is how many keys each request reads, with one MGET: 0 or 1
	// sends GET of one key.
	MGet int
	// Username and Password authenticate (AUTH), if Password is set.
	// Neither is ever written to any output.
	Username, Password string
}

// MaxMGet bounds RedisOptions.MGet.
const MaxMGet = 1000

func (ro *RedisOptions) validate() []error {
	var errs []error
	if len(ro.Keys) == 0 {
		errs = append(errs, fmt.Errorf("%w: no keys: give --keys FILE, one key a line", ErrInvalid))
	}
	if ro.MGet < 0 || ro.MGet > MaxMGet {
		errs = append(errs, fmt.Errorf("%w: --mget %d: use 0 to %d keys a request", ErrInvalid, ro.MGet, MaxMGet))
	}
	return errs
}

// redisAddr is a Redis replica.
type redisAddr struct {
	addr string // host:port in normal form
	db   int
	tls  bool
	host string
}

// parseRedisAddr reads redis://host:port[/db], rediss://host:port[/db]
// (TLS) or host:port. Credentials in the URL are refused: they would be
// echoed in the report.
func parseRedisAddr(s string) (redisAddr, error) {
	var a redisAddr
	hostport, shown := s, redactUser(s) // never echo what may be a password
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil {
			return a, fmt.Errorf("%q is not a URL: write redis://host:port", shown)
		}
		if u.User != nil {
			return a, fmt.Errorf("%q carries credentials in the URL: give the password with --redis-password-env instead", shown)
		}
		switch u.Scheme {
		case "redis":
		case "rediss":
			a.tls = true
		default:
			return a, fmt.Errorf("%q: write redis://host:port, rediss://host:port (TLS), or host:port", shown)
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return a, fmt.Errorf("%q: write redis://host:port[/db] alone, without a query", shown)
		}
		if p := strings.TrimPrefix(u.Path, "/"); p != "" {
			db, err := strconv.Atoi(p)
			if err != nil || db < 0 {
				return a, fmt.Errorf("%q: the path is the database number, such as redis://host:6379/2", shown)
			}
			a.db = db
		}
		hostport = u.Host
		if u.Port() == "" {
			hostport = net.JoinHostPort(u.Hostname(), "6379")
		}
	} else if strings.Contains(s, "@") {
		return a, fmt.Errorf("%q: write redis://host:port or host:port (credentials: --redis-password-env)", shown)
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil || host == "" {
		return a, fmt.Errorf("%q: write redis://host:port or host:port, such as 10.0.0.1:6379", shown)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return a, fmt.Errorf("%q: the port must be a number from 1 to 65535", shown)
	}
	a.host = host
	a.addr = net.JoinHostPort(strings.ToLower(host), port)
	return a, nil
}

// redisProto reads keys through hedgeredis.
type redisProto struct {
	o     *Options
	addrs []redisAddr
	op    string // GET or MGET
}

func newRedis(o *Options) (*redisProto, error) {
	p := &redisProto{o: o, op: "GET"}
	if o.Redis.MGet > 1 {
		p.op = "MGET"
	}
	for _, s := range o.Replicas {
		a, _ := parseRedisAddr(s) // Validate checked
		p.addrs = append(p.addrs, a)
	}
	return p, nil
}

func (p *redisProto) requests() (int, map[string]int) {
	return len(p.o.Redis.Keys), map[string]int{p.op: len(p.o.Redis.Keys)}
}

func (p *redisProto) close() {}

// redisClient is the client of one arm: a hedgeredis.Client over one
// go-redis client per replica, the first the primary (which try never
// writes to), each with a hook that records the copies.
type redisClient struct {
	p  *redisProto
	hc *hedgeredis.Client
}

func (p *redisProto) newClient(cfg hedge.Config) (sender, error) {
	opts := make([]*redis.Options, len(p.addrs))
	for j, a := range p.addrs {
		opts[j] = &redis.Options{
			Addr:     a.addr,
			DB:       a.db,
			Username: p.o.Redis.Username,
			Password: p.o.Redis.Password,
			// The request's deadline bounds each read; hedging, not
			// go-redis, sends a read again.
			ContextTimeoutEnabled: true,
			MaxRetries:            -1,
			DialerRetries:         1,
			DialTimeout:           5 * time.Second,
			ReadTimeout:           p.o.Timeout,
			WriteTimeout:          p.o.Timeout,
			PoolSize:              min(max(p.o.MaxInFlight, 10), 256),
			DisableIdentity:       true,
		}
		if a.tls {
			opts[j].TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: a.host}
		}
	}
	hc, err := hedgeredis.NewFromOptions(opts, hedgeredis.Config{Hedge: cfg})
	if err != nil {
		return nil, err
	}
	for j := range p.addrs {
		hc.Replica(j).AddHook(copyHook{replica: j})
	}
	return &redisClient{p: p, hc: hc}, nil
}

func (c *redisClient) close() { _ = c.hc.Close() }

func (c *redisClient) hedger() *hedge.Hedger { return c.hc.Hedger() }

// send reads key i, or the MGet keys from key i*MGet on.
func (c *redisClient) send(ctx context.Context, i int) outcome {
	keys := c.p.o.Redis.Keys
	var err error
	if n := c.p.o.Redis.MGet; n > 1 {
		group := make([]string, n)
		for k := range group {
			group[k] = keys[(i*n+k)%len(keys)]
		}
		err = c.hc.MGet(ctx, group...).Err()
	} else {
		err = c.hc.Get(ctx, keys[i%len(keys)]).Err()
	}
	var out outcome
	switch {
	case err == nil:
		out = outcome{status: "OK", answered: true}
	case errors.Is(err, redis.Nil):
		out = outcome{status: "nil", answered: true}
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return outcome{kind: kindTimeout, answered: true}
	case isRedisReply(err):
		out = outcome{status: "error reply", kind: "error reply", answered: true}
	case isConnErr(err):
		return outcome{kind: kindConnect}
	default:
		return outcome{kind: kindOther}
	}
	if tr := traceOf(ctx); tr != nil {
		tr.markFirstOK()
	}
	return out
}

// isRedisReply reports whether err is a reply of the server (redis.Nil,
// WRONGTYPE, ...) rather than of the transport.
func isRedisReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// replicaBusy reports whether err is a reply that says "not this
// replica, not now" (LOADING, BUSY, ...), which hedgeredis counts as a
// failed copy, not an answer.
func replicaBusy(err error) bool {
	for _, p := range []string{"LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return strings.Contains(err.Error(), "max number of clients reached")
}

// copyHook records the reads of one replica in the trace of their request.
// A copy's index is the order in which the copies of a request began.
type copyHook struct{ replica int }

// DialHook passes dials through.
func (copyHook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessPipelineHook passes pipelines through: try sends none.
func (copyHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// ProcessHook records each GET and MGET.
func (h copyHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		tr := traceOf(ctx)
		if tr == nil || (cmd.Name() != "get" && cmd.Name() != "mget") {
			return next(ctx, cmd)
		}
		slot := tr.begin(h.replica)
		err := next(ctx, cmd)
		ok := err == nil || (isRedisReply(err) && !replicaBusy(err))
		tr.end(slot, !ok, ok)
		return err
	}
}
