package fleet

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tailcut/hedge"
)

// MaxDocument is the largest policy document [Parse] reads, in bytes. A
// policy for a few Hedgers and operations takes a few kilobytes.
const MaxDocument = 1 << 20

// All is the Hedger name whose rules apply to every Hedger of the
// [Watcher]; a Hedger's own entry overrides them field by field.
const All = "*"

// ErrInvalidDocument is matched by every error [Parse] returns: a
// document with a mistake is refused whole. Mistakes in a setting that a
// [hedge.Config] has too also match [hedge.ErrInvalidConfig].
var ErrInvalidDocument = errors.New("fleet: invalid policy document")

// ErrTooLarge is matched by the error [Parse] returns for a document of
// more than [MaxDocument] bytes.
var ErrTooLarge = errors.New("fleet: policy document too large")

// Policy is one service's policy document: the hedging rules of every
// pod that calls it, by Hedger name and operation. Its JSON form is its
// YAML form; docs/fleet.md describes each field.
type Policy struct {
	// Service is the service whose callers the document steers. A
	// [Watcher] refuses a document for another service.
	Service string `json:"service"`
	// Version grows with every change. A [Watcher] does not apply a
	// version at or below the one it runs.
	Version int64 `json:"version"`
	// Hedgers holds the rules by Hedger name, as given to
	// [Options.Hedgers]; [All] ("*") applies to every Hedger.
	Hedgers map[string]HedgerRules `json:"hedgers,omitempty"`
	// Kill, if set, turns every Hedger off until Kill.Until.
	Kill *Kill `json:"kill,omitempty"`
}

// HedgerRules is what a [Policy] sets for one Hedger: [Rules] for every
// operation, and rules for some operations over them.
type HedgerRules struct {
	Rules
	// Ops holds rules by operation class (the op of [hedge.Do]). A field
	// left out there takes the Hedger's.
	Ops map[string]Rules `json:"ops,omitempty"`
}

// Rules is one set of hedging rules. A field left out takes the value of
// the rules it is in (an operation's take its Hedger's, a Hedger's take
// those of [All]), and at the top the value of the Hedger's
// [hedge.Config].
type Rules struct {
	// Mode is "on", "shadow" or "off".
	Mode string `json:"mode,omitempty"`
	// Rollout is the share of pods, in [0, 1], that run in mode "on";
	// the others run in "shadow". A pod is in by a hash of its instance
	// name, so that the pods in a 10% rollout stay in at 50%.
	Rollout *float64 `json:"rollout,omitempty"`
	// Percentile is the live delay's percentile, in (0, 100).
	Percentile float64 `json:"percentile,omitempty"`
	// Budget is the hedge budget's ratio and burst ([hedge.NewBudget]).
	Budget *Budget `json:"budget,omitempty"`
	// MaxAttempts is the most copies of one request, 1 to
	// [hedge.HardMaxAttempts].
	MaxAttempts int `json:"maxAttempts,omitempty"`
	// MaxHedgesPerSecond caps the hedges one pod sends per second; 0 for
	// no cap.
	MaxHedgesPerSecond float64 `json:"maxHedgesPerSecond,omitempty"`
}

// Budget is a hedge budget: hedges on at most Ratio of requests, with
// bursts of Burst ([hedge.NewBudget]).
type Budget struct {
	Ratio float64 `json:"ratio"`
	Burst float64 `json:"burst"`
}

// Kill is the operator's switch: every Hedger off until Until, after
// which the rest of the document applies again.
type Kill struct {
	Until  time.Time `json:"until"`
	Reason string    `json:"reason,omitempty"`
}

