// Package hedgerueidis hedges Redis reads across replicas with rueidis
// (github.com/redis/rueidis), the Redis project's other Go client: a read
// still unanswered after the Hedger's delay is sent to another replica,
// and the first answer wins. Writes go to the primary alone, once.
//
//	c, err := hedgerueidis.NewFromOptions([]rueidis.ClientOption{
//		{InitAddress: []string{primary}}, {InitAddress: []string{replica}},
//	}, hedgerueidis.Config{})
//	...
//	err = c.Set(ctx, "user:42", "Ada", time.Hour).Error() // the primary, once
//	v, err := c.Get(ctx, "user:42").ToString()            // hedged
//
// It mirrors package hedgeredis (go-redis v9): the same allow-list of
// hedged reads (ReadCommands, equal to hedgeredis.ReadCommands), the same
// routing of writes, the same configuration checks, per-replica stats. It
// differs where rueidis differs from go-redis, and that difference is why
// it exists: it is the cheaper of the two when hedging is armed and does
// not fire (BENCHMARKS.md).
//
// # Why a second Redis adapter
//
// go-redis v9 does not stop a command whose context is cancelled once it
// holds a connection (hedgeredis's package docs trace the code path), so
// hedgeredis must run every copy, the primary included, on a goroutine of
// its own (hedge.Config.ReapInBackground), lest a loser hold the caller
// until a stalled server answers. That hand-off is paid on every read,
// hedged or not.
//
// rueidis returns from Client.Do as soon as the context ends, leaving the
// reply to be read and dropped by the connection's own reader: its
// auto-pipelining multiplexes commands over one connection per server,
// with a writer and a reader goroutine per connection, and a cancelled
// command only stops waiting for its reply (pipe.Do in rueidis v1.0.79:
// the caller selects on the reply channel and ctx.Done(); on
// cancellation a goroutine drains the reply). So a losing copy returns at
// once, and hedgerueidis runs the primary on the caller's goroutine, as
// hedge.Do does by default; Do returns after every copy has returned,
// which with rueidis is immediately after the winner. No goroutine is
// started for a read that is not hedged.
//
// One rueidis detail matters here. A command whose context has a deadline
// but nothing else in flight on its connection is written and read
// synchronously on the caller's goroutine, bounded by the deadline only
// (syncDo): cancellation is not looked at then. Each copy's context is
// therefore handed to rueidis without its deadline (Done still closes when
// the deadline passes), which sends the command through the pipeline,
// where cancellation works. TestDeadlineDoesNotHoldLosers checks it
// against a stalled server.
//
// # What a read costs
//
// A read that does not hedge costs hedge.Do's bookkeeping and one
// pipelined rueidis call. The adapter adds no allocation (a read's state
// is used again once hedge.Do has returned) and no write to memory that
// all reads share: its counters are per replica, and Close finds the
// copies in flight from them. A plain rueidis call with a context that
// has no Done channel, on a connection that has never pipelined, is
// written and read on the caller's goroutine, which costs less CPU when
// calls come one at a time; but that path is deaf to cancellation (as
// rueidis documents: cancelling works only in pipeline mode), and once a
// connection pipelines it does so for good. A copy that its hedge must
// be able to stop cannot take it. BenchmarkGet measures each of these
// paths, and hedge.Do alone around a plain call, in one run.
//
// # Reads and writes
//
// A command is hedged when its name is on the allow-list (see
// hedgeredis's package docs for how the list was chosen and what is left
// out on purpose); its operation class in the Hedger's stats is the
// upper-case name. The typed reads (Get, MGet, HGet, HMGet, HGetAll,
// Exists, StrLen, LRange, SMembers, ZScore, ZRange) build each copy's
// command from their arguments. Do takes a command built with B(): a read
// is pinned (rueidis.Completed.Pin) since copies share it, so rueidis does
// not recycle its buffer; a write is sent as it is.
//
// A server's reply is the answer, even an error reply (a missing key,
// WRONGTYPE): every replica would give it. Transport errors and replies
// that say "not this replica, not now" (LOADING, BUSY, MASTERDOWN,
// TRYAGAIN, CLUSTERDOWN, max clients) fail the copy, and the next copy
// goes at once. When every copy fails, the result carries hedge.Do's
// error.
//
// Set, SetNX, Del and every command sent with Do that is not on the
// allow-list go to the primary (Config.Primary), once, on the caller's
// goroutine, never through the Hedger: replicas refuse writes, and a
// second copy to the primary would queue behind the stall it escapes.
// rueidis retries only read-only commands on network errors (unless
// ClientOption.DisableRetry), so a write is sent at most once by it.
//
// Replicas may lag the primary: read your own writes from Primary.
//
// # Losers and connections
//
// A losing copy's command stays in its connection's pipeline until the
// server answers; its reply is then read and dropped, so the connection
// stays usable and in step (TestStalledReplica reads every key from every
// replica after a stall and checks each reply is its own). Commands sent
// later to a stalled server queue behind it on the same connection: the
// default Picker, which counts copies in flight per replica, steers
// primaries away from it while it holds more than the others, and
// hedging sends the rest elsewhere.
//
// One wait cancellation does not end: rueidis opens a server's pipelined
// connections when commands first land on them, and runs a new
// connection's handshake (HELLO) on that command's goroutine, bounded by
// its dial timeout (ClientOption.Dialer.Timeout) and deaf to the
// command's context. A copy that opens a connection to a stalled server is
// held that long, its hedge won or not, and a caller whose primary it is
// waits with it. Open the connections before traffic (enough reads on each
// replica to land on every one of its connections, as hedge bench's
// warm-up does), and keep the dial timeout short.
//
// # Redis Cluster
//
// ClusterClient hedges the reads of a Redis Cluster within each key's
// slot, over a rueidis client in cluster mode:
//
//	c, err := hedgerueidis.NewClusterFromOptions(ctx, rueidis.ClientOption{InitAddress: masters}, hedgerueidis.ClusterConfig{})
//	v, err := c.Get(ctx, "user:42").ToString()  // a node of the key's slot, hedged to another
//	vals, err := c.MGet(ctx, "user:42", "user:43") // one leaf per slot, one fan-out
//
// It reads the layout with CLUSTER SLOTS when it is made, and sends each
// copy through the node clients rueidis keeps (Nodes). Its Hedger has one
// replica per node and one shard per master with its replicas
// (hedge.Config.Shards), named by address. A read goes to its key's
// slot's master or one of its replicas, and its hedge to another node of
// that slot (hedge.DoShard). MGet groups its keys by slot and reads each
// slot's keys as a leaf of one fan-out (hedge.DoFan). Writes, and any
// other command, go once through the rueidis cluster client.
//
// rueidis sends READONLY to the replicas only when the option sets
// SendToReplicas (NewClusterFromOptions sets one that keeps rueidis's own
// commands on the masters), and only on connections it makes for them:
// list masters alone as InitAddress, since it keeps the connection it
// made to a seed. A replica without READONLY answers MOVED; such a copy
// fails, and the next copy goes to another node of the slot. When every
// copy was redirected (the layout changed since the client was made), the
// read goes once through the rueidis cluster client.
//
// # What it is not
//
// Not a replication manager (the layout is the one read when the client
// was made; Client's primary is the one you name), not a cache (DoCache is not hedged: use Primary or Replica),
// and not a pipeline or transaction API (use Primary for MULTI, pipelines,
// pub/sub and blocking commands).
package hedgerueidis
