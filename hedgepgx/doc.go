// Package hedgepgx hedges PostgreSQL reads across a primary and its
// streaming read replicas with pgx v5 pools: a read still unanswered
// after the Hedger's delay is sent to another server, the first answer
// wins, and the losing copy's query is cancelled on its server while its
// connection goes back to its pool. Writes go to the primary alone, once.
//
//	c, err := hedgepgx.NewFromConfigs([]*pgxpool.Config{primary, replicaA, replicaB}, hedgepgx.Config{})
//	...
//	_, lsn, err := c.ExecLSN(ctx, "UPDATE users SET name = $1 WHERE id = $2", name, id) // primary, once
//	err = c.QueryRow(hedgepgx.WithMinLSN(ctx, lsn), "SELECT name FROM users WHERE id = $1", id).Scan(&name)
//
// Every read is one call of hedge.Do on the Client's Hedger, built from
// Config.Hedge with Replicas set to the number of pools and
// ReapInBackground set. The operation class of a read is its SQL text
// (Read takes one of the caller's): keep SQL parameterised, or the
// classes beyond Config.Hedge.MaxOps share hedge.OtherOp.
//
// # Configuration
//
// New and NewFromConfigs check everything first and report every mistake
// at once, one per line, each naming the argument or field and what to
// do; the error matches ErrInvalidConfig (and, for mistakes in
// Config.Hedge, hedge.ErrInvalidConfig). Refused: fewer than two pools
// (a hedge needs another server), more than MaxPools, a nil pool, a pool
// given twice, two pools on the same host and port, Config.Primary
// outside the pools (or not 0 with NoPrimary), Config.Hedge.Replicas
// other than 0 or the number of pools, MaxLag without position reads
// (negative LagInterval), and whatever hedge.New refuses.
//
// # Reads
//
// Reads are what the caller sends through the read methods: QueryRow,
// Collect, CollectOne, ExecRead, and Read for anything else (several
// statements, a read-only transaction), whose function gets a connection
// of the chosen server's pool for the copy. The first four take one read
// statement and refuse anything else with ErrNotRead before any server
// sees it: SQL that does not start with SELECT, WITH, VALUES, TABLE or
// SHOW (after white space, comments and parentheses); several statements
// (a ';' followed by another statement: under pgx's simple protocol, as
// with PgBouncer, PostgreSQL runs them all, so a read of "SELECT 1;
// INSERT ..." would insert on the primary whenever a copy went there); a
// WITH that holds an INSERT, UPDATE, DELETE or MERGE; and a quote or
// comment left open. The SQL is read as PostgreSQL reads it with
// standard_conforming_strings on, its default: a ';' inside a quoted
// string (E'...' strings included), a quoted identifier, a dollar-quoted
// string or a comment ends nothing.
//
// It is a guard, not a proof: it does not see what a statement does when
// it runs. A SELECT may call a function that writes (nextval, a function
// of the application's, dblink) or lock rows (FOR UPDATE). Such a
// statement fails on a standby (SQLSTATE 25006, an answer that ends the
// read at once) but runs on the primary whenever a copy goes there,
// possibly as a loser the caller never hears of. Read checks nothing:
// have its function run its statements in a read-only transaction
// (BeginTx with pgx.ReadOnly) for the server to refuse writes. Send
// writes with Exec, ExecLSN, or Primary.
//
// Rows are read inside the copy that runs the query: Collect and
// CollectOne build the values (pgx.RowTo, pgx.RowToStructByName, ...) in
// each copy, QueryRow's Scan scans each copy into values of its own, and
// only the winner's reach the caller. So no copy holds a connection after
// it returns, the loser's goes back to its pool as soon as its query is
// cancelled, and nothing the caller holds can refer to a loser.
//
// A server's answer ends the read, whether a value or an error: pgx's
// ErrNoRows, a scan error, and every SQLSTATE but those that say this
// server cannot serve now. Those (classes 08 connection exception, 53
// insufficient resources, 57 operator intervention, including a
// statement timeout and "cannot connect now", 58 system error, and 40001,
// what a hot standby reports when replay cancels a conflicting query), and
// errors of the connection itself, fail the copy, and hedge.Do sends the
// next one at once; a connection that could not be made is marked
// hedge.NotSent, so the read goes elsewhere outside the budget.
//
// # Writes
//
// Exec and ExecLSN send a statement to the primary (Config.Primary),
// once, on the caller's goroutine, without touching the Hedger, whatever
// the context carries; they are counted in ServerStats.Writes. Use
// Primary for transactions and anything else that needs one connection
// for several statements.
//
// # Lag and consistency
//
// Each server's WAL position is read every Config.LagInterval (100 ms by
// default) on a goroutine per pool that Close stops: a standby's replay
// position (pg_last_wal_replay_lsn), the primary's insert position
// (pg_current_wal_insert_lsn). ExecLSN and PrimaryLSN also update the
// primary's. While a server runs its position only moves forward, so a
// known position only grows, with two exceptions: when the poll sees a
// new pg_postmaster_start_time (the server restarted), and when a copy
// finds the server behind (below). The known positions route reads; they
// are not what the guarantee rests on. A standby that crashes and
// restarts replays again from its last restartpoint and accepts
// connections once consistent, behind where it was, and nothing tells a
// client so until it asks.
//
// Each read has a set of servers it may go to, fixed when it starts: the
// primary, and each replica known at or past the read's minimum position
// (WithMinLSN; any replica without one) and, with Config.MaxLag, known to
// be within MaxLag bytes of the most advanced server. The Hedger's own
// picks (its spare-capacity and probation rules) choose among all
// servers, as the root package offers no way to narrow them per call, so
// the choice is made inside the attempt: a copy the Hedger sends to a
// server outside the set, or to one already holding a copy of the read,
// runs on the least busy server of the set that holds none (counted in
// ServerStats.Redirected); a copy with nowhere left to go sends nothing
// and waits for the others. A read whose set has a single server is sent
// once, unhedged (counted in hedge.Stats.Unhedgeable): with a primary,
// that is where a read goes when no replica has caught up.
//
// A copy of a read with a minimum position that runs on a server other
// than the primary checks the server's position on the connection that
// serves the copy. QueryRow, Collect, CollectOne and ExecRead send the
// check and the query together, in one round trip and one implicit
// transaction; at read committed, PostgreSQL's default, the query takes
// its snapshot after the check ran. At a stricter isolation level both
// would share a snapshot taken before the check read the position, so
// the query runs again, on its own, after the check: one more round trip.
// Read sends the check on the connection it hands to its function, a
// round trip of its own, before calling it. A server found behind has its
// answer dropped and its known position lowered (counted in
// ServerStats.Behind), and the copy moves on at once to another server of
// the read's set that holds no copy of it, the primary if none else
// (counted in Redirected). A copy with no server left fails as
// hedge.NotSent, and the read fails with an error that matches
// ErrNotCaughtUp if no other copy answers. The primary is not checked: it
// has every commit it acknowledged.
//
// What a hedged read then guarantees:
//
//   - Read-your-writes, with WithMinLSN and a position taken after the
//     write committed (ExecLSN, or PrimaryLSN after the commit): whichever
//     copy wins ran on the primary, or on a server whose position, read
//     on the copy's own connection before the copy's query took its
//     snapshot, was at or past the commit. So it sees the write and
//     everything committed before it on the primary, also when a standby
//     crashed and restarted behind the position known for it. The
//     position is the insert position, not pg_current_wal_lsn, so this
//     holds with synchronous_commit off too. Checked by TestReadYourWrites
//     (10,000 hedged reads after writes, one standby's replay paused: no
//     stale read) and TestReadYourWritesThroughCrash (a standby crashed
//     with pg_ctl stop -m immediate and restarted behind the write while
//     hedged reads ran: no stale read; with the known positions alone,
//     199 to 531 of about 4,000 reads were stale).
//   - Without a minimum position, none: a read may be answered by any
//     server, as stale as its replay (MaxLag is a routing preference on
//     positions read up to LagInterval ago, not a bound on staleness).
//   - Monotonic reads only if the caller threads a position: two reads
//     with the same minimum may be answered by servers at different
//     positions past it, the second older than the first. To read
//     monotonically, pass each read the primary's position taken after
//     the previous read returned (PrimaryLSN), which is past anything it
//     saw.
//   - Positions are compared as numbers, which holds while the servers
//     follow one primary on one timeline. After a failover, or a standby
//     rebuilt from another primary's backup, make a new Client. A primary
//     that crashes with synchronous_commit off may lose its last commits
//     for good; a position taken before the crash may then name WAL that
//     no server has.
//
// # Cancellation
//
// hedge.Do cancels every losing copy's context. pgx's default reaction
// to a cancelled context is to set a past deadline on the socket, which
// breaks the connection: the pool closes it and dials a new one (a TCP
// handshake, authentication, a new backend process), and the server
// runs the cancelled query on until it next writes to the socket.
// KeepConnsOnCancel (applied by NewFromConfigs; apply it yourself to the
// configs of pools given to New, which cannot change a pool already made)
// sends a cancel request instead and keeps the connection once the server
// answers 57014. Measured on loopback (TestCancelKeepsConnections, see
// BENCHMARKS.md): no connection replaced per 1,000 lost copies with it,
// about 490 with pgx's default (where about half the lost copies lost
// while still waiting for a new connection, so cost none). A stalled server that does not
// answer the cancel request within CancelDeadline loses the connection
// either way. Each cancelled copy holds its connection about 100 ms more
// (pgx waits that long after a cancel request), so size the pools for
// the hedges in flight; Close waits for them.
//
// # What it is not
//
// hedgepgx does not pool, fail over, or discover servers: the caller
// gives it the pools of a primary and its replicas. It does not parse
// SQL: its guard reads quotes, comments and keywords, no more.
package hedgepgx
