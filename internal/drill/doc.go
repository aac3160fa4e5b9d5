// Package drill is a deterministic replay of twenty hedged requests: the
// worked example behind the lab's Drill tab and the "hedge drill" command.
//
// Where package sim measures hedging statistically, on a million random
// requests, the drill is small enough to follow one event at a time and
// exact enough to state its outcomes as facts: at a 130 ms delay, requests
// 6, 12 and 17 are hedged, their backups win at 225, 226 and 233 ms, and
// the p95 falls from 640 to 226 ms for 15% extra requests. The page, the lab
// server and the terminal command all call Run, so there is one source of
// truth; drill_test.go asserts every outcome the lab documents.
//
// # The fixture
//
// Requests holds twenty requests, numbered from 1, each with a fixed
// primary latency and a fixed, independent backup latency (the time a copy
// takes from its start to its answer). Seventeen primaries take 64 to 120
// ms; the primaries of requests 6, 12 and 17 are slow: 640, 900 and 450 ms.
// Every latency in the fixture exceeds WriteCommit (60 ms), so a copy that
// answers has committed first. The backups of the slow requests take 95, 96
// and 103 ms; the backups of requests 1 and 2 are slow enough (84 and 91
// ms) that at a 50 ms delay their primaries still answer first.
//
// # Definitions
//
// All twenty requests are sent at time 0, in arrival order 1 to 20 (the
// drill models no queueing, so a shared start keeps every time in the
// trace equal to a latency).
//
//   - Hedge. With hedging on, request i's backup is sent at time Delay if
//     its primary has not answered by then (P_i > Delay; a primary that
//     answers exactly at the delay is not hedged) and the budget allows.
//     A delay of 0 therefore hedges every request.
//   - Budget. Budget is a percentage of the twenty requests: at most
//     floor(Budget x 20 / 100) backups are sent, spent in arrival order on
//     the requests that qualify. A request refused by a spent budget is
//     never hedged later.
//   - Winner. The first copy to answer wins; the request's latency is its
//     answer time. A primary and a backup answering at the same instant: the
//     primary wins.
//   - Cancel the loser. With Cancel, the losing copy is cancelled the moment
//     the winner answers; without it, the loser runs to completion and its
//     answer is discarded.
//   - Backend work spent on losers. The running time of every losing copy:
//     from its start until it is cancelled (with Cancel) or until it
//     completes (without). At 130 ms that is 225 + 226 + 233 = 684 ms with
//     cancellation and 640 + 900 + 450 = 1990 ms without.
//   - Extra load. Backups sent divided by the twenty requests, in percent.
//     The drill's policy limit is LoadLimit (25%).
//   - Percentiles. Nearest rank over the twenty latencies: the p95 is the
//     19th smallest (rank ceil(0.95 x 20)). The baseline p95, with no
//     hedging, is 640 ms.
//   - Writes. A write commits WriteCommit (60 ms) after its copy starts, if
//     the copy is still running then; a cancellation at or after that
//     instant cannot undo the commit. Without an idempotency key, every
//     commit is a separate write, so a request whose two copies both commit
//     writes twice (a duplicate write). With a key, the server keeps the
//     first commit and deduplicates the second. Latencies do not depend on
//     the operation.
//
// # Outcomes
//
// Each run gets one outcome, the first that applies:
//
//   - BASELINE: hedging is off.
//   - DUPLICATE WRITES: a write without a key committed twice.
//   - EXCESS LOAD: extra load above LoadLimit.
//   - TAIL CUT: the p95 is below the baseline's.
//   - NO TAIL GAIN: none of the above (hedges, if any, bought nothing).
//
// # What the drill does not model
//
// Queueing: a hedge here costs backend time but never slows another
// request down, so it cannot show the collapse that the simulator (and the
// lab's Explorer) shows at high utilisation. Latencies are fixed, not drawn.
package drill
