package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tailcut/hedge/fleet"
	"github.com/tailcut/hedge/fleet/fleetetcd"
)

func init() { register(policyCommand) }

var policyCommand = &command{
	name:    "policy",
	summary: "a fleet's hedging policy in etcd: validate, push, status, off, get",
	run:     runPolicy,
}

const policyUsage = `Usage:

	hedge policy validate FILE...
	hedge policy push   [--endpoints E] --service S FILE
	hedge policy status [--endpoints E] --service S
	hedge policy off    [--endpoints E] --service S --for 30m [--reason TEXT]
	hedge policy get    [--endpoints E] --service S

validate checks policy documents (JSON or YAML) and lists every mistake
with its fix: exit 0 when all are valid, 1 otherwise.
push validates the document, then writes it only if its version is above
the stored one and nobody pushed meanwhile.
status lists the pods that announced themselves: the version each runs,
and which have not applied the latest or run on a stale one.
off writes the stored document again with the kill switch set, as a new
version: every Hedger off until the time is up (--for 0 lifts it).
get prints the stored document.

The etcd endpoints default to $HEDGE_ETCD_ENDPOINTS, else
http://127.0.0.1:2379. docs/fleet.md describes the document.
`

func runPolicy(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, policyUsage)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	switch args[0] {
	case "validate":
		return policyValidate(args[1:], stdout, stderr)
	case "push", "status", "off", "get":
		return policyStore(args[0], args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "hedge policy: unknown subcommand %q: use validate, push, status, off or get\n\n%s", args[0], policyUsage)
	return exitUsage
}

// mistakes flattens an error joined with errors.Join into its parts.
func mistakes(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var all []error
		for _, e := range j.Unwrap() {
			all = append(all, mistakes(e)...)
		}
		return all
	}
	return []error{err}
}

