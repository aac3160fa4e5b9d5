// Package hedgesql hedges reads across a primary database and its read
// replicas through database/sql: a read still unanswered after the
// Hedger's delay is sent to another server, the first answer wins, and
// the losing copy's context is cancelled. Writes go to the primary alone,
// once, never hedged. It is the database/sql counterpart of hedgepgx, for
// drivers other than pgx's own API (pgx's stdlib, lib/pq, MySQL, ...).
//
//	c, err := hedgesql.New([]*sql.DB{primary, replicaA, replicaB}, hedgesql.Config{})
//	...
//	_, err = c.Exec(ctx, "UPDATE users SET name = $1 WHERE id = $2", name, id) // primary, once
//	err = c.QueryRow(ctx, "SELECT name FROM users WHERE id = $1", id).Scan(&name)
//
// Every read is one call of hedge.Do on the Client's Hedger, built from
// Config.Hedge with Replicas set to the number of databases and
// ReapInBackground set. The operation class of a read is its SQL text
// (Read takes one of the caller's): keep SQL parameterised, or the
// classes beyond Config.Hedge.MaxOps share hedge.OtherOp.
//
// # Configuration
//
// New checks everything first and reports every mistake at once, one per
// line, each naming the argument or field and what to do; the error
// matches ErrInvalidConfig (and, for mistakes in Config.Hedge,
// hedge.ErrInvalidConfig). Refused: fewer than two databases, more than
// MaxDBs, a nil one, one given twice, Config.Primary outside them (or not
// 0 with NoPrimary), Config.Hedge.Replicas other than 0 or the number of
// databases, and whatever hedge.New refuses.
//
// # Reads
//
// The read methods are QueryRow, Collect, and Read for anything else
// (several statements, a read-only transaction). QueryRow and Collect
// take one read statement and refuse anything else with ErrNotRead
// before any server sees it: SQL that does not start with SELECT, WITH,
// VALUES, TABLE or SHOW (after white space, comments and parentheses);
// several statements (a ';' followed by another statement: a driver that
// sends the text as one simple query, as pgx's stdlib does in its simple
// protocol and lib/pq does without arguments, has PostgreSQL run them
// all, so a read of "SELECT 1; INSERT ..." would insert on the primary
// whenever a copy went there); a WITH that holds an INSERT, UPDATE,
// DELETE or MERGE; and a quote or comment left open. The SQL is read as
// PostgreSQL reads it (standard_conforming_strings on), and again with a
// backslash escaping the next character in every quoted string, # comments
// and backquoted names, as MySQL reads it: a second statement either
// reading sees is refused. So a ';' in a quoted string or a comment ends
// nothing, but one in a dollar-quoted string is refused (MySQL reads $
// as a letter).
//
// It is a guard, not a proof: it does not see what a statement does when
// it runs. A SELECT may call a function that writes (nextval, a function
// of the application's) or lock rows (FOR UPDATE); a standby refuses it,
// the primary runs it whenever a copy goes there. Read checks nothing:
// have its function run its statements in a read-only transaction
// (sql.TxOptions{ReadOnly: true}) for the server to refuse writes. Send
// writes with Exec or through Primary.
//
// Rows are read inside the copy that runs the query: Collect calls its
// scan function on every row in each copy and closes the rows there,
// QueryRow's Scan scans each copy into values of its own, and only the
// winner's reach the caller. So no copy holds a connection after it
// returns, and nothing the caller holds refers to a loser.
//
// An answer ends the read, whether a value or an error: sql.ErrNoRows, a
// scan error, and any error of the driver not taken for a failure of the
// server. A failure fails the copy, and hedge.Do sends the next one at
// once: driver.ErrBadConn, sql.ErrConnDone, a network error, an
// unexpected end of the connection, and an error with a SQLSTATE
// (a method SQLState() string, as pgx's and lib/pq's errors have) of
// class 08 (connection exception), 53 (insufficient resources), 57
// (operator intervention: a statement timeout, "cannot connect now"), 58
// (system error), or 40001 (what a PostgreSQL hot standby reports when
// replay cancels a query). Config.Unavailable replaces those rules. A
// connection that could not be made is marked hedge.NotSent, so the read
// goes elsewhere outside the budget.
//
// # Writes
//
// Exec sends a statement to the primary (Config.Primary), once, on the
// caller's goroutine, without touching the Hedger; it is counted in
// ServerStats.Writes. Use Primary for transactions.
//
// # Lag and consistency
//
// None. hedgesql knows nothing of replication: any server may answer any
// read, as stale as its replica is. A read that must see a write (read
// your writes) should go to the primary (Primary), or use hedgepgx,
// which tracks each PostgreSQL server's replay position and routes reads
// by it.
//
// # Cancellation, by driver
//
// hedge.Do cancels every losing copy's context. What that costs depends
// on the driver, because database/sql leaves a cancelled query to it:
//
//   - pgx's stdlib (github.com/jackc/pgx/v5/stdlib): as pgx. By default
//     a cancelled query breaks its connection (pgx sets a past deadline on
//     the socket), database/sql discards it, and the next query dials
//     again; the server runs the query on until it next writes to the
//     socket. Give stdlib.OpenDB a pgx.ConnConfig whose
//     BuildContextWatcherHandler returns a
//     pgconn.CancelRequestContextWatcherHandler (what
//     hedgepgx.KeepConnsOnCancel sets on a pool's config): pgx then sends
//     a cancel request and keeps the connection once the server answers
//     (within the handler's DeadlineDelay; a server stalled for longer
//     loses it). Pass stdlib.OptionShouldPing with a func that returns
//     false too: by default stdlib pings a connection idle for over a
//     second before reusing it, and a ping cancelled with its copy (on a
//     stalled server, say) breaks the connection just the same. Without
//     the ping a dead connection fails its copy, and the next copy goes
//     at once (see "Reads").
//   - lib/pq (github.com/lib/pq): sends a cancel request, so the server
//     stops the query, but marks the connection bad, and database/sql
//     dials a new one: each lost hedge costs a connection.
//   - go-sql-driver/mysql: closes the connection and sends no KILL
//     QUERY, so the query keeps running on the server, typically to its
//     end: each lost hedge costs a connection and may cost the loser's
//     full work on the server. Bound it with a server-side statement
//     timeout (MAX_EXECUTION_TIME), or hedge only cheap reads.
//
// So watch db.Stats().OpenConnections and the dials of the driver; set
// SetMaxIdleConns high enough for the hedges in flight, or the pool
// closes the connections the losers give back. Close waits for every
// copy, losers included.
//
// # What it is not
//
// hedgesql does not pool (database/sql does), fail over, discover
// servers or track replication. It does not parse SQL: its guard reads
// quotes, comments and keywords, no more.
package hedgesql
