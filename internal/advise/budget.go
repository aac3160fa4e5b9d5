package advise

import (
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/decide"
)

// budgetGate spends the library's default budget as its decision does,
// for estimates that replay only the budget: a Policy with a fixed delay,
// no replicas and no payoff rule, so that its only refusals are the
// budget's. A nil gate allows every hedge (no budget).
type budgetGate struct {
	pol *decide.Policy
	est decide.Estimator
	pl  decide.Plan
}

// newBudgetGate returns the gate of the default budget, or nil when
// budget is false.
func newBudgetGate(budget bool) *budgetGate {
	if !budget {
		return nil
	}
	pol, err := decide.FromConfig(hedge.Config{Delay: hedge.Fixed(time.Millisecond), MaxAttempts: 2, PayoffWinRate: -1})
	if err != nil {
		panic(err) // a constant, valid Config
	}
	return &budgetGate{pol: pol, est: pol.NewEstimator()}
}

// request is one request of the sample, in the order it was sent: the
// budget is credited for it, and when slow (past the delay) it asks for a
// hedge, which the budget allows or refuses.
func (g *budgetGate) request(slow bool) bool {
	if g == nil {
		return slow
	}
	g.begin()
	return slow && g.ask()
}

// begin credits the budget for one request.
func (g *budgetGate) begin() {
	if g != nil {
		g.pol.Begin(&g.pl, 0, g.est, decide.Never, false, nil)
	}
}

// ask asks for the request's hedge, and reports whether the budget allows
// it (at most one per request).
func (g *budgetGate) ask() bool {
	return g == nil || g.pol.Next(&g.pl, 0, false) == decide.Allowed
}