func policyValidate(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("policy validate", "FILE...", stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() == 0 {
		return usageError(stderr, "policy validate", errors.New("name the policy files to check: hedge policy validate FILE [FILE]"))
	}
	code := exitOK
	for _, file := range fs.Args() {
		data, err := os.ReadFile(file)
		if err != nil {
			fmt.Fprintf(stdout, "%s: %v\n", file, err)
			code = exitFailure
			continue
		}
		p, err := fleet.Parse(data)
		if err != nil {
			ms := mistakes(err)
			fmt.Fprintf(stdout, "%s: invalid, %d mistake(s); the whole document is refused:\n", file, len(ms))
			for _, m := range ms {
				fmt.Fprintf(stdout, "  %v\n", m)
			}
			code = exitFailure
			continue
		}
		fmt.Fprintf(stdout, "%s: valid: service %s, version %d%s\n", file, p.Service, p.Version, killNote(p, time.Now()))
	}
	return code
}

// killNote describes the document's kill switch, if set.
func killNote(p *fleet.Policy, now time.Time) string {
	if p.Kill == nil {
		return ""
	}
	s := ", kill switch until " + p.Kill.Until.UTC().Format(time.RFC3339)
	if !p.Killed(now) {
		s += " (expired)"
	}
	if p.Kill.Reason != "" {
		s += ": " + p.Kill.Reason
	}
	return s
}

func policyStore(sub string, args []string, stdout, stderr io.Writer) int {
	synopsis := map[string]string{
		"push":   "[--endpoints E] --service S FILE",
		"status": "[--endpoints E] --service S",
		"off":    "[--endpoints E] --service S --for 30m [--reason TEXT]",
		"get":    "[--endpoints E] --service S",
	}[sub]
	name := "policy " + sub
	fs := newFlags(name, synopsis, stderr)
	defEndpoints := os.Getenv("HEDGE_ETCD_ENDPOINTS")
	if defEndpoints == "" {
		defEndpoints = "http://127.0.0.1:2379"
	}
	endpoints := fs.String("endpoints", defEndpoints, "etcd endpoints, comma-separated")
	service := fs.String("service", "", "the service whose policy it is (required)")
	prefix := fs.String("prefix", fleetetcd.DefaultPrefix, "the key prefix of the fleet's keys in etcd")
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for etcd")
	var forD *time.Duration
	var reason *string
	if sub == "off" {
		forD = fs.Duration("for", 0, "how long every Hedger stays off, such as 30m; 0 lifts the switch (required)")
		reason = fs.String("reason", "", "why, for the status and the logs")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	var file string
	switch {
	case sub == "push" && fs.NArg() != 1:
		return usageError(stderr, name, errors.New("name one policy file: hedge policy push --service S FILE"))
	case sub == "push":
		file = fs.Arg(0)
	case fs.NArg() > 0:
		return usageError(stderr, name, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " ")))
	}
	if *service == "" {
		return usageError(stderr, name, errors.New("--service is required: the service whose policy it is"))
	}
	if sub == "off" {
		if !flagSet(fs, "for") {
			return usageError(stderr, name, errors.New("--for is required: how long every Hedger stays off, such as --for 30m (--for 0 lifts the switch)"))
		}
		if *forD < 0 {
			return usageError(stderr, name, fmt.Errorf("--for %v is negative: give how long, such as 30m, or 0 to lift the switch", *forD))
		}
	}
	var doc []byte
	if sub == "push" {
		var err error
		if doc, err = os.ReadFile(file); err != nil {
			fmt.Fprintf(stderr, "hedge %s: %v\n", name, err)
			return exitFailure
		}
		// Validate before any connection, so that a mistake is reported
		// the same with the store down.
		if _, err := fleet.Parse(doc); err != nil {
			fmt.Fprintf(stderr, "hedge %s: %s: refused, nothing was written:\n", name, file)
			for _, m := range mistakes(err) {
				fmt.Fprintf(stderr, "  %v\n", m)
			}
			return exitFailure
		}
	}

	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(*endpoints, ","),
		DialTimeout: *timeout,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		fmt.Fprintf(stderr, "hedge %s: connecting to etcd at %s: %v: check --endpoints\n", name, *endpoints, err)
		return exitFailure
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	store := fleetetcd.Store{Client: cli, Prefix: *prefix}

	switch sub {
	case "push":
		rev, err := store.Push(ctx, *service, doc)
		if err != nil {
			return policyFailed(stderr, name, *endpoints, err)
		}
		p, _ := fleet.Parse(doc)
		fmt.Fprintf(stdout, "pushed %s: service %s, version %d, at revision %d of %s%s\n", file, *service, p.Version, rev, store.PolicyKey(*service), killNote(p, time.Now()))
		fmt.Fprintf(stdout, "pods apply it within their jitter; see them with: hedge policy status --service %s\n", *service)
	case "get":
		_, raw, rev, err := store.Get(ctx, *service)
		if raw == nil && err != nil {
			return policyFailed(stderr, name, *endpoints, err)
		}
		if raw == nil {
			fmt.Fprintf(stderr, "hedge %s: no policy for %s at %s: push one with hedge policy push --service %s FILE\n", name, *service, store.PolicyKey(*service), *service)
			return exitFailure
		}
		if err != nil {
			fmt.Fprintf(stderr, "hedge %s: warning: %v\n", name, err)
		}
		fmt.Fprintf(stderr, "# %s at revision %d\n", store.PolicyKey(*service), rev)
		stdout.Write(raw)
		if len(raw) > 0 && raw[len(raw)-1] != '\n' {
			fmt.Fprintln(stdout)
		}
	case "off":
		return policyOff(ctx, store, *service, *forD, *reason, name, *endpoints, stdout, stderr)
	case "status":
		return policyStatus(ctx, store, *service, name, *endpoints, stdout, stderr)
	}
	return exitOK
}

// policyFailed reports err of a store command and returns exitFailure.
func policyFailed(stderr io.Writer, name, endpoints string, err error) int {
	switch {
	case errors.Is(err, fleetetcd.ErrConflict):
		fmt.Fprintf(stderr, "hedge %s: lost, nothing was written: %v\n", name, err)
	case errors.Is(err, fleet.ErrInvalidDocument) || errors.Is(err, fleetetcd.ErrWrongService):
		fmt.Fprintf(stderr, "hedge %s: refused, nothing was written:\n", name)
		for _, m := range mistakes(err) {
			fmt.Fprintf(stderr, "  %v\n", m)
		}
	case errors.Is(err, context.DeadlineExceeded):
		fmt.Fprintf(stderr, "hedge %s: etcd at %s did not answer in time (%v): check --endpoints, that etcd runs and has a leader, or give a longer --timeout\n", name, endpoints, err)
	default:
		fmt.Fprintf(stderr, "hedge %s: %v\n", name, err)
	}
	return exitFailure
}

