package try

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/bench"
)

// memNet is an in-memory network of HTTP servers, by host:port, for runs
// in a synctest bubble: its connections are net.Pipes, whose blocking the
// bubble sees, where a socket's would stall its clock.
type memNet struct {
	mu        sync.Mutex
	listeners map[string]*memListener
	servers   []*http.Server
	wg        sync.WaitGroup
}

type memListener struct {
	addr  string
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *memListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *memListener) Addr() net.Addr { return memAddr(l.addr) }

type memAddr string

func (a memAddr) Network() string { return "mem" }
func (a memAddr) String() string  { return string(a) }

// serve starts a server of h at host:port on the network.
func (n *memNet) serve(hostport string, h http.Handler) {
	l := &memListener{addr: hostport, conns: make(chan net.Conn), done: make(chan struct{})}
	srv := &http.Server{Handler: h}
	n.mu.Lock()
	if n.listeners == nil {
		n.listeners = map[string]*memListener{}
	}
	n.listeners[hostport] = l
	n.servers = append(n.servers, srv)
	n.mu.Unlock()
	n.wg.Go(func() { srv.Serve(l) })
}

func (n *memNet) dial(ctx context.Context, _, addr string) (net.Conn, error) {
	n.mu.Lock()
	l := n.listeners[addr]
	n.mu.Unlock()
	if l == nil {
		return nil, &net.OpError{Op: "dial", Net: "mem", Err: net.UnknownNetworkError(addr)}
	}
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
	case <-ctx.Done():
	}
	client.Close()
	server.Close()
	return nil, &net.OpError{Op: "dial", Net: "mem", Err: net.ErrClosed}
}

// close stops every server and waits for them.
func (n *memNet) close() {
	for _, s := range n.servers {
		s.Close()
	}
	n.wg.Wait()
}

// A stall that holds every in-flight slot does not make the load burst
// when it ends: the arrivals due during it are dropped and counted, and
// no span holds more requests than the rate allows, plus one. The replicas
// answer at once except from 2 s to 10 s, when they hold every request
// until a channel releases them all; the clock is synctest's.
func TestStallDropsArrivalsNoBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu      sync.Mutex
			got     []time.Duration // when each request reached a replica
			stalled atomic.Bool
			release = make(chan struct{})
		)
		start := time.Now()
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			got = append(got, time.Since(start))
			mu.Unlock()
			if stalled.Load() {
				<-release
			}
			time.Sleep(time.Millisecond) // a latency the bootstrap can divide by
			w.Write([]byte("ok\n"))
		})
		var mn memNet
		defer mn.close()
		mn.serve("a.test:80", h)
		mn.serve("b.test:80", h)
		once := Arm{Name: "once", Doc: "a second unhedged arm", Config: constantConfig(hedge.Config{MaxAttempts: 1})}
		o := Options{
			Replicas: []string{"http://a.test:80", "http://b.test:80"}, Targets: gets("/x"), Arms: []Arm{arms(t, "none,default")[0], once},
			Rate: 50, Duration: 14 * time.Second, MaxInFlight: 4, Timeout: 30 * time.Second, Seed: 1, Resamples: 100,
			hooks: testHooks{timerPacing: true, dial: mn.dial},
		}
		go func() {
			time.Sleep(2*time.Second - time.Millisecond)
			stalled.Store(true)
			time.Sleep(8 * time.Second)
			stalled.Store(false)
			close(release)
		}()
		res, err := Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		sent := slices.Clone(got)
		mu.Unlock()
		slices.Sort(sent)

		// No window of 100 ms or of 1 s holds more than the rate allows,
		// plus one.
		for _, w := range []time.Duration{100 * time.Millisecond, time.Second} {
			allowed := int(o.Rate*w.Seconds()) + 1
			for i := range sent {
				j, _ := slices.BinarySearch(sent, sent[i]+w)
				if n := j - i; n > allowed {
					t.Fatalf("%d requests in the %v from %v: the rate of %g/s allows %d", n, w, sent[i], o.Rate, allowed)
				}
			}
		}
		// Every arrival was sent or dropped, and the drops are counted:
		// 700 arrivals in 14 s at 50/s.
		arrivals := int(o.Rate * o.Duration.Seconds())
		if res.Sent != len(sent) || res.Sent+res.DroppedInFlight+res.DroppedLate != arrivals {
			t.Errorf("sent %d (the replicas saw %d), dropped %d in flight and %d late; want %d arrivals in all", res.Sent, len(sent), res.DroppedInFlight, res.DroppedLate, arrivals)
		}
		// The stall held the four slots for 8 s: about 400 arrivals.
		if res.DroppedInFlight < 390 || res.DroppedLate != 0 {
			t.Errorf("dropped %d in flight, %d late; want about 400 in flight, none late", res.DroppedInFlight, res.DroppedLate)
		}
		var sum strings.Builder
		res.WriteSummary(&sum)
		var md strings.Builder
		bw := bufio.NewWriter(&md)
		res.writeMarkdown(bw)
		bw.Flush()
		js, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		for name, s := range map[string]string{"summary": sum.String(), "report.md": md.String(), "results.json": string(js)} {
			if !strings.Contains(s, "dropped") {
				t.Errorf("%s does not say arrivals were dropped:\n%s", name, s)
			}
		}
	})
}

// An arrival is sent when its slot can be had within a gap of its time,
// and dropped otherwise: late dispatcher or slots held, each counted as
// such.
func TestAdmit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const gap = 20 * time.Millisecond
		r := &runner{o: Options{hooks: testHooks{timerPacing: true}}}
		p := &bench.Pacer{Start: time.Now()}
		sem := make(chan struct{}, 1)
		ctx := context.Background()
		if why, _ := r.admit(ctx, p, sem, 0, gap); why != admitted {
			t.Errorf("on time, a slot free: %q, want admitted", why)
		}
		// The slot is held: freed 15 ms on, the arrival goes then.
		go func() { time.Sleep(15 * time.Millisecond); <-sem }()
		if why, lag := r.admit(ctx, p, sem, 0, gap); why != admitted || lag != 15*time.Millisecond {
			t.Errorf("slot freed within the gap: %q, %v late; want admitted, 15ms late", why, lag)
		}
		// Held for the whole gap: dropped at its end.
		if why, lag := r.admit(ctx, p, sem, 15*time.Millisecond, gap); why != dropInFlight || lag != gap {
			t.Errorf("slot held past the gap: %q, %v late; want %q after %v", why, lag, dropInFlight, gap)
		}
		<-sem
		// The dispatcher reaches an arrival more than a gap after its time.
		time.Sleep(time.Second)
		if why, lag := r.admit(ctx, p, sem, 500*time.Millisecond, gap); why != dropLate || lag != 535*time.Millisecond {
			t.Errorf("reached late: %q, %v late; want %q, 535ms", why, lag, dropLate)
		}
		if len(sem) != 0 {
			t.Errorf("a dropped arrival holds a slot")
		}
	})
}
