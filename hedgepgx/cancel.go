package hedgepgx

import (
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
)

// CancelDeadline is how long a connection whose query was cancelled
// waits for the server's answer to the cancel request, in the mode set by
// KeepConnsOnCancel, before pgx closes it. A server that answers within
// it keeps the connection; a stalled one loses it.
const CancelDeadline = 2 * time.Second

// KeepConnsOnCancel sets cfg's connections to keep themselves when a
// query's context is cancelled: pgx sends a cancel request to the server
// at once and waits for the query to end with SQLSTATE 57014
// (query_canceled), after which the connection goes back to its pool,
// ready for the next query. Only a server that has not answered within
// CancelDeadline loses the connection.
//
// pgx's default instead sets a deadline in the past on the socket, which
// makes the connection unusable: every cancelled query costs a new
// connection (a TCP handshake, authentication and a new backend process
// on the server) and leaves the server running the query until it next
// writes to the socket. Hedging cancels every losing copy, so the default
// costs one connection per lost hedge (see BENCHMARKS.md).
//
// Call it on the configs of the pools before making them
// (pgxpool.NewWithConfig): a pool already made keeps the handler it was
// made with, which New cannot see or change. NewFromConfigs calls it.
// The cost of the mode: pgx waits about 100 ms after the cancel request
// before handing the connection back (the request is asynchronous and
// could otherwise cancel the connection's next query), so each lost copy
// holds its connection that much longer; size pools for it.
func KeepConnsOnCancel(cfg *pgxpool.Config) {
	cfg.ConnConfig.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: CancelDeadline}
	}
}
