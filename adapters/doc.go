// Package adapters opens a session store from a URL, whatever its backend,
// in the manner of go-cloud's URL openers:
//
//	memory://                                  an in-process store (tests, demos)
//	sqlite:///var/lib/agent/sessions.db        an SQLite file (the embedded default)
//	sqlite:relative/path.db                    an SQLite file, relative path
//	sqlite::memory:                            a private in-memory SQLite database
//	redis://[user:pass@]host:port/db           a standalone Redis
//	rediss://…                                 the same over TLS
//	redis+cluster://host1:port1,host2:port2    a Redis Cluster
//	mongodb://host:port/database               MongoDB (also mongodb+srv://)
//
// Backend options ride the query string and are validated: an unknown
// option is an error, never ignored. See Open for each backend's options.
package adapters