// Parse reads a policy document, JSON or YAML, and validates it. It
// refuses unknown fields and documents over [MaxDocument] bytes
// ([ErrTooLarge]). The error lists every mistake, each with where it is
// and what to do, and matches [ErrInvalidDocument].
func Parse(data []byte) (*Policy, error) {
	if len(data) > MaxDocument {
		return nil, mistake("", fmt.Errorf("%w: over the limit of %d bytes: keep one service's document small (a few kilobytes is usual)", ErrTooLarge, MaxDocument))
	}
	js := data
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		var err error
		if js, err = yamlToJSON(data); err != nil {
			return nil, mistake("", fmt.Errorf("not valid YAML or JSON: %v: fix the syntax (run `hedge policy validate FILE`)", strings.TrimPrefix(err.Error(), "yaml: ")))
		}
	}
	p := new(Policy)
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(p); err != nil {
		return nil, mistake("", fmt.Errorf("%v: fix the document (see docs/fleet.md for its fields)", strings.TrimPrefix(err.Error(), "json: ")))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, mistake("", errors.New("more than one document: keep one policy per file or key"))
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// yamlToJSON turns a YAML document into JSON, so that one decoder, with
// one set of field names, reads both forms. YAML 1.2's core schema is
// used: "on" and "off" are strings, not booleans, and a key given twice
// is an error.
func yamlToJSON(data []byte) ([]byte, error) {
	var v any
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&v); err != nil {
		if err == io.EOF {
			return nil, errors.New("the document is empty")
		}
		return nil, err
	}
	var extra any
	if err := dec.Decode(&extra); err != io.EOF {
		return nil, errors.New("more than one YAML document: keep one policy per file or key")
	}
	return json.Marshal(v)
}

// Validate returns every mistake in p, as [Parse] does.
func (p *Policy) Validate() error {
	var errs []error
	add := func(where string, err error) { errs = append(errs, mistake(where, err)) }
	if p.Service == "" {
		add("service", errors.New("is empty: name the service whose callers this document steers"))
	}
	if p.Version < 1 {
		add("version", fmt.Errorf("is %d: use 1 or more, and raise it with every change", p.Version))
	}
	if p.Kill != nil && p.Kill.Until.IsZero() {
		add("kill.until", errors.New("is missing: give the time the switch ends, e.g. 2026-12-07T16:30:00Z (`hedge policy off --for 30m` writes it)"))
	}
	for _, name := range slices.Sorted(maps.Keys(p.Hedgers)) {
		hr := p.Hedgers[name]
		where := fmt.Sprintf("hedgers.%s", quote(name))
		if name == "" {
			add(where, errors.New("has an empty Hedger name: use the name given to the Watcher, or \"*\" for every Hedger"))
		}
		errs = append(errs, hr.Rules.check(where)...)
		for _, op := range slices.Sorted(maps.Keys(hr.Ops)) {
			w := fmt.Sprintf("%s.ops.%s", where, quote(op))
			if op == "" {
				add(w, errors.New("has an empty operation name: use the op passed to hedge.Do"))
			}
			errs = append(errs, hr.Ops[op].check(w)...)
		}
	}
	return errors.Join(errs...)
}

// check returns the mistakes of r, found at where.
func (r Rules) check(where string) []error {
	var errs []error
	switch r.Mode {
	case "", "on", "shadow", "off":
	default:
		errs = append(errs, mistake(where+".mode", fmt.Errorf("is %q: use on, shadow or off", r.Mode)))
	}
	if r.Rollout != nil {
		if f := *r.Rollout; math.IsNaN(f) || f < 0 || f > 1 {
			errs = append(errs, mistake(where+".rollout", fmt.Errorf("is %v: use a share of pods in [0, 1], e.g. 0.1 for 10%%", f)))
		}
	}
	if r.Budget != nil {
		if _, err := hedge.NewBudget(r.Budget.Ratio, r.Budget.Burst); err != nil {
			errs = append(errs, configMistakes(where+".budget", err)...)
		}
	}
	s := hedge.Settings{Percentile: r.Percentile, MaxAttempts: r.MaxAttempts, MaxHedgesPerSecond: r.MaxHedgesPerSecond}
	if err := s.Validate(); err != nil {
		errs = append(errs, configMistakes(where, err)...)
	}
	return errs
}

// configMistakes locates each of the mistakes in err, a [hedge] error.
func configMistakes(where string, err error) []error {
	var out []error
	for _, e := range flatten(err) {
		out = append(out, &docError{where: where, err: e, config: true})
	}
	return out
}

// flatten returns the mistakes joined in err.
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

// mistake returns a mistake in a document, at where ("" for the whole).
func mistake(where string, err error) error { return &docError{where: where, err: err} }

// docError is one mistake in a document.
type docError struct {
	where  string
	err    error
	config bool // a mistake of a hedge.Config setting too
}

func (e *docError) Error() string {
	msg := strings.TrimPrefix(strings.TrimPrefix(e.err.Error(), "hedge: "), "fleet: ")
	if e.where == "" {
		return "fleet: " + msg
	}
	return "fleet: " + e.where + ": " + msg
}