// policyOff writes the stored document again, with the kill switch set
// for d (or lifted when d is 0), as the next version. A push that lands
// meanwhile is read, and the switch set on it, up to a few times.
func policyOff(ctx context.Context, store fleetetcd.Store, service string, d time.Duration, reason, name, endpoints string, stdout, stderr io.Writer) int {
	var err error
	for range 3 {
		var (
			p   *fleet.Policy
			raw []byte
		)
		p, raw, _, err = store.Get(ctx, service)
		if raw != nil && err != nil {
			fmt.Fprintf(stderr, "hedge %s: %v: push a valid document first (hedge policy push), then switch it off\n", name, err)
			return exitFailure
		}
		if err != nil {
			return policyFailed(stderr, name, endpoints, err)
		}
		if p == nil {
			if d == 0 {
				fmt.Fprintf(stderr, "hedge %s: no policy for %s, so no kill switch to lift\n", name, service)
				return exitOK
			}
			p = &fleet.Policy{Service: service}
		}
		p.Version++
		now := time.Now()
		if d == 0 {
			p.Kill = nil
		} else {
			p.Kill = &fleet.Kill{Until: now.Add(d).UTC().Truncate(time.Second), Reason: reason}
		}
		doc, merr := p.Marshal()
		if merr != nil {
			fmt.Fprintf(stderr, "hedge %s: %v\n", name, merr)
			return exitFailure
		}
		var rev int64
		rev, err = store.Push(ctx, service, doc)
		if errors.Is(err, fleetetcd.ErrConflict) {
			continue // someone pushed meanwhile: set the switch on theirs
		}
		if err != nil {
			return policyFailed(stderr, name, endpoints, err)
		}
		if d == 0 {
			fmt.Fprintf(stdout, "%s: kill switch lifted, as version %d at revision %d; the rest of the document applies\n", service, p.Version, rev)
		} else {
			fmt.Fprintf(stdout, "%s: every Hedger off until %s (%v), as version %d at revision %d\n", service, p.Kill.Until.Format(time.RFC3339), d, p.Version, rev)
			fmt.Fprintf(stdout, "pods apply it within their jitter; lift it early with: hedge policy off --service %s --for 0\n", service)
		}
		return exitOK
	}
	return policyFailed(stderr, name, endpoints, err)
}

func policyStatus(ctx context.Context, store fleetetcd.Store, service, name, endpoints string, stdout, stderr io.Writer) int {
	p, raw, rev, err := store.Get(ctx, service)
	if raw == nil && err != nil {
		return policyFailed(stderr, name, endpoints, err)
	}
	pods, lerr := store.List(ctx, service)
	if lerr != nil {
		return policyFailed(stderr, name, endpoints, lerr)
	}
	now := time.Now()
	latest := int64(-1)
	switch {
	case raw == nil:
		fmt.Fprintf(stdout, "%s: no policy at %s: pods run the Config in their code\n", service, store.PolicyKey(service))
	case err != nil:
		fmt.Fprintf(stdout, "%s: the stored document (revision %d) is refused by every pod: %v\n", service, rev, err)
	default:
		latest = p.Version
		fmt.Fprintf(stdout, "%s: version %d at revision %d of %s%s\n", service, p.Version, rev, store.PolicyKey(service), killNote(p, now))
	}
	if len(pods) == 0 {
		fmt.Fprintf(stdout, "no pods announced themselves under %s\n", store.PodsPrefix(service))
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tVERSION\tSTATE\tAPPLIED\tSOURCE\tERROR")
	var behind, stale []string
	onLatest := 0
	for _, ps := range pods {
		applied := "-"
		if !ps.Applied.IsZero() {
			applied = ps.Applied.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", ps.Instance, ps.Version, ps.State, applied, ps.Source, ps.Error)
		switch {
		case latest >= 0 && ps.Version == latest && ps.State == "applied":
			onLatest++
		case latest >= 0 && ps.Version != latest:
			behind = append(behind, fmt.Sprintf("%s (version %d)", ps.Instance, ps.Version))
		}
		if ps.State == "stale" || ps.State == "fallback" {
			stale = append(stale, fmt.Sprintf("%s (%s)", ps.Instance, ps.State))
		}
	}
	tw.Flush()
	if latest >= 0 {
		fmt.Fprintf(stdout, "%d of %d pods run version %d\n", onLatest, len(pods), latest)
	}
	if len(behind) > 0 {
		fmt.Fprintf(stdout, "not on the latest: %s\n", strings.Join(behind, ", "))
	}
	if len(stale) > 0 {
		fmt.Fprintf(stdout, "cut off from the store: %s\n", strings.Join(stale, ", "))
	}
	return exitOK
}
