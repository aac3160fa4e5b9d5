// Package hedgeredis hedges Redis reads across replicas with go-redis v9:
// a read still unanswered after the Hedger's delay is sent to another
// replica, and the first answer wins. Writes go to the primary alone,
// once.
//
//	c, err := hedgeredis.NewFromOptions([]*redis.Options{primary, replica1, replica2}, hedgeredis.Config{})
//	...
//	err = c.Set(ctx, "user:42", "Ada", time.Hour).Err() // the primary, once
//	v, err := c.Get(ctx, "user:42").Result()            // hedged
//
// Every read is one call of hedge.Do on the Client's Hedger, built from
// Config.Hedge with Replicas set to the number of clients; Attempt.Replica
// picks the client of each copy. The operation class of a read is its
// upper-case command name ("GET", "HGETALL"), a bounded set.
//
// # Configuration
//
// New and NewFromOptions check everything before making a Client, and
// report every mistake at once, one per line, each naming the argument or
// field at fault as the caller wrote it and what to do; the error matches
// ErrInvalidConfig (errors.Is). Refused:
//
//   - fewer than two clients: a hedge needs another replica to go to, so a
//     Client over one server could never hedge (use the *redis.Client on
//     its own), whatever Config.Hedge says;
//   - a nil entry in clients or opts;
//   - the same *redis.Client twice, or two clients certainly connected to
//     the same server: a hedge sent from one to the other would wait
//     behind the very stall it escapes. Addresses are compared after
//     go-redis's defaults (an empty Addr is localhost:6379) and ignoring
//     what cannot make two servers differ: the case of the host name, a
//     trailing dot, the spelling of an IP address (::1 and 0:0::1, a
//     v4-mapped address and its IPv4 form), leading zeros of the port, a
//     missing port (6379), a unix socket path's redundant parts. Different
//     names that may reach one host (localhost and 127.0.0.1, two DNS
//     names) are accepted: only DNS and the servers' bindings could tell;
//   - Config.Primary outside the clients, and Config.Hedge.Replicas other
//     than 0 or the number of clients;
//   - every mistake hedge.New finds in Config.Hedge. Those are hedge.New's
//     own errors, wrapped (errors.As reaches them), with their field paths
//     rewritten to start at Config: "Config.Hedge.MaxAttempts = 9", and
//     "Config.Hedge.Delay: Percentile.P = 120" for the delay's fields.
//
// # Reads: the allow-list
//
// Only the commands listed by ReadCommands are hedged; typed helpers (Get,
// MGet, HGetAll, ...) exist for the common ones and Do classifies any
// command by its name. The list:
//
//	keys         EXISTS TYPE TTL PTTL EXPIRETIME PEXPIRETIME
//	strings      GET MGET STRLEN GETRANGE GETBIT BITCOUNT BITPOS
//	hashes       HGET HMGET HGETALL HEXISTS HLEN HKEYS HVALS HSTRLEN
//	lists        LRANGE LLEN LINDEX LPOS
//	sets         SMEMBERS SISMEMBER SMISMEMBER SCARD
//	sorted sets  ZRANGE ZRANGEBYSCORE ZRANGEBYLEX ZREVRANGE ZREVRANGEBYSCORE
//	             ZSCORE ZMSCORE ZCARD ZCOUNT ZLEXCOUNT ZRANK ZREVRANK
//	streams      XRANGE XREVRANGE XLEN
//	geo          GEOPOS GEODIST GEOHASH GEOSEARCH
//
// A command is on it when sending it twice, to two servers, can change
// nothing and either answer is right: Redis 7 flags it "readonly", its key
// specs are read-only ("RO"), it does not block, and its answer depends on
// the data only, not on the connection or on state kept by one server
// (TestAllowListIsReadOnly checks the flags against a real server). Left
// out on purpose:
//
//   - PFCOUNT: flagged readonly, but its key spec is RW (it may rewrite
//     the HyperLogLog's cached cardinality and propagate that).
//   - TOUCH: read-only, but its whole point is a side effect (access
//     time).
//   - SCAN, HSCAN, SSCAN, ZSCAN: a cursor means something only to the
//     server that issued it; the next page would go to another replica.
//   - Blocking commands (XREAD with BLOCK; the blocking pops are writes
//     anyway): a copy would hold a connection for the whole block.
//   - Whole-keyspace or heavy computations (KEYS, SORT_RO, SINTER, SUNION,
//     ZUNION, LCS, scripts with EVAL_RO/FCALL_RO): a hedge doubles
//     exactly the work that is slow because it is heavy.
//   - Random replies (SRANDMEMBER, HRANDFIELD, ZRANDMEMBER, RANDOMKEY):
//     harmless, but not worth a hedge.
//
// For any of these, use hedge.Do with Replica(a.Replica) yourself, or
// Primary.
//
// A server's reply is the answer, even an error reply: redis.Nil (a
// missing key) or WRONGTYPE would be the same on every replica, so they
// end the call like a value, and count as a win. Transport errors (a
// timeout, a refused or closed connection, an exhausted pool) and error
// replies that say "not this replica, not now" (LOADING, BUSY, MASTERDOWN,
// TRYAGAIN, CLUSTERDOWN, max clients) fail the copy, and hedge.Do sends the
// next copy at once. When every copy fails, the command returned carries
// Do's error (a *hedge.AttemptsError when several failed).
//
// A connection that could not be made (refused, unreachable, a name that
// did not resolve) sent nothing: its error is marked hedge.NotSent, so the
// read goes to another replica at once, outside the budget, and a replica
// that keeps refusing goes on probation (see hedge.ReplicaStats).
// go-redis retries a failed dial up to five times with a backoff by
// default, which can make a refused connection slower than the hedge
// delay; set redis.Options.DialerRetries to 1 for replicas behind hedging,
// whose Hedger already sends the read elsewhere.
//
// Replicas may lag the primary: a hedged read may see older data than the
// write the caller just made. Read your own writes from Primary.
//
// # Writes
//
// Set, SetNX and Del, and every command not on the allow-list sent through
// Do, go to the primary (Config.Primary, index 0 by default), once, on the
// caller's goroutine, without touching the Hedger: never hedged, never
// sent to another replica, whatever the Hedger's mode or delay (checked by
// TestWritesGoToThePrimaryOnce and TestSetSetNXDel with INFO
// commandstats). Writes are counted in ReplicaStats.Writes. Pipelines,
// transactions, pub/sub and blocking commands need one connection for
// several commands: use Primary for them.
//
// The root package lets a write be hedged when the caller vouches for it
// with an idempotency key (hedge.WithIdempotencyKey; hedge.NotIdempotent
// marks one that may not be). hedgeredis never hedges a write, key or no
// key (TestKeyedSetIsNotHedged), because a hedge of a write has nowhere
// useful to go:
//
//   - Only the primary accepts writes. A replica of it refuses them
//     (READONLY), and writing to an independent server would make the
//     replicas disagree.
//   - A second copy to the primary itself would queue behind the very
//     stall it was meant to escape: Redis runs commands one at a time.
//   - Even the writes that look idempotent are not, once copies may land
//     late. SET of a fixed value leaves the same value when applied twice
//     in a row, but a copy applied after another client's SET of the same
//     key undoes that write; with EX it also restarts the TTL. SETNX
//     answers false to the copy that comes second, and DEL counts 0
//     for it: the caller would get the wrong answer whichever copy won.
//
// So the typed writes exist for convenience and to keep writes on the
// Client (counted, refused after Close); their routing is Do's.
//
// "Once" is hedgeredis's promise; go-redis has its own retries. With its
// default MaxRetries (3), go-redis resends a command whose read timed out
// or hit EOF (shouldRetry in error.go), which applies a non-idempotent
// write twice if the first one had reached the server. Set MaxRetries: -1
// on the primary's options when writes must be sent at most once.
//
// # Cancelled copies
//
// When a hedge wins, hedge.Do cancels the loser's context. What go-redis
// v9.23.0 does with that, read from its source (module cache,
// github.com/redis/go-redis/v9@v9.23.0):
//
//   - Once a command has a connection, the context's cancellation is never
//     looked at. (*baseClient)._process (redis.go) writes with
//     cn.WithWriter(c.context(ctx), ...) and reads with
//     cn.WithReader(c.context(ctx), c.cmdTimeout(cmd), ...);
//     (*baseClient).context passes the caller's context only with
//     Options.ContextTimeoutEnabled, and context.Background() otherwise.
//     (*Conn).WithReader (internal/pool/conn.go) calls SetReadDeadline once,
//     before reading, with (*Conn).deadline, which consults ctx.Deadline()
//     and never ctx.Done(); no goroutine or context.AfterFunc watches the
//     context during the read. So a cancelled copy blocked on a stalled
//     server waits for the reply (or for ReadTimeout, 5 s by default), with
//     or without ContextTimeoutEnabled; a deadline cuts the read only with
//     ContextTimeoutEnabled.
//   - Before it has a connection, cancellation works: (*ConnPool).waitTurn
//     (internal/pool/pool.go) returns ctx.Err() when the context ends
//     while the copy waits for a free connection, and the retry backoff
//     (internal.Sleep in _process) honours it too. No connection is
//     involved then.
//   - A read that fails, for instance cut mid-reply by a deadline, never
//     leaves its connection in the pool: withConn releases it through
//     releaseConn and releaseConnToPool (redis.go), where isBadConn (error.go,
//     called with allowTimeout false) is true for every error that is not a
//     Redis error reply (timeouts, EOF, context errors; and READONLY), and
//     the connection is Removed: closed, and counted in
//     PoolStats.StaleConns (removeConn in internal/pool/pool.go). A panic
//     mid-write (errConnUnusable) and a failed push-notification drain
//     close the connection too. As a second line,
//     (*ConnPool).isHealthyConn peeks at an idle connection before handing
//     it out (connCheck in internal/pool/conn_check.go, MSG_PEEK) and
//     closes it if unexpected bytes wait there.
//
// So go-redis never puts a connection with an unread reply back into the
// pool: a cancelled copy either reads its reply to the end (and the
// connection, clean, is reused) or fails (and the connection is closed).
// hedgeredis has nothing to repair, and does nothing. The tests prove it
// against real servers, stalled (the process stopped) until the test
// releases them, so that no outcome depends on timing:
// TestGoRedisCancelMidReply cancels a GET whose command is on the wire to
// a stalled server, in the four combinations of cancel or deadline and
// ContextTimeoutEnabled, and checks the reply, the pool (returned or
// removed, as above) and the dials; TestCancelledCopiesDoNotPoisonPools
// stalls one replica, three times, under a storm of hedged GET, HGETALL
// and LRANGE of keys whose values differ in length and type, through pools
// of 4 connections, so that copies lose with their command on the wire,
// then reads every key on every client and checks each reply is its own;
// TestReadsCutMidTransfer cuts GETs of a 1 MiB value at random points of
// the transfer and checks the next command's reply.
//
// What it costs: a loser keeps its connection, and its goroutine, until
// the stalled server answers or the read times out. If hedge.Do waited
// for losers (its default), the caller would wait out the very stall the
// hedge escaped. So the Client's Hedger always has
// hedge.Config.ReapInBackground: the call returns with the winner's
// answer, and the loser finishes on its own goroutine. The price is that
// the primary copy runs on a goroutine of its own on every read, hedged or
// not: a GET that does not hedge costs 13 allocations (about 1 KiB)
// instead of go-redis's 6 (203 B), and a goroutine hand-off each way. On
// the project's 2-vCPU test machine, with the servers on the same host,
// that made a serial GET about 3 times as slow as a plain go-redis GET
// over loopback (most of it the Go scheduler waking a second thread for
// each hand-off), and 1.4 to 1.7 times under parallel load (BenchmarkGet:
// go test ./hedgeredis -run '^$' -bench . -benchmem -count 5). Against a
// server across a network the hand-off costs the same, a smaller share of
// a longer round trip. The Client tracks those copies: Close waits
// for them (closing the clients first if it owns them, which ends their
// reads at once), and ReplicaStats.InFlight counts them.
//
// A loser that ignored its cancellation and answered late is recorded by
// the Hedger as a successful primary, at its full latency: the percentile
// delay sees the stall as it was.
//
// # Pool sizing
//
// Each copy holds one connection of its replica's pool from the moment it
// is sent until its reply is read, and cancellation does not shorten that
// (above). Size each replica's pool for the case where one replica stalls
// and the others carry everything:
//
//	PoolSize >= 2 × λ / (N−1) × (1 + r) × L99
//
// where λ is the Client's peak read rate, N the number of replicas, r the
// hedge budget's ratio (hedge.DefaultBudget's by default) and L99 the p99
// of a healthy read.
// For 20,000 reads/s over 3 replicas, r = 0.1 and L99 = 2 ms: 2 × 10,000 ×
// 1.1 × 0.002 = 44 connections per replica (go-redis's default is 10 per
// GOMAXPROCS).
//
// The stalled replica itself: every copy sent to it keeps a connection
// until the stall ends or the read times out. The default Picker (two
// random choices by copies in flight, losers included, since the Hedger
// counts a copy until it returns) steers new copies away from it once it
// holds more than the others, so the pile is usually small; with
// Picker.Random, or when every replica is equally busy, it can reach its
// whole pool. Copies then wait for a connection; that wait is cancellable,
// so when the hedge wins elsewhere the waiting copy gives up without
// touching a connection. Such abandoned waits are counted nowhere in
// go-redis's PoolStats (waitTurn adds to WaitCount and WaitDurationNs only
// when a wait succeeds); ReplicaStats.Cancelled counts them. Three settings
// bound the damage:
//
//   - ReadTimeout bounds how long a stalled replica holds each connection:
//     a few times the p99.9 of a read (say 100 to 500 ms) rather than the
//     default 5 s. With ContextTimeoutEnabled, the caller's deadline
//     bounds it too (then the connection is closed, not reused).
//   - PoolTimeout (default ReadTimeout + 1 s) should exceed the hedge
//     delay, so that a copy waiting for a busy pool is hedged, not failed.
//   - MaxRetries: go-redis's retries run inside one copy, on the same
//     replica, after a backoff of 10 ms or more; on read replicas,
//     MaxRetries: -1 leaves the retrying to hedging.
//
// Watch ReplicaStats: Pool.WaitCount and PoolWait (time spent waiting for
// a connection), Pool.Timeouts (waits that hit PoolTimeout), Cancelled
// (waits and copies abandoned), InFlight (copies running, losers
// included).
//
// # Stats
//
// Client.Stats returns the Hedger's stats per read command (requests,
// hedges, hedge wins, budget denials, latency of callers, of the primary
// alone and of the hedge path, the delay in force: see hedge.Stats) and,
// per replica, the copies sent, the reads it won, copies failed and
// cancelled, writes, copies in flight, and go-redis's PoolStats: in
// v9.23.0 Hits, Misses, Timeouts, WaitCount, WaitDurationNs, Unusable,
// TotalConns, IdleConns, StaleConns and PendingRequests
// ((*ConnPool).Stats in internal/pool/pool.go).
//
// # Redis Cluster
//
// ClusterClient hedges the reads of a Redis Cluster within each key's
// slot. It is made over a go-redis ClusterClient with ReadOnly set
// (NewClusterFromOptions sets it):
//
//	c, err := hedgeredis.NewClusterFromOptions(ctx, &redis.ClusterOptions{Addrs: seeds}, hedgeredis.ClusterConfig{})
//	v, err := c.Get(ctx, "user:42").Result()                // a node of the key's slot, hedged to another
//	vals, err := c.MGet(ctx, "user:42", "user:43").Result() // one leaf per slot, one fan-out
//
// It reads the layout with CLUSTER SLOTS when it is made. Its Hedger has
// one replica per node, and one shard per master with its replicas
// (hedge.Config.Shards), named by address: load, the default's rules and
// probation are per node. A read of a key goes to its slot's master or
// one of its replicas, and its hedge to another node of the same slot,
// never elsewhere (hedge.DoShard). MGet groups its keys by slot, since
// Redis Cluster refuses an MGET across slots, and reads each slot's keys
// as a leaf of one fan-out (hedge.DoFan): one budget, the sibling trigger,
// each leaf hedged within its slot. Do hedges a read on the allow-list
// within the slot of its first key. Writes, and any other command, go
// once through the go-redis ClusterClient, which routes them to the
// master and follows MOVED and ASK.
//
// A copy answered MOVED or ASK fails, and the next copy goes to another
// node of the slot. When every copy was redirected (a resharding or a
// failover since the client was made), the read goes once through the
// go-redis ClusterClient. Make a new ClusterClient to hedge over the new
// layout. A replica may lag its master, as with Client.
//
// # What it is not
//
// Not a replication manager (it does not follow failovers: Client's
// primary is the one you name, and ClusterClient's layout the one read
// when it was made), and not a cache. It hedges reads and routes writes,
// nothing else.
package hedgeredis