func (e *docError) Unwrap() error { return e.err }

func (e *docError) Is(target error) bool {
	return target == ErrInvalidDocument || (e.config && target == hedge.ErrInvalidConfig)
}

// quote writes a map key as a path element: bare when it is a plain word.
func quote(s string) string {
	for _, c := range s {
		if !(c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return fmt.Sprintf("%q", s)
		}
	}
	if s == "" {
		return `""`
	}
	return s
}

// Marshal returns p as JSON, which [Parse] reads back.
func (p *Policy) Marshal() ([]byte, error) { return json.MarshalIndent(p, "", "  ") }

// Killed reports whether p's kill switch is on at now.
func (p *Policy) Killed(now time.Time) bool { return p.Kill != nil && now.Before(p.Kill.Until) }

// Rules returns the rules p sets for Hedger name, with those of [All]
// under them: the Hedger's own fields over All's, and each operation's
// over the Hedger's. Operations of All and of the Hedger are merged.
func (p *Policy) Rules(name string) HedgerRules {
	all, own := p.Hedgers[All], p.Hedgers[name]
	if name == All {
		own = HedgerRules{}
	}
	out := HedgerRules{Rules: own.Rules.over(all.Rules)}
	for _, m := range []map[string]Rules{all.Ops, own.Ops} {
		for op := range m {
			if out.Ops == nil {
				out.Ops = map[string]Rules{}
			}
			// An op's rules: the Hedger's own for it, over All's for it,
			// over the Hedger's merged rules.
			out.Ops[op] = own.Ops[op].over(all.Ops[op]).over(out.Rules)
		}
	}
	return out
}

// over returns r with each field it leaves out taken from under.
func (r Rules) over(under Rules) Rules {
	if r.Mode == "" {
		r.Mode = under.Mode
	}
	if r.Rollout == nil {
		r.Rollout = under.Rollout
	}
	if r.Percentile == 0 {
		r.Percentile = under.Percentile
	}
	if r.Budget == nil {
		r.Budget = under.Budget
	}
	if r.MaxAttempts == 0 {
		r.MaxAttempts = under.MaxAttempts
	}
	if r.MaxHedgesPerSecond == 0 {
		r.MaxHedgesPerSecond = under.MaxHedgesPerSecond
	}
	return r
}

// Live returns the live settings p gives Hedger name on the pod named
// instance at now: every Hedger off while the kill switch is on, the
// rollout turned into a mode by the pod's place ([InRollout]).
func (p *Policy) Live(name, instance string, now time.Time) hedge.Live {
	if p.Killed(now) {
		return hedge.Live{Settings: hedge.Settings{Mode: hedge.Off}}
	}
	hr := p.Rules(name)
	l := hedge.Live{Settings: hr.Rules.settings(instance)}
	for op, r := range hr.Ops {
		if l.Ops == nil {
			l.Ops = map[string]hedge.Settings{}
		}
		l.Ops[op] = r.settings(instance)
	}
	return l
}

// settings turns merged rules into a Hedger's live settings on instance.
func (r Rules) settings(instance string) hedge.Settings {
	s := hedge.Settings{Percentile: r.Percentile, MaxAttempts: r.MaxAttempts, MaxHedgesPerSecond: r.MaxHedgesPerSecond}
	switch r.Mode {
	case "shadow":
		s.Mode = hedge.Shadow
	case "off":
		s.Mode = hedge.Off
	}
	if s.Mode == hedge.On && r.Rollout != nil && !InRollout(instance, *r.Rollout) {
		s.Mode = hedge.Shadow
	}
	if r.Budget != nil {
		s.BudgetRatio, s.BudgetBurst = r.Budget.Ratio, r.Budget.Burst
	}
	return s
}

// InRollout reports whether the pod named instance is in a rollout to
// share of pods: whether a hash of its name, a number in [0, 1), is below
// share. The same pods stay in as the share grows; a share of 1 takes
// every pod, and 0 none.
func InRollout(instance string, share float64) bool {
	h := fnv.New64a()
	h.Write([]byte(instance))
	// FNV's high bits barely move between names that differ in their
	// last character (pod-1, pod-2): mix them (splitmix64's finaliser).
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	// The top 53 bits, as a float64 in [0, 1).
	return float64(x>>11)/(1<<53) < share
}
