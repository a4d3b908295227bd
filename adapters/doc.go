// Package adapters opens a session store from a URL, whatever its
// backend, in the manner of go-cloud's URL openers and database/sql's
// drivers. It knows no backend: each backend package registers the
// schemes it opens (Register) when it is imported, so a program links
// only the backends it imports:
//
//	import (
//		"github.com/agentsessions/sessions/adapters"
//		_ "github.com/agentsessions/sessions/adapters/sqlite" // sqlite:
//	)
//
//	st, err := adapters.Open(ctx, "sqlite:///var/lib/agent/sessions.db")
//
// Package adapters/all imports every backend.
//
// # URLs
//
//	memory://                                  an in-process store (tests, demos); every Open makes a new one
//	sqlite:///var/lib/agent/sessions.db        an SQLite file, absolute path
//	sqlite:rel/path.db                         an SQLite file, relative path
//	sqlite::memory:                            a private in-memory SQLite database
//	redis://[user:pass@]host:port[/db]         one Redis server
//	rediss://…                                 the same over TLS
//	unix://[user:pass@]/path/to/socket[?db=N]  one Redis server on a Unix socket
//	redis+cluster://host1:port1,host2:port2    a Redis Cluster
//	rediss+cluster://…                         the same over TLS
//	redis+sentinel://s1:p1,s2:p2/db?master_name=NAME
//	                                           a sentinel-managed primary
//	rediss+sentinel://…                        the same over TLS
//	mongodb://[user:pass@]host:port[,…]/database
//	mongodb+srv://[user:pass@]host/database    MongoDB, or a server of its wire protocol
//	postgres://[user:pass@]host[:port][,…]/database
//	postgresql://…                             PostgreSQL (pgx's URL forms)
//
// Escape what a URL gives a meaning to, in passwords and paths alike: '%'
// as %25, '#' as %23, '@' as %40, '/' as %2F, ' ' as %20.
//
// # Options
//
// Options ride the query string and every one is either applied or an
// error wrapping ErrInvalidDSN: an option the scheme does not know, an
// option given twice, a value that does not parse, a ';' (url.URL.Query
// drops such pairs silently; separate options with '&') and a '#' are all
// refused. Redis and MongoDB URLs also take their driver's own options,
// which the driver validates; an option neither knows is refused.
//
// memory:
//
//	ttl=<duration>            expire a session's history this long after its last write; default 0, never
//	refresh_on_read=<bool>    reads restart the expiry clock too; default false
//
// sqlite: (the Python SDK's SQLiteSession layout, so both share a file)
//
//	sessions_table=<name>     table of session rows; default agent_sessions
//	messages_table=<name>     table of items; default agent_messages
//	checkpoints_table=<name>  table of run-state checkpoints; default agent_checkpoints
//	busy_timeout=<duration>   how long a write waits for another connection's lock; default 5s
//	synchronous=full|normal   fsync at every commit (full, the default: a commit survives a power loss) or at
//	                          checkpoints only (normal: a commit survives a crash of the process, not of the machine)
//
// redis, rediss, unix, redis+cluster, rediss+cluster, redis+sentinel,
// rediss+sentinel:
//
//	key_prefix=<prefix>       start of every key; default agents:native (layout=native), agents:session (layout=python, the Python SDK's)
//	layout=native|python      key layout; default native (python: the Python SDK's RedisSession keys)
//	ttl=<duration>            expire a session's keys this long after its last write; default 0, never
//	refresh_on_read=<bool>    reads restart the expiry clock too; default false
//	max_batch_bytes=<int>     largest batch one write sends; default 67108864 (64 MiB), negative for no limit
//	tls_ca_file=<path>        rediss: PEM file of the CAs to trust instead of the system's; certificates are always verified
//	                          unless go-redis's skip_verify=true turns verification off
//
// A rediss:// URL that names a server speaking plain Redis fails at once
// saying so, rather than waiting out the TLS handshake's timeouts.
//
// and go-redis's own: db, dial_timeout, read_timeout, write_timeout,
// pool_size, max_retries, min_idle_conns, … (see go-redis's ParseURL,
// ParseClusterURL and ParseFailoverURL); master_name for sentinel URLs.
//
// mongodb, mongodb+srv: (the Python SDK's MongoDBSession layout)
//
//	sessions_collection=<name>   collection of session documents; default agent_sessions
//	messages_collection=<name>   collection of message documents; default agent_messages
//	ttl=<duration>               expire a session this long after its last write; default 0, never
//	max_batch_bytes=<int>        largest batch document; default and most 16777216 (16 MiB)
//
// and the MongoDB connection-string options (replicaSet, authSource, tls,
// directConnection, …). The database is the URL's path; default agents. A
// collection name must be 1 to 120 bytes of UTF-8 without '$' or NUL, and
// not begin with "system.".
//
// postgres, postgresql:
//
//	schema=<name>             schema of the tables; default none (the search_path decides)
//	sessions_table=<name>     table of session rows; default agent_sessions
//	messages_table=<name>     table of items; default agent_messages
//	checkpoints_table=<name>  table of run-state checkpoints; default agent_checkpoints
//
// and pgx's and pgxpool's own (sslmode, connect_timeout, pool_max_conns,
// application_name, …), validated by pgx.
//
// With Options.ReadOnly, sqlite opens the file read-only (a missing file
// or missing tables are errors), mongodb creates no index or collection,
// postgres creates no table; memory and redis create nothing on open in
// any case.
//
// # Passwords
//
// Errors from Open and OpenWith never hold the URL's password, even when
// the URL does not parse; Redact masks it for messages of your own.
//
// # Writing a backend
//
// A backend implements URLOpener, parses its options with ParseQuery (or
// ParsePassthroughQuery when its driver has options of its own), wraps its
// store with NewStore, so that Declared is probed from its session type,
// and registers its schemes in an init function, conventionally in a file
// named urls.go. Its Store may implement Lister, and
// driver.RawAppender for the conformance suite's corrupt-record clause.
// Options.ReadOnly asks it to create nothing.
//
// # Listing large stores
//
// Lister returns every id at once. A store of many sessions also
// implements PageLister, a page of ids after a cursor (every backend here
// does), and may implement Summarizer, what sessionctl list shows of a
// page of sessions with a fixed number of queries or round trips
// (SQLite, PostgreSQL, Redis).
// Callers probe for them, as database/sql probes a driver's optional
// interfaces: ListPage pages a store that is only a Lister from
// ListSessions; a store without Summarizer is summarized by reading each
// session.
package adapters
